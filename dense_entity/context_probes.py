"""Context probes on a workspace: one ambiguous span in two contexts (paper Table 6, counted).

Usage:
  python -m dense_entity.context_probes --workspace=WS [--probes=FILE.jsonl] [--index=brute_force]
      [--output=PATH]
dense_entity.evaluation.probes describes the probe file, the report and the exit statuses.
"""

import json
import os

from absl import flags

from dense_entity.common import entry


def main(argv):
  del argv
  import sys  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import probes  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  ws = FLAGS.workspace
  # Bad probes are reported before the model is loaded.
  try:
    probe_list = probes.read_probes(FLAGS.probes) if FLAGS.probes else probes.DEFAULT_PROBES
  except (OSError, ValueError) as e:
    print(f"context_probes: {e}", file=sys.stderr)
    return 2
  try:
    retriever = retriever_lib.EntityRetriever.load(ws, index_kind=FLAGS.index)
  except (OSError, ValueError) as e:
    print(f"context_probes: cannot load {ws}: {e}", file=sys.stderr)
    return 1
  redirects = baselines.load_redirects(os.path.join(ws, "extract", schema.REDIRECTS_FILE))
  report = probes.run_probes(retriever, probe_list, redirects)
  print(probes.format_report(report))
  if report["probes_scored"] == 0:
    # Nothing measured: an earlier report stays as it was.
    print("context_probes: no probe's gold entity is in this KB; nothing was scored, no "
          "report written", file=sys.stderr)
    return 1
  path = FLAGS.output or os.path.join(ws, probes.REPORT if not FLAGS.probes else os.path.join(
      "reports", f"context_probes_{os.path.splitext(os.path.basename(FLAGS.probes))[0]}.json"))
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2, ensure_ascii=False)
  os.replace(path + ".tmp", path)
  print(f"report: {path}")
  return 0


if __name__ == "__main__":
  flags.DEFINE_string("workspace", None, "A finished workspace (export and index).")
  flags.DEFINE_string("probes", None, "JSONL of probes; the built-in set when not given.")
  flags.DEFINE_string("index", "brute_force", "Index kind searched.")
  flags.DEFINE_string("output", None, "Report path; default WS/reports/context_probes.json "
                      "(built-in probes) or WS/reports/context_probes_<probes file name>.json.")
  flags.mark_flag_as_required("workspace")
  FLAGS = flags.FLAGS
  entry.run(main, "python -m dense_entity.context_probes")
