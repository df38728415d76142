"""Context probes: one ambiguous span in two contexts, does the top-1 entity follow the context?

The paper's Table 6 shows, by examples, that DEER's nearest entities change with the mention's
context. This runs such probes on a workspace and counts them: for every pair (the same span,
two contexts, two gold entities) it reports whether the top-1 differs between the contexts and
whether both are right. The default probes are English sentences written for this check (not
from any dump); the golds are titles of entities that the default and all-dumps workspaces of
README hold. A probe whose gold is not in the KB is reported and not scored.

The command (dense_entity/context_probes.py):
  python -m dense_entity.context_probes --workspace=WS [--probes=FILE.jsonl] [--index=brute_force]
      [--output=PATH]
FILE.jsonl: one {"text": "... [[span]] ...", "gold": "Title"} per line; consecutive lines with the
same span (case-folded) form a group; a bad line is reported (file:line, exit status 2) before
the model is loaded. Writes WS/reports/context_probes.json (built-in probes) or
WS/reports/context_probes_<FILE>.json, or --output; exit status 1, and no report written (an
earlier one is kept), when no gold is in the KB:
  {"probes": [{"text", "gold", "top1", "score", "correct", "gold_in_kb"}],
   "groups": n, "groups_top1_differs": n, "groups_all_correct": n, "probes_correct": n,
   "probes_scored": n}
"""

import itertools
import os
from typing import Dict, List, Sequence, Tuple

from dense_entity.common import fileio
from dense_entity.evaluation import metrics
from dense_entity.retrieval import retriever as retriever_lib

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


def parse_probe(marked: str, gold, where: str) -> Tuple[str, int, int]:
  """Returns (plain text, span start, span end) of a probe marking exactly one mention.

  Raises:
    ValueError: naming `where`, when the gold is not a non-empty string or the text does not
      mark exactly one mention with [[...]] (retriever.parse_link_input's rules).
  """
  if not isinstance(gold, str) or not gold.strip():
    raise ValueError(f"{where}: \"gold\" must be a non-empty title string, got {gold!r}")
  if not isinstance(marked, str):
    raise ValueError(f"{where}: \"text\" must be a string, got {marked!r}")
  text, marks, _ = retriever_lib.parse_link_input(marked, where)  # InputError is a ValueError
  if len(marks) != 1:
    raise ValueError(f"{where}: marks {len(marks)} mentions, expected 1: {marked!r}")
  return text, marks[0][0], marks[0][1]


def read_probes(path: str) -> List[tuple]:
  """Reads and checks a probe JSONL file (module docstring), before any model is loaded.

  Raises:
    FileNotFoundError: when `path` does not exist.
    ValueError: naming the file and line of a bad record, or the file when it holds none.
  """
  probes = []
  for line_number, record in fileio.read_jsonl_objects(path):
    where = f"{path}:{line_number}"
    if "text" not in record or "gold" not in record:
      raise ValueError(f"{where}: expected an object {{\"text\": \"... [[span]] ...\", "
                       f"\"gold\": \"Title\"}}, got the keys {sorted(record)}")
    parse_probe(record["text"], record["gold"], where)
    probes.append((record["text"], record["gold"]))
  if not probes:
    raise ValueError(f"{path}: no probes")
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
    ValueError: naming the probe, when it does not mark exactly one mention or its gold is not
      a title string (parse_probe).
  """
  mentions, spans = [], []
  for i, (marked, gold) in enumerate(probes):
    text, start, end = parse_probe(marked, gold, f"probe {i + 1}")
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
