"""The per-language table of README (issue 15 item 5) from finished demo workspaces.

One row per workspace of `dense-entity demo --workspace WS --input DUMP`: articles, mentions
(train + held-out), entities (WS/extract/MANIFEST.json), held-out in-KB recall@1 / @100 of
DEER, AT-Prior, AT-Ext and BM25 (WS/reports/eval.json), wall time and peak memory. Wall time
and peak RSS come from `/usr/bin/time -v` output saved as TIME_LOG_DIR/NAME.log (NAME: the
workspace's folder name) when --time_log_dir is given; else the wall column is the sum of the
report's stage timings (without the process start-up) and peak memory is left blank.

A second table (--diagnostics) says what the recall@100 comparison rests on: training and
held-out mentions, how many held-out golds are the gold of some training mention (seen), DEER
and BM25 recall@100 on the seen and the unseen ones (the report's split), and how many held-out
spans name their gold entity themselves (span and gold resolve to the same KB entity through
the KB's titles, redirects and case- and accent-insensitive match, kb.titles.TitleResolver):
the mentions a title match finds without any context. Reading the held-out mentions needs
TensorFlow (a few seconds a workspace).

Writes nothing; prints Markdown.

Usage (from the repository root):
  python -m benchmarks.language_table --workspace=/tmp/lang_demo/bn --workspace=... \
      [--time_log_dir=/tmp/lang_demo/logs] [--diagnostics]
"""

import json
import os
import re
from typing import Dict, Optional

from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS

SYSTEMS = ("DEER", "AT-Prior", "AT-Ext", "BM25")

_WALL = re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)")
_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  flags.DEFINE_multi_string("workspace", [], "A finished demo workspace (repeatable); its "
                            "folder name names the row.")
  flags.DEFINE_string("time_log_dir", "", "Folder of `/usr/bin/time -v` outputs, NAME.log "
                      "for workspace NAME.")
  flags.DEFINE_bool("diagnostics", False, "Also print the seen/unseen and title-match table.")


def parse_time_log(path: str) -> Dict[str, float]:
  """{"wall_seconds", "peak_rss_bytes"} from `/usr/bin/time -v` output (other lines ignored).

  Raises:
    ValueError: naming the file when either line is missing.
  """
  with open(path, encoding="utf-8", errors="replace") as f:
    text = f.read()
  wall, rss = _WALL.search(text), _RSS.search(text)
  if not wall or not rss:
    raise ValueError(f"{path}: no '/usr/bin/time -v' wall clock and maximum resident set size "
                     "lines")
  seconds = 0.0
  for part in wall.group(1).split(":"):
    seconds = seconds * 60 + float(part)
  return {"wall_seconds": seconds, "peak_rss_bytes": int(rss.group(1)) * 1024}


def _read_json(path: str) -> dict:
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: missing (is the demo in that workspace finished?)")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def workspace_row(workspace: str, time_log_dir: str = "") -> dict:
  """The figures of one finished demo workspace (see the module docstring).

  Raises:
    FileNotFoundError: naming WS/extract/MANIFEST.json or WS/reports/eval.json when missing.
    ValueError: naming the report when it has no held-out section.
  """
  name = os.path.basename(os.path.normpath(workspace))
  counts = _read_json(os.path.join(workspace, "extract", "MANIFEST.json")).get("counts", {})
  report_path = os.path.join(workspace, "reports", "eval.json")
  report = _read_json(report_path)
  if "systems" not in report:
    raise ValueError(f"{report_path}: no held-out evaluation ({report.get('heldout_skipped')})")
  row = {"name": name, "articles": counts.get("articles", 0),
         "mentions_train": counts.get("mentions_train", 0),
         "mentions_heldout": counts.get("mentions_heldout", 0),
         "entities": counts.get("entities", 0),
         "heldout_in_kb": report["datasets"]["heldout"]["num_in_kb"],
         "recall": {s: (report["systems"][s]["recall@1"], report["systems"][s]["recall@100"])
                    for s in SYSTEMS},
         "split": report["datasets"]["heldout"].get("by_gold_seen_in_training", {}),
         "wall_seconds": sum(report.get("timings_seconds", {}).values()),
         "peak_rss_bytes": None, "wall_from": "stage timings"}
  log = os.path.join(time_log_dir, name + ".log") if time_log_dir else ""
  if log and os.path.exists(log):
    row.update(parse_time_log(log), wall_from=log)
  return row


def title_match_count(workspace: str) -> Dict[str, int]:
  """{"heldout", "span_names_gold"}: held-out mentions, and those whose span resolves to the
  same KB entity as their gold (TitleResolver over the KB's titles and redirects)."""
  from dense_entity.evaluation import baselines, evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema, titles  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index_builder  # pylint: disable=g-import-not-at-top
  kb_titles = set(index_builder.read_titles(
      os.path.join(workspace, "index", index_lib.TITLES_FILENAME)))
  resolver = titles.TitleResolver(kb_titles, baselines.load_redirects(
      os.path.join(workspace, "extract", schema.REDIRECTS_FILE)))
  mentions = evaluator.read_heldout_mentions(os.path.join(workspace, "extract"))
  same = 0
  for m in mentions:
    gold = resolver(m[schema.ENTITY_TITLE])
    same += gold is not None and gold in kb_titles and resolver(m[schema.MENTION_SPAN]) == gold
  return {"heldout": len(mentions), "span_names_gold": same}


def _minutes(seconds: float) -> str:
  return f"{int(seconds // 60)} min {int(round(seconds % 60)):02d} s"


def format_table(rows) -> str:
  """The README table: one row per workspace; R@1 / R@100 per system; the best R@100 in bold."""
  head = ("| wiki | articles | mentions (train / held-out) | entities | "
          + " | ".join(f"{s} R@1 / R@100" for s in SYSTEMS) + " | wall | peak RSS |")
  lines = [head, "|" + "---|" * (head.count("|") - 1)]
  for row in rows:
    best = max(r100 for _, r100 in row["recall"].values())
    cells = []
    for s in SYSTEMS:
      r1, r100 = row["recall"][s]
      at100 = f"**{r100:.3f}**" if r100 == best else f"{r100:.3f}"
      cells.append(f"{r1:.3f} / {at100}")
    rss = row["peak_rss_bytes"]
    lines.append(
        f"| {row['name']} | {row['articles']:,} | {row['mentions_train']:,} / "
        f"{row['mentions_heldout']:,} | {row['entities']:,} | " + " | ".join(cells)
        + f" | {_minutes(row['wall_seconds'])} | "
        + (f"{rss / 1e9:.2f} GB" if rss is not None else "") + " |")
  return "\n".join(lines)


def format_diagnostics(rows, matches: Optional[Dict[str, Dict[str, int]]] = None) -> str:
  """Seen/unseen held-out golds with DEER's and BM25's recall@100 on each, and spans that name
  their gold (`matches`: title_match_count per row name)."""
  lines = ["| wiki | train mentions | held-out | seen golds | DEER / BM25 R@100 seen | "
           "unseen golds | DEER / BM25 R@100 unseen | spans naming their gold |",
           "|---|---|---|---|---|---|---|---|"]
  for row in rows:
    split = row["split"]
    cells = []
    for part in ("seen", "unseen"):
      systems = split.get(part, {})
      n = systems.get("DEER", {}).get("num_in_kb", 0)
      cells.append(f"{n:,} ({n / max(row['heldout_in_kb'], 1):.0%})")
      cells.append(" / ".join(f"{systems[s]['recall@100']:.3f}" if n else "n/a"
                              for s in ("DEER", "BM25")))
    match = (matches or {}).get(row["name"])
    named = (f"{match['span_names_gold']:,} ({match['span_names_gold'] / max(match['heldout'], 1):.0%})"
             if match else "")
    lines.append(f"| {row['name']} | {row['mentions_train']:,} | {row['mentions_heldout']:,} | "
                 + " | ".join(cells) + f" | {named} |")
  return "\n".join(lines)


def main(argv):
  del argv
  if not FLAGS.workspace:
    from absl import app  # pylint: disable=g-import-not-at-top
    raise app.UsageError("give at least one --workspace")
  rows = [workspace_row(ws, FLAGS.time_log_dir) for ws in FLAGS.workspace]
  print(format_table(rows))
  if FLAGS.diagnostics:
    matches = {row["name"]: title_match_count(ws) for row, ws in zip(rows, FLAGS.workspace)}
    print()
    print(format_diagnostics(rows, matches))


if __name__ == "__main__":
  define_flags()
  entry.run(main, "python -m benchmarks.language_table")
