"""Context probes: one ambiguous span in two contexts, does the top-1 entity follow the context?

The paper's Table 6 shows, by examples, that DEER's nearest entities change with the mention's
context. This runs such probes on a workspace and counts them: for every pair (the same span,
two contexts, two gold entities) it reports whether the top-1 differs between the contexts and
whether both are right. The default probes are English sentences written for this check (not
from any dump); the golds are titles of entities that the default and all-dumps workspaces of
README hold. A probe whose gold is not in the KB is reported and not scored.

Usage:
  python -m dense_entity.context_probes --workspace=WS [--probes=FILE.jsonl] [--index=brute_force]
FILE.jsonl: one {"text": "... [[span]] ...", "gold": "Title"} per line; consecutive lines with the
same span (case-folded) form a group. Writes WS/reports/context_probes.json:
  {"probes": [{"text", "gold", "top1", "score", "correct", "gold_in_kb"}],
   "groups": n, "groups_top1_differs": n, "groups_all_correct": n, "probes_correct": n,
   "probes_scored": n}
"""

import itertools
import json
import os
from typing import Dict, List, Sequence

from absl import app
from absl import flags

from dense_entity import metrics

REPORT = os.path.join("reports", "context_probes.json")

DEFAULT_PROBES = [
    ("The [[civil war]] in Angola between the MPLA and UNITA lasted until 2002.",
     "Angolan Civil War"),
    ("The Bolsheviks won the [[civil war]] in Russia after the revolution of 1917.",
     "Russian Civil War"),
    ("[[Earth]] is the third planet from the Sun and orbits it once a year.", "Earth"),
    ("Empedocles held that [[earth]], water, air and fire are the four classical elements.",
     "Earth (classical element)"),
    ("The temple has [[Doric]] columns and a marble frieze.", "Doric order"),
    ("Sparta spoke a [[Doric]] dialect of ancient Greek.", "Doric Greek"),
    ("[[Apollo]] was the Greek god of music, prophecy and the sun.", "Apollo"),
    ("[[Apollo]] 11 landed the first astronauts on the Moon in 1969, a NASA program.",
     "Apollo program"),
    ("Atlanta is the capital of [[Georgia]], a state in the southeastern United States.",
     "Georgia (U.S. state)"),
    ("[[Georgia]] declared independence from the Soviet Union; its capital is Tbilisi.",
     "Georgia (country)"),
    ("[[Paris]] is the capital of France, on the river Seine.", "Paris"),
    ("[[Paris]], prince of Troy, abducted Helen and started the Trojan War.",
     "Paris (mythology)"),
    ("[[Mercury]] is a liquid metal, a chemical element with the symbol Hg.",
     "Mercury (element)"),
    ("[[Mercury]] was the first human spaceflight program of NASA, before Gemini.",
     "Project Mercury"),
    ("[[Washington]] was the first president of the United States and a general.",
     "George Washington"),
    ("Seattle is the largest city in [[Washington]], a state on the Pacific coast.",
     "Washington (state)"),
]


def read_probes(path: str) -> List[tuple]:
  """Reads a probe JSONL file; raises ValueError naming the file and line of a bad record."""
  probes = []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
        probes.append((record["text"], record["gold"]))
      except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}:{n}: expected {{\"text\": ..., \"gold\": ...}}: {e}") from e
  return probes


def run_probes(retriever, probes: Sequence[tuple], redirects: Dict[str, str]) -> dict:
  """Links every probe and counts the groups whose top-1 follows the context.

  Args:
    retriever: anything with `retrieve([(text, start, end)], k)` -> [[(title, score)]] and a
      `titles` list (dense_entity.retriever.EntityRetriever).
    probes: (marked text, gold title) pairs; consecutive probes with the same span
      (case-folded) form a group.
    redirects: redirect map used to resolve gold and predicted titles (metrics.resolve_title).

  Returns:
    The report described in the module docstring.

  Raises:
    ValueError: when a probe does not mark exactly one mention (names the probe).
  """
  from dense_entity import cli  # pylint: disable=g-import-not-at-top
  mentions, spans = [], []
  for i, (marked, _) in enumerate(probes):
    text, marks, _ = cli.parse_link_input(marked, f"probe {i + 1}")
    if len(marks) != 1:
      raise ValueError(f"probe {i + 1} marks {len(marks)} mentions, expected 1: {marked!r}")
    start, end = marks[0]
    mentions.append((text, start, end))
    spans.append(text[start:end].casefold())
  results = retriever.retrieve(mentions, k=1)
  kb = set(retriever.titles)
  rows = []
  for (marked, gold), ranked in zip(probes, results):
    title, score = ranked[0] if ranked else (None, float("nan"))
    resolved = metrics.resolve_title(gold, redirects)
    rows.append({"text": marked, "gold": gold, "top1": title, "score": float(score),
                 "gold_in_kb": resolved in kb,
                 "correct": title is not None and resolved in kb
                            and metrics.resolve_title(title, redirects) == resolved})
  report = {"probes": rows, "groups": 0, "groups_top1_differs": 0, "groups_all_correct": 0}
  index = 0
  for _, group in itertools.groupby(spans):
    members = rows[index:index + len(list(group))]
    index += len(members)
    if len(members) < 2 or not all(m["gold_in_kb"] for m in members):
      continue
    report["groups"] += 1
    report["groups_top1_differs"] += len({m["top1"] for m in members}) > 1
    report["groups_all_correct"] += all(m["correct"] for m in members)
  scored = [r for r in rows if r["gold_in_kb"]]
  report["probes_scored"] = len(scored)
  report["probes_correct"] = sum(r["correct"] for r in scored)
  return report


def format_report(report: dict) -> str:
  lines = []
  for r in report["probes"]:
    mark = "ok " if r["correct"] else ("-- " if r["gold_in_kb"] else "n/a")
    lines.append(f"{mark} {r['top1']!s:<38} {r['score']:.3f}  gold {r['gold']}")
    lines.append(f"      {r['text']}")
  lines.append(f"\n{report['probes_correct']}/{report['probes_scored']} probes right; of "
               f"{report['groups']} span groups, top-1 differs between contexts in "
               f"{report['groups_top1_differs']}, all right in {report['groups_all_correct']}")
  return "\n".join(lines)


def main(argv):
  del argv
  from dense_entity import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  from dense_entity import schema  # pylint: disable=g-import-not-at-top
  ws = FLAGS.workspace
  probes = read_probes(FLAGS.probes) if FLAGS.probes else DEFAULT_PROBES
  retriever = retriever_lib.EntityRetriever.load(ws, index_kind=FLAGS.index)
  redirects = baselines.load_redirects(os.path.join(ws, "extract", schema.REDIRECTS_FILE))
  report = run_probes(retriever, probes, redirects)
  print(format_report(report))
  path = os.path.join(ws, REPORT)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2, ensure_ascii=False)
  os.replace(path + ".tmp", path)
  print(f"report: {path}")


if __name__ == "__main__":
  flags.DEFINE_string("workspace", None, "A finished workspace (export and index).")
  flags.DEFINE_string("probes", None, "JSONL of probes; the built-in set when not given.")
  flags.DEFINE_string("index", "brute_force", "Index kind searched.")
  flags.mark_flag_as_required("workspace")
  FLAGS = flags.FLAGS
  app.run(main)
