"""evaluate: the seen / unseen and ambiguous-span splits of held-out recall; inputs with
nothing to score are errors that leave the earlier report in place."""

import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from dense_entity.evaluation import evaluator
from dense_entity.evaluation import reports
from dense_entity.kb import schema
from dense_entity.kb import titles
from tests import testutil


def test_split_by_training_gold(tmp_path):
  # Training anchors link to 'Ore River' and to 'Ore Stream', a redirect to 'Ore River';
  # 'Port Alder' is never a training gold.
  with open(os.path.join(tmp_path, schema.ALIAS_COUNTS_FILE), "w", encoding="utf-8") as f:
    f.write("ore river\tOre River\t3\nthe stream\tOre_Stream\t1\n")
  redirects = {"Ore Stream": "Ore River"}
  assert evaluator.training_entities(str(tmp_path), redirects) == {"Ore River"}
  kb_titles = {"Ore River", "Port Alder", "Birch Cove"}
  retrievers = types.SimpleNamespace(resolver=titles.TitleResolver(kb_titles, redirects),
                                     kb_titles=kb_titles)
  gold = ["Ore River", "Port Alder", "ore_Stream", "Port Alder"]
  ranked = [["Ore River"], ["Birch Cove", "Port Alder"], ["Birch Cove"], ["Port Alder"]]
  rankings = {name: ranked for name in reports.SYSTEMS}
  split = evaluator.split_by_training_gold(gold, rankings, retrievers, str(tmp_path))
  seen, unseen = split["seen"]["DEER"], split["unseen"]["DEER"]
  assert seen["num_in_kb"] == 2 and unseen["num_in_kb"] == 2
  assert seen["recall@1"] == 0.5  # 'Ore River' found, 'ore_Stream' (= Ore River) not
  assert unseen["recall@1"] == 0.5 and unseen["recall@10"] == 1.0


def test_split_by_link_source_scores_each_source_apart():
  kb_titles = {"Ore River", "Port Alder"}
  retrievers = types.SimpleNamespace(resolver=titles.TitleResolver(kb_titles, {}),
                                     kb_titles=kb_titles)
  features = [{schema.LINK_SOURCE: s} for s in ("prose", "table", "prose", "table")]
  gold = ["Ore River", "Port Alder", "Port Alder", "Ore River"]
  ranked = [["Ore River"], ["Ore River", "Port Alder"], ["Port Alder"], ["Port Alder"]]
  split = evaluator.split_by_link_source(features, gold, {"DEER": ranked, "BM25": ranked},
                                         retrievers)
  assert list(split) == ["prose", "table"]
  assert split["prose"]["DEER"]["recall@1"] == 1.0 and split["prose"]["DEER"]["num_in_kb"] == 2
  assert split["table"]["BM25"]["recall@1"] == 0.0 and split["table"]["BM25"]["recall@10"] == 0.5
  # Records of older extractions have no link source: no split.
  assert evaluator.split_by_link_source([{schema.LINK_SOURCE: ""}] * 4, gold,
                                        {"DEER": ranked}, retrievers) == {}


def test_heldout_report_splits_by_link_source_when_the_records_have_one(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tests.dense_entity.retrieval import test_retriever  # pylint: disable=g-import-not-at-top
  root = test_retriever.build_tiny_workspace(tmp_path / "ws")
  path = tf.io.gfile.glob(os.path.join(root, "extract", schema.HELDOUT_MENTIONS_PREFIX + "-*"))[0]
  with tf.io.TFRecordWriter(path) as w:
    for i, row in enumerate(testutil.MENTIONS):
      w.write(testutil.mention_example(row, mention_id=f"1:{i}",
                                       link_source="table" if i % 2 else "prose")
              .SerializeToString())
  held = evaluator.read_heldout_mentions(os.path.join(root, "extract"))
  assert [m[schema.LINK_SOURCE] for m in held] == ["prose", "table"] * 4
  report = evaluator.evaluate_workspace(str(root))
  split = report["datasets"]["heldout"]["by_link_source"]
  assert sorted(split) == ["prose", "table"]
  assert split["prose"]["DEER"]["num_in_kb"] + split["table"]["DEER"]["num_in_kb"] == (
      report["datasets"]["heldout"]["num_in_kb"])
  assert "| prose | 4 | " in reports.format_markdown(report)


def test_split_ambiguous_spans_keeps_aliases_of_several_entities_and_blanks_contexts():
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  table = baselines.AliasTable({"georgia": {"Georgia (country)": 4, "Georgia (U.S. state)": 2},
                                "ore river": {"Ore River": 3}})
  seen_by_deer = []

  def deer(features):
    seen_by_deer.extend(features)
    # Without context the more frequent sense comes first.
    return [["Georgia (country)", "Georgia (U.S. state)"] for _ in features], None

  kb_titles = {"Georgia (country)", "Georgia (U.S. state)", "Ore River", "Georgia"}
  retrievers = types.SimpleNamespace(resolver=titles.TitleResolver(kb_titles, {}),
                                     alias_table=table, deer=deer, kb_titles=kb_titles)
  def mention(span, sentence):
    return {schema.MENTION_SPAN: span, schema.MENTION_LEFT: "in", schema.MENTION_RIGHT: "x",
            schema.MENTION_SENTENCE: sentence}
  features = [mention("Georgia", "Atlanta is in [MASK]"), mention("georgia", "Tbilisi, [MASK]"),
              mention("Ore River", "the [MASK]"), mention("Georgia", "[MASK] O'Keeffe")]
  # The last gold is not among the alias's entities: the alias table cannot be right, so the
  # mention is not counted as one the context has to decide.
  gold = ["Georgia (U.S. state)", "Georgia (country)", "Ore River", "Georgia"]
  ranked = [["Georgia (U.S. state)"], ["Georgia (country)"], ["Ore River"], ["Georgia"]]
  rankings = {name: ranked for name in reports.SYSTEMS}
  out = evaluator.split_ambiguous_spans(features, gold, rankings, retrievers)
  assert out["num_mentions"] == 2
  assert out["systems"]["DEER"]["recall@1"] == 1.0
  assert out["systems"]["DEER (no context)"]["recall@1"] == 0.5
  assert out["systems"]["DEER (no context)"]["recall@10"] == 1.0
  assert [f[schema.MENTION_SENTENCE] for f in seen_by_deer] == ["", ""]
  assert {f[schema.MENTION_SPAN] for f in seen_by_deer} == {"Georgia", "georgia"}
  assert all(f[schema.MENTION_LEFT] == f[schema.MENTION_RIGHT] == "" for f in seen_by_deer)


# ----------------------------------------------------------------------------- nothing to score

_OLD_REPORT = '{"finished": "an earlier evaluation"}'
_ORE_RIVER = '{"text": "The Ore River meets the sea.", "mentions": [{"start": 4, "end": 13, ' \
             '"entity": "Ore River"}]}\n'


@pytest.fixture(scope="module")
def tiny_workspace(tmp_path_factory):
  from tests.dense_entity.retrieval import test_retriever  # pylint: disable=g-import-not-at-top
  return test_retriever.build_tiny_workspace(tmp_path_factory.mktemp("eval_ws"))


@pytest.fixture
def workspace(tiny_workspace, tmp_path):
  """A copy of the tiny workspace with an earlier report in WS/reports/eval.json."""
  root = str(tmp_path / "ws")
  shutil.copytree(tiny_workspace, root)
  os.makedirs(os.path.join(root, "reports"), exist_ok=True)
  with open(os.path.join(root, reports.REPORT_FILE), "w", encoding="utf-8") as f:
    f.write(_OLD_REPORT)
  return root


def _empty_heldout(root):
  """Rewrites the held-out shard of the workspace's extraction with no record (as a small dump
  with --heldout_fraction=0.001 leaves it)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for path in tf.io.gfile.glob(os.path.join(root, "extract",
                                            schema.HELDOUT_MENTIONS_PREFIX + "-*")):
    with tf.io.TFRecordWriter(path):
      pass


def _report(root):
  with open(os.path.join(root, reports.REPORT_FILE), encoding="utf-8") as f:
    return f.read()


def test_empty_heldout_split_without_datasets_is_an_error_and_keeps_the_report(workspace):
  _empty_heldout(workspace)
  with pytest.raises(ValueError, match=r"extract: the held-out split has 0 mentions.*"
                     r"heldout_fraction"):
    evaluator.evaluate_workspace(workspace)
  assert _report(workspace) == _OLD_REPORT


def test_empty_heldout_split_is_skipped_when_datasets_are_given(workspace, tmp_path, caplog):
  _empty_heldout(workspace)
  dataset = tmp_path / "ore.jsonl"
  dataset.write_text(_ORE_RIVER, encoding="utf-8")
  report = evaluator.evaluate_workspace(workspace, [f"jsonl:{dataset}"])
  assert "held-out split has 0 mentions" in caplog.text
  assert list(report["datasets"]) == ["ore"] and "systems" not in report
  assert "held-out split has 0 mentions" in report["heldout_skipped"]
  assert report["datasets"]["ore"]["num_in_kb"] == 1
  assert json.loads(_report(workspace))["datasets"]["ore"]["num_mentions"] == 1
  assert reports.format_table(report).startswith("held-out mentions: skipped (")


@pytest.mark.parametrize("name,content,message", [
    # AIDA with spaces instead of tabs: used to be 0 mentions scored 0.000 everywhere.
    ("spaced.tsv", "-DOCSTART- (1)\nThe\nOre B Ore_River Ore_River\n",
     r"spaced.tsv:3: columns separated by spaces, not tabs"),
    ("nil.jsonl", '{"text": "Zorblax won.", "mentions": [{"start": 0, "end": 7, '
     '"entity": null}]}\n', r"nil.jsonl: none of its 1 mentions can be scored \(1 NIL\)"),
    ("same_name.jsonl", None, r"already reported as 'same_name'"),
])
def test_a_dataset_with_nothing_to_score_is_an_error_and_keeps_the_report(
    workspace, tmp_path, name, content, message):
  path = tmp_path / name
  path.write_text(content or _ORE_RIVER, encoding="utf-8")
  specs = [f"{'aida' if name.endswith('.tsv') else 'jsonl'}:{path}"]
  if content is None:  # two datasets that would be reported under one name
    other = tmp_path / "other" / name
    other.parent.mkdir()
    other.write_text(_ORE_RIVER, encoding="utf-8")
    specs.append(f"jsonl:{other}")
  with pytest.raises(ValueError, match=message):
    evaluator.evaluate_workspace(workspace, specs)
  assert _report(workspace) == _OLD_REPORT


def test_a_dataset_without_gold_in_the_kb_prints_na_for_in_kb_recall(workspace, tmp_path):
  dataset = tmp_path / "elsewhere.jsonl"
  dataset.write_text('{"text": "Zorblax won.", "mentions": [{"start": 0, "end": 7, '
                     '"entity": "Zorblax"}]}\n', encoding="utf-8")
  report = evaluator.evaluate_workspace(workspace, [f"jsonl:{dataset}"])
  section = report["datasets"]["elsewhere"]
  assert section["num_mentions"] == 1 and section["num_in_kb"] == 0
  table = reports.format_table(report)
  # The name column is as wide as the longest name ('AT-Prior+TR') and a space, so that
  # every row's figures stand under the header's (they were shifted by one on that row).
  assert "  DEER              n/a      n/a      n/a" in table.splitlines()
  assert "  AT-Prior+TR       n/a      n/a      n/a" in table.splitlines()
  header = "  system            R@1     R@10    R@100"
  rows = table.splitlines()[table.splitlines().index(header):]
  assert {len(row) for row in rows[:6]} == {len(header)}
  assert "| DEER | n/a (0.000) | n/a (0.000) | n/a (0.000) |" in reports.format_markdown(report)


def test_evaluate_command_exits_2_on_a_spaced_aida_file_and_keeps_the_report(workspace,
                                                                              tmp_path):
  path = tmp_path / "kore_spaced.tsv"
  path.write_text("-DOCSTART- (1)\nDavid B David David_Beckham\n", encoding="utf-8")
  proc = subprocess.run([sys.executable, "-m", "dense_entity.evaluate",
                         f"--workspace={workspace}", f"--dataset=aida:{path}"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].startswith(
      f"python -m dense_entity.evaluate: error: {path}:2: columns separated by spaces")
  assert _report(workspace) == _OLD_REPORT


def test_deer_alone_is_scored_without_building_the_baselines(workspace, tmp_path,
                                                            monkeypatch):
  full = evaluator.evaluate_workspace(workspace)
  def no_bm25(*args, **kwargs):
    raise AssertionError("BM25 built although not asked for")
  monkeypatch.setattr(evaluator.baselines, "BM25Index", no_bm25)
  report = evaluator.evaluate_workspace(workspace, systems=["DEER", "AT-Prior"])
  held = report["datasets"]["heldout"]
  assert report["systems_evaluated"] == ["DEER", "AT-Prior"]
  assert list(held["systems"]) == ["DEER", "AT-Prior"] == list(report["systems"])
  assert held["systems"]["DEER"] == full["datasets"]["heldout"]["systems"]["DEER"]
  assert list(held["by_gold_seen_in_training"]["seen"]) == ["DEER", "AT-Prior"]
  table = reports.format_table(report)
  assert "  DEER " in table and "BM25" not in table and "AT-Ext" not in table
  markdown = reports.format_markdown(report)
  assert "| AT-Prior | " in markdown and "| BM25 |" not in markdown
  with pytest.raises(ValueError, match=r"lack DEER, which every report needs"):
    evaluator.evaluate_workspace(workspace, systems=["BM25"])
  with pytest.raises(ValueError, match=r"unknown system\(s\) \['BLINK'\]"):
    evaluator.evaluate_workspace(workspace, systems=["DEER", "BLINK"])


# ----------------------------------------------------------------------------- NIL calibrator

_NIL_SET = "".join(json.dumps(r) + "\n" for r in [
    {"text": "The Ore River meets the sea.", "mentions": [{"start": 4, "end": 13,
                                                           "entity": "Ore River"}]},
    {"text": "A ferry near Port Alder at dusk.", "mentions": [{"start": 13, "end": 23,
                                                               "entity": "Port Alder"}]},
    {"text": "Bob Smith met us.", "mentions": [{"start": 0, "end": 9, "entity": "--NME--"}]},
    {"text": "Jane Doe left.", "mentions": [{"start": 0, "end": 8, "entity": None}]},
])


def _fake_deer(self, features, k=evaluator.TOP_K):
  """DEER stand-in: a confident right answer for the two KB names, a weak guess otherwise."""
  del self, k
  known = {"Ore River": ["Ore River", "Port Alder"], "Port Alder": ["Port Alder", "Ore River"]}
  rows = [(known[f[schema.MENTION_SPAN]], [0.9, 0.2]) if f[schema.MENTION_SPAN] in known
          else (["Port Alder", "Ore River"], [0.3, 0.28]) for f in features]
  return [r[0] for r in rows], [r[1] for r in rows]


def test_evaluate_fits_the_nil_calibrator_and_reports_nil_metrics(workspace, tmp_path,
                                                                  monkeypatch):
  from dense_entity.retrieval import nil as nil_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(evaluator.Retrievers, "deer", _fake_deer)
  dataset = tmp_path / "nilset.jsonl"
  dataset.write_text(_NIL_SET, encoding="utf-8")
  path = str(tmp_path / "nil_calibrator.json")
  report = evaluator.evaluate_workspace(workspace, [f"jsonl:{dataset}"],
                                        fit_nil_calibrator=path)
  nil = report["datasets"]["nilset"]["nil"]
  assert nil["in_sample"] and nil["num_gold_nil"] == 2 and nil["num_mentions"] == 4
  assert (nil["nil_precision"], nil["nil_recall"], nil["accuracy"]) == (1.0, 1.0, 1.0)
  assert nil["accuracy_without_nil"] == 0.5
  calibrator = nil_lib.NilCalibrator.load(path, report["model_fingerprint"])
  assert calibrator.info["fitted_on"]["dataset"] == "nilset"
  assert calibrator.info["fitted_on"]["num_nil_label"] == 2
  assert 0.0 < calibrator.threshold < 1.0
  assert os.path.isfile(os.path.join(workspace, "reports", reports.RELIABILITY_FILE))
  with open(os.path.join(workspace, "reports", reports.TABLE_FILE), encoding="utf-8") as f:
    assert "NIL prediction" in f.read()
  # Scoring a given calibrator (not fitted here): the same figures, not in-sample.
  again = evaluator.evaluate_workspace(workspace, [f"jsonl:{dataset}"], nil_calibrator=path)
  assert not again["datasets"]["nilset"]["nil"]["in_sample"]
  assert again["datasets"]["nilset"]["nil"]["accuracy"] == 1.0
  with pytest.raises(ValueError, match="NIL dataset 'other' is not among"):
    evaluator.evaluate_workspace(workspace, [f"jsonl:{dataset}"], fit_nil_calibrator=path,
                                 nil_dataset="other")
