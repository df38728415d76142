"""Speed / recall / size trade-off of the entity indexes on a workspace (paper Table 3).

Gillick et al. (2019), section 5.2, Table 3: brute-force search against ScaNN asymmetric
hashing (AH) and AH + tree, by search time per mention and recall. Here, for every index kind
found in WS/index (brute_force, ah, ah_tree):
- search time per mention in milliseconds, for single queries (one mention at a time, the
  first `single_queries` held-out mentions, mean after one warm-up query) and batched (all
  held-out mentions in one call, best of `repeats`, divided by the number of mentions);
- recall@1, @10 and @100 on the held-out mentions (in-KB recall; gold and predicted titles
  normalized and redirect-resolved by `dense_entity.metrics.score_rankings` against the KB
  titles and WS/extract/redirects.tsv), as in WS/reports/eval.json;
- agreement with exact search: the fraction of the exact top-10 (brute force over the same
  encodings) that the index returns in its top-10;
- index size on disk in bytes (the files listed in its index_manifest.json).
Mentions are encoded once (mention encoding time is reported apart) and every index searches
the same query encodings with k = `k` (default 100). Timings depend on the machine and its
threads (BLAS for brute force, ScaNN's thread pool for batched ScaNN search); the report
records the CPU count and the BLAS thread variables. On few, busy cores a multi-threaded BLAS
matrix-vector product can be many times slower than a single-threaded one (measured: 8 ms vs
0.2 ms for 17k x 64 on 2 busy cores), so compare single-query brute force also with
OPENBLAS_NUM_THREADS=1.

Usage:
  python -m export.tradeoff --workspace=WS [--max_mentions=0] [--single_queries=1000]
  dense-entity tradeoff --workspace WS

Writes WS/reports/tradeoff.json (atomically):
  {"num_mentions", "num_in_kb", "num_entities", "k", "model_fingerprint", "cpu_count",
   "thread_env",
   "encode_ms_per_mention", "indexes": {kind: {"effective_kind", "fallback_reason",
   "single_ms_per_mention", "single_queries", "batched_ms_per_mention", "recall@1",
   "recall@10", "recall@100", "exact_agreement@10", "index_bytes", "parameters"}}}
"""

import os
from absl import flags
from dense_entity.common import entry

FLAGS = flags.FLAGS


def main(argv):
  del argv
  from dense_entity.evaluation import tradeoff  # pylint: disable=g-import-not-at-top
  kinds = [kind.strip() for kind in FLAGS.kinds.split(",") if kind.strip()]
  report = tradeoff.measure_tradeoff(FLAGS.workspace, kinds, FLAGS.k, FLAGS.max_mentions,
                                     FLAGS.single_queries, FLAGS.repeats,
                                     dataset_specs=FLAGS.dataset)
  print(tradeoff.format_table(report))
  print(f"report: {os.path.join(FLAGS.workspace, tradeoff.REPORT_FILE)}")


def define_flags():
  """Defines the entry point's flags (only when run as a program)."""
  # retrieval.index needs numpy only: `--help` does not load TensorFlow.
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  for define, name, default, help_text in (
      (flags.DEFINE_string, "workspace", None, "Workspace directory (WORKSPACE.md)."),
      (flags.DEFINE_string, "kinds", ",".join(index_lib.KINDS),
       "Comma-separated index kinds (default: all)."),
      (flags.DEFINE_integer, "k", 100, "Neighbours per search."),
      (flags.DEFINE_integer, "max_mentions", 0, "Held-out mentions used (0: all)."),
      (flags.DEFINE_integer, "single_queries", 1000, "Mentions timed one at a time (0: all)."),
      (flags.DEFINE_integer, "repeats", 3, "Batched searches timed (the fastest counts)."),
      (flags.DEFINE_multi_string, "dataset", [], "FORMAT:PATH of an evaluation set whose "
       "recall each index also reports (as dense_entity.evaluate --dataset).")):
    define(name, default, help_text)
  flags.mark_flags_as_required(["workspace"])


if __name__ == "__main__":
  define_flags()
  entry.run(main, "python -m export.tradeoff")
