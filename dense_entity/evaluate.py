"""Recall@k of DEER and the baselines on a workspace (paper section 5, Table 2).

Usage:
  python -m dense_entity.evaluate --workspace=WS [--dataset=aida:PATH ...] [--index=brute_force]

Writes WS/reports/eval.json, eval.md, recall_at_k.png and deer_misses.jsonl
(dense_entity.evaluation.evaluator.evaluate_workspace; WORKSPACE.md gives the layout). A run
with nothing to score (a dataset with no mention, an empty held-out split without --dataset)
exits with status 2 and one line naming the file, and leaves an earlier report in place.
"""

from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  flags.DEFINE_string("workspace", None, "Workspace directory (WORKSPACE.md).")
  flags.DEFINE_multi_string("dataset", [], "FORMAT:PATH of an extra evaluation set: aida:, "
                            "jsonl:, nif:, wikinews:DIR.")
  flags.DEFINE_integer("max_mentions", 0, "Evaluate at most this many held-out mentions (0: all).",
                       lower_bound=0)
  flags.DEFINE_string("index", "brute_force", "Index kind used by DEER.")


def main(argv):
  del argv
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
  report = evaluator.evaluate_workspace(FLAGS.workspace, FLAGS.dataset, FLAGS.max_mentions,
                                        FLAGS.index)
  print(reports.format_table(report))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["workspace"])
  entry.run(main, "python -m dense_entity.evaluate")

