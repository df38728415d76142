"""Tests of benchmarks/extraction_benchmark.py: its figures over repeated runs, its CPU
column, its input check."""

import os
import subprocess
import sys

from benchmarks import extraction_benchmark

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(seconds, wall, rss, tree, cpu=5.0):
  return {"seconds": seconds, "cpu_s": cpu, "wall_s": wall, "pages_read": 579,
          "articles": 317, "links": 42382, "max_rss_mib": rss, "tree_rss_mib": tree}


def test_median_run_takes_middle_times_and_largest_memory():
  runs = [_run(2.9, 3.7, 270, 580, cpu=5.4), _run(2.5, 3.4, 280, 600, cpu=5.9),
          _run(3.4, 4.1, 260, 590, cpu=5.1)]
  combined = extraction_benchmark.median_run(runs)
  assert combined["seconds"] == 2.9 and combined["wall_s"] == 3.7
  assert combined["cpu_s"] == 5.4  # each figure's own median, not the median run's
  assert combined["max_rss_mib"] == 280 and combined["tree_rss_mib"] == 600
  assert (combined["pages_read"], combined["articles"], combined["links"]) == (579, 317, 42382)
  # An even count: the lower middle value (a run that happened, not an average); one run: it.
  assert extraction_benchmark.median_run(runs[:2])["seconds"] == 2.5
  assert extraction_benchmark.median_run(runs[2:]) == runs[2]
  assert runs[0]["seconds"] == 2.9  # the runs are left as they were


def test_cpu_seconds_counts_this_process_and_its_reaped_children():
  before = extraction_benchmark.cpu_seconds()
  # A child that spins ~0.3 s of CPU, waited for: its time counts once it has ended.
  subprocess.run([sys.executable, "-c",
                  "import time\nt = time.process_time()\n"
                  "while time.process_time() - t < 0.3: pass"], check=True)
  assert extraction_benchmark.cpu_seconds() - before >= 0.3


def test_table_has_cpu_seconds_and_cores():
  results = {"ours_pipeline_inmem_2p": dict(_run(3.0, 3.9, 271, 946, cpu=5.7), build="compiled"),
             "wikiextractor_2p": _run(2.6, 2.7, 31, 119, cpu=4.6)}
  table = extraction_benchmark.format_table(results, 579).splitlines()
  header = table[0].split()
  assert header[5:8] == ["cpu", "s", "cores"]
  ours = table[2].split()
  assert ours[3] == "5.7" and ours[4] == "1.90"  # 5.7 CPU s over 3.0 work s
  # pages/s ratio to wikiextractor --processes 2: 2.6 / 3.0
  assert table[3].split()[0] == "wikiextractor_2p" and ours[-6] == "0.87"
  assert ours[-1] == "compiled" and table[3].split()[-1] == "-"


def test_a_file_that_is_no_dump_is_one_line_before_any_method_runs(tmp_path):
  # It ran the methods and failed on the first with a traceback around the extraction's error.
  bad = tmp_path / "pages.json"
  bad.write_text('{"a": 1}\n', encoding="utf-8")
  proc = subprocess.run(
      [sys.executable, "-m", "benchmarks.extraction_benchmark", f"--files={bad}",
       "--methods=ours_parse"], cwd=REPO_ROOT, capture_output=True, text=True, check=False,
      timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr and "running ours_parse" not in proc.stdout
  assert proc.stderr.strip().splitlines()[-1].startswith(
      f"python -m benchmarks.extraction_benchmark: error: {bad}: holds JSON")
