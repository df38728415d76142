"""context_probes: pairs of contexts for one span, counted right and context-dependent."""

import json

import pytest

from dense_entity.evaluation import probes as probes_lib


class _FakeRetriever:
  """Answers by a word of the text: 'Tbilisi' -> the country, else the U.S. state."""

  titles = ["Georgia (country)", "Georgia (U.S. state)", "Paris"]

  def __init__(self):
    self.asked = []

  def retrieve(self, mentions, k):
    self.asked.extend(mentions)
    out = []
    for text, start, end in mentions:
      if text[start:end].lower() == "paris":
        out.append([("Paris", 0.9)])
      elif "Tbilisi" in text:
        out.append([("Georgia (country)", 0.8)])
      else:
        out.append([("Georgia (U.S. state)", 0.7)])
    return out


def test_groups_count_context_dependent_and_correct_top1():
  probes = [("Atlanta is in [[Georgia]].", "Georgia (U.S. state)"),
            ("[[georgia]]'s capital is Tbilisi.", "Georgia_(country)"),
            ("[[Paris]] is in France.", "Paris"),
            ("[[Paris]] abducted Helen.", "Paris (mythology)"),  # not in the KB: not scored
            ("[[Zug]] is small.", "Zug")]  # a group of one: not a pair
  retriever = _FakeRetriever()
  report = probes_lib.run_probes(retriever, probes, redirects={})
  assert retriever.asked[0] == ("Atlanta is in Georgia.", 14, 21)
  assert [r["correct"] for r in report["probes"]] == [True, True, True, False, False]
  assert [r["gold_in_kb"] for r in report["probes"]] == [True, True, True, False, False]
  assert report["groups"] == 1  # Georgia; the Paris pair has a gold outside the KB
  assert report["groups_top1_differs"] == 1 and report["groups_all_correct"] == 1
  assert report["probes_scored"] == 3 and report["probes_correct"] == 3
  assert "3/3 probes right" in probes_lib.format_report(report)


def test_default_probes_are_pairs_and_bad_files_name_the_line(tmp_path):
  spans = [text[text.index("[[") + 2:text.index("]]")].casefold()
           for text, _ in probes_lib.DEFAULT_PROBES]
  assert len(spans) % 2 == 0 and spans[::2] == spans[1::2]
  path = tmp_path / "probes.jsonl"
  good = json.dumps({"text": "[[A]] b", "gold": "A"}) + "\n\n"
  for bad, message in (('{"text": "x"}', "probes.jsonl:3: expected an object"),
                       ('[1, 2]', "probes.jsonl:3: expected a JSON object, got list"),
                       ('{"text": "[[A]] b"', "probes.jsonl:3: invalid JSON"),
                       ('{"text": "[[A]] b", "gold": 5}', "probes.jsonl:3: \"gold\" must be"),
                       ('{"text": "no mark", "gold": "A"}', "probes.jsonl:3: no mention marked"),
                       ('{"text": "[[A]] [[B]]", "gold": "A"}', "probes.jsonl:3: marks 2")):
    path.write_text(good + bad + "\n")
    with pytest.raises(ValueError, match=message):
      probes_lib.read_probes(str(path))
  path.write_text("\n")
  with pytest.raises(ValueError, match="probes.jsonl: no probes"):
    probes_lib.read_probes(str(path))
  with pytest.raises(ValueError, match="probe 1: marks 2 mentions"):
    probes_lib.run_probes(_FakeRetriever(), [("[[a]] and [[b]]", "A")], {})


def test_command_reports_bad_probes_and_workspaces_without_a_traceback(tmp_path):
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"text": "[[Georgia]]", "gold": 5}\n')
  for args, status, message in (
      (["--probes", str(bad)], 2, "bad.jsonl:1: \"gold\" must be"),
      (["--probes", str(tmp_path / "missing.jsonl")], 2, "missing.jsonl"),
      ([], 1, "cannot load")):
    proc = subprocess.run([sys.executable, "-m", "dense_entity.context_probes",
                           f"--workspace={tmp_path / 'nowhere'}", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == status, proc.stderr[-1000:]
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_command_writes_no_report_when_no_probe_can_be_scored(tmp_path):
  # The built-in probes' golds (Earth, Doric order, ...) are not in the tiny KB: nothing is
  # measured, so the command exits 1 and an earlier report stays as it was.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tests import testutil  # pylint: disable=g-import-not-at-top
  from tests.dense_entity.retrieval import test_retriever  # pylint: disable=g-import-not-at-top
  ws = test_retriever.build_tiny_workspace(tmp_path / "ws")
  report = tmp_path / "ws" / probes_lib.REPORT
  report.parent.mkdir(parents=True)
  report.write_text('{"earlier": true}')
  proc = subprocess.run([sys.executable, "-m", "dense_entity.context_probes",
                         f"--workspace={ws}"], cwd=testutil.REPO_ROOT, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "nothing was scored, no report written" in proc.stderr
  assert report.read_text() == '{"earlier": true}'
