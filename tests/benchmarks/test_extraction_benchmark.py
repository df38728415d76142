"""Tests of benchmarks/extraction_benchmark.py's figures over repeated runs."""

from benchmarks import extraction_benchmark


def _run(seconds, wall, rss, tree):
  return {"seconds": seconds, "wall_s": wall, "pages_read": 579, "articles": 317,
          "links": 42382, "max_rss_mib": rss, "tree_rss_mib": tree}


def test_median_run_takes_middle_times_and_largest_memory():
  runs = [_run(2.9, 3.7, 270, 580), _run(2.5, 3.4, 280, 600), _run(3.4, 4.1, 260, 590)]
  combined = extraction_benchmark.median_run(runs)
  assert combined["seconds"] == 2.9 and combined["wall_s"] == 3.7
  assert combined["max_rss_mib"] == 280 and combined["tree_rss_mib"] == 600
  assert (combined["pages_read"], combined["articles"], combined["links"]) == (579, 317, 42382)
  # An even count: the lower middle value (a run that happened, not an average); one run: it.
  assert extraction_benchmark.median_run(runs[:2])["seconds"] == 2.5
  assert extraction_benchmark.median_run(runs[2:]) == runs[2]
  assert runs[0]["seconds"] == 2.9  # the runs are left as they were
