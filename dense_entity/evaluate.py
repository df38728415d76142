"""Recall@k of DEER and the baselines on a workspace (paper section 5, Table 2).

Usage:
  python -m dense_entity.evaluate --workspace=WS [--dataset=aida:PATH ...] [--index=brute_force]
      [--systems=DEER,AT-Prior,AT-Ext,BM25,AT-Prior+TR]

Writes WS/reports/eval.json, eval.md, recall_at_k.png and deer_misses.jsonl
(dense_entity.evaluation.evaluator.evaluate_workspace; WORKSPACE.md gives the layout).

NIL prediction: `--fit_nil_calibrator=PATH [--nil_dataset=aida_testa]` fits the calibrator
(dense_entity.retrieval.nil) on a dataset with NIL gold and writes it to PATH; that calibrator,
or the one at WS/export/nil_calibrator.json, is scored on each dataset with NIL answers (NIL
precision / recall / F1, accuracy with NIL counted) and WS/reports/nil_reliability.png. A run
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
  from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
  flags.DEFINE_list("systems", list(reports.SYSTEMS),
                    "Systems scored, comma-separated; must hold DEER (e.g. --systems=DEER: no "
                    "baselines, about 20 instead of 28 minutes over all of Wikipedia).")
  flags.DEFINE_string("fit_nil_calibrator", "", "Fit the NIL calibrator (P(top-1 right) from "
                      "DEER's top-1 score and margin; threshold on the same set) on "
                      "--nil_dataset and write it to this path (e.g. WS/export/"
                      "nil_calibrator.json, where link and export.serving find it).")
  flags.DEFINE_string("nil_dataset", "", "Report name of the --dataset the NIL calibrator is "
                      "fitted on (e.g. aida_testa); default: the first with a NIL mention.")
  flags.DEFINE_enum("nil_objective", "accuracy", ["accuracy", "nil_f1"], "What the NIL "
                    "threshold maximises on --nil_dataset: accuracy over all mentions (NIL "
                    "counted) or NIL F1.")
  flags.DEFINE_string("nil_calibrator", "auto", "NIL calibrator scored when none is fitted: a "
                      "path, 'auto' (WS/export/nil_calibrator.json when present) or 'none'.")


def main(argv):
  del argv
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
  report = evaluator.evaluate_workspace(
      FLAGS.workspace, FLAGS.dataset, FLAGS.max_mentions, FLAGS.index,
      fit_nil_calibrator=FLAGS.fit_nil_calibrator, nil_dataset=FLAGS.nil_dataset,
      nil_calibrator=None if FLAGS.nil_calibrator == "none" else FLAGS.nil_calibrator,
      nil_objective=FLAGS.nil_objective, systems=FLAGS.systems)
  print(reports.format_table(report))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["workspace"])
  entry.run(main, "python -m dense_entity.evaluate")

