"""NIL prediction on a workspace: fit the calibrator on a development set, score it everywhere.

The figures of `python -m dense_entity.evaluate --fit_nil_calibrator` without the baselines
(AT-Prior, AT-Ext, BM25 over every title), which take most of an evaluation's time on a KB of
all of Wikipedia: DEER's top-k (EntityRetriever, brute force unless --index) for every mention
of every --dataset, then `evaluation.nil_calibration.fit_calibrator` on --fit_dataset and
`evaluate_calibrator` on each dataset with NIL gold (the same functions the evaluator calls).

Writes OUTPUT_DIR/nil_calibrator.json (the artifact; copy it to WS/export/ to make `link` and
the serving export use it), nil_benchmark.json (the "nil" sections), nil_benchmark.md (tables)
and nil_reliability.png. Nothing is written into the workspace.

Usage (from the repository root):
  python -m benchmarks.nil_benchmark --workspace=WS --output_dir=DIR \
      --dataset=jsonl:../shared/data/eval/aida/aida_testa.jsonl [--dataset=...] \
      [--fit_dataset=aida_testa] [--objective=accuracy] [--max_mentions=0]
"""

import json
import os
import time

from absl import app
from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  flags.DEFINE_string("workspace", None, "Workspace (WS/export, WS/index, WS/extract).")
  flags.DEFINE_string("output_dir", None, "Where the calibrator and the report go.")
  flags.DEFINE_multi_string("dataset", [], "FORMAT:PATH of an evaluation set (as evaluate).")
  flags.DEFINE_string("fit_dataset", "", "Report name of the dataset fitted on; default: the "
                      "first --dataset.")
  flags.DEFINE_enum("objective", "accuracy", ["accuracy", "nil_f1"], "Threshold objective.")
  flags.DEFINE_string("index", "brute_force", "Index kind searched.")
  flags.DEFINE_integer("k", 10, "Entities retrieved per mention (>= 2).", lower_bound=2)
  flags.DEFINE_integer("max_mentions", 0, "Use the first N mentions of each dataset (0: all).",
                       lower_bound=0)


def main(argv):
  del argv
  from dense_entity.evaluation import baselines, metrics, reports  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import datasets as datasets_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import nil_calibration  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema, titles as titles_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import kb_versions  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import nil as nil_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  if not FLAGS.dataset:
    raise app.UsageError("give at least one --dataset (the first is fitted on by default)")
  t0 = time.time()
  loaded = {}
  for spec in FLAGS.dataset:
    mentions = datasets_lib.load(spec)
    if FLAGS.max_mentions:
      mentions = mentions[:FLAGS.max_mentions]
    loaded[datasets_lib.name_of(spec)] = (spec.partition(":")[2], mentions)
  fit_name = FLAGS.fit_dataset or next(iter(loaded))
  if fit_name not in loaded:
    raise ValueError(f"--fit_dataset {fit_name!r} is not among {sorted(loaded)}")
  retriever = retriever_lib.EntityRetriever.load(FLAGS.workspace, FLAGS.index,
                                                 nil_calibrator=None)
  kb_titles = set(retriever.titles)
  # The redirects of the KB version the retriever reads (kb updates change them).
  resolver = titles_lib.TitleResolver(kb_titles, baselines.load_redirects(kb_versions.kb_file(
      retriever.index_dir, schema.REDIRECTS_FILE,
      os.path.join(FLAGS.workspace, "extract"))))
  print(f"loaded {len(kb_titles)} entities in {time.time() - t0:.0f} s", flush=True)
  outcomes, seconds = {}, {}
  for name, (_, mentions) in loaded.items():
    t1 = time.time()
    rows = retriever.retrieve(datasets_lib.all_features(mentions), k=FLAGS.k)
    seconds[name] = time.time() - t1
    outcomes[name] = ([[s for _, s in row] for row in rows],) + metrics.top1_outcomes(
        [[t for t, _ in row] for row in rows], [m.gold for m in mentions], kb_titles, resolver)
    print(f"{name}: {len(mentions)} mentions searched in {seconds[name]:.0f} s", flush=True)
  scores, gold_nil, right, not_in_kb = outcomes[fit_name]
  calibrator = nil_calibration.fit_calibrator(
      scores, right, gold_nil, FLAGS.objective, gold_not_in_kb=not_in_kb,
      info={"model_fingerprint": retriever.model_fingerprint, "index": FLAGS.index,
            "num_entities": len(kb_titles),
            "fitted_on": {"dataset": fit_name, "path": os.path.abspath(loaded[fit_name][0]),
                          "num_nil_label": int(sum(gold_nil))}})
  os.makedirs(FLAGS.output_dir, exist_ok=True)
  calibrator.save(os.path.join(FLAGS.output_dir, nil_lib.NIL_CALIBRATOR_FILE))
  report = {"nil_calibrator": calibrator.to_dict(), "datasets": {}, "seconds": seconds}
  lines = [f"# NIL prediction ({len(kb_titles)} entities, index {FLAGS.index}, fitted on "
           f"{fit_name})", ""]
  for name, nil in nil_calibration.evaluate_sections(calibrator, outcomes, fit_name).items():
    report["datasets"][name] = {"nil": nil}
    lines += [f"## {name}", ""] + reports.nil_markdown(nil)
  with open(os.path.join(FLAGS.output_dir, "nil_benchmark.json"), "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2, sort_keys=True)
  with open(os.path.join(FLAGS.output_dir, "nil_benchmark.md"), "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  reports.plot_reliability(report, os.path.join(FLAGS.output_dir, reports.RELIABILITY_FILE))
  print("\n".join(lines))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["workspace", "output_dir"])
  entry.run(main, "python -m benchmarks.nil_benchmark")
