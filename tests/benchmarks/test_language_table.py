"""benchmarks/language_table.py on a workspace's two JSON files and a time log (no TensorFlow)."""

import json

import pytest

from benchmarks import language_table

TIME_LOG = """\
\tCommand being timed: "python -m dense_entity.cli demo --workspace /tmp/lang_demo/uk"
\tElapsed (wall clock) time (h:mm:ss or m:ss): 4:47.09
\tMaximum resident set size (kbytes): 1835048
\tExit status: 0
"""


def _workspace(tmp_path, name="uk"):
  ws = tmp_path / name
  (ws / "extract").mkdir(parents=True)
  (ws / "reports").mkdir()
  (ws / "extract" / "MANIFEST.json").write_text(json.dumps({"counts": {
      "articles": 509, "entities": 36569, "mentions_heldout": 8560, "mentions_train": 73005}}))
  systems = {"DEER": (0.704, 0.830), "AT-Prior": (0.419, 0.432), "AT-Ext": (0.423, 0.439),
             "BM25": (0.693, 0.775)}
  split = {part: {s: {"num_in_kb": n, "recall@100": 0.5} for s in systems}
           for part, n in (("seen", 4802), ("unseen", 3758))}
  (ws / "reports" / "eval.json").write_text(json.dumps({
      "systems": {s: {"recall@1": a, "recall@100": b} for s, (a, b) in systems.items()},
      "datasets": {"heldout": {"num_in_kb": 8560, "by_gold_seen_in_training": split}},
      "timings_seconds": {"extract": 88.0, "train": 125.0}}))
  return str(ws)


def test_row_and_table_with_time_log(tmp_path):
  ws = _workspace(tmp_path)
  logs = tmp_path / "logs"
  logs.mkdir()
  (logs / "uk.log").write_text(TIME_LOG)
  row = language_table.workspace_row(ws, str(logs))
  assert row["wall_seconds"] == pytest.approx(287.09)
  assert row["peak_rss_bytes"] == 1835048 * 1024
  table = language_table.format_table([row])
  assert ("| uk | 509 | 73,005 / 8,560 | 36,569 | 0.704 / **0.830** | 0.419 / 0.432 | "
          "0.423 / 0.439 | 0.693 / 0.775 | 4 min 47 s | 1.88 GB |") in table
  diagnostics = language_table.format_diagnostics(
      [row], {"uk": {"heldout": 8560, "span_names_gold": 5096}})
  assert "| uk | 73,005 | 8,560 | 4,802 (56%) | 0.500 / 0.500 | 3,758 (44%)" in diagnostics
  assert diagnostics.endswith("| 5,096 (60%) |")


def test_without_time_log_wall_is_stage_time(tmp_path):
  row = language_table.workspace_row(_workspace(tmp_path))
  assert row["wall_seconds"] == 213.0 and row["peak_rss_bytes"] is None


def test_missing_report_and_bad_log_are_named(tmp_path):
  ws = _workspace(tmp_path)
  (tmp_path / "uk" / "reports" / "eval.json").unlink()
  with pytest.raises(FileNotFoundError, match="eval.json"):
    language_table.workspace_row(ws)
  bad = tmp_path / "bad.log"
  bad.write_text("no timing here\n")
  with pytest.raises(ValueError, match="bad.log"):
    language_table.parse_time_log(str(bad))
