"""Beam pipeline: hard negative mining with the current exported model (paper section 4.3).

Gillick et al. (2019): encode the training mentions and all entities with the current model,
take each mention's 10 nearest entities, and keep every entity ranked above the gold one as a
negative pair; training then continues with the softmax task plus a logistic task on these pairs.
Each round's new pairs are added to the earlier rounds' (deduplicated by (mention, entity)).

The mention encoder SavedModel runs inside the Beam workers (DoFn.setup loads it), so the
featurizer is the exported graph itself; entities are searched in an index built from the same
export (export.encode_entities), checked by its model fingerprint. On a big KB point
--index_dir at a ScaNN AH+tree index; workers load it once each.

Usage:
  python -m beam_pipelines.mine_hard_negatives --export_dir=WS/export --index_dir=WS/index \
      --extract_dir=WS/extract --output_dir=WS/negatives/round_1 --round=1 \
      [--previous_dir=WS/negatives/round_0] [--index_kind=brute_force] \
      [--link_sources=prose,template,caption,gallery] [beam flags...]
Output: OUTPUT_DIR/hard_negatives-SSSSS-of-NNNNN.tfrecord (schema.py pair records, all rounds so
far), stats.json, and MANIFEST.json written last.
"""

import json

from dense_entity.common import entry

entry.quiet_native_logs()  # before beam_io loads TensorFlow: no native INFO/ERROR lines

from beam_pipelines.pipelines import beam_io  # pylint: disable=wrong-import-position
from beam_pipelines.pipelines import mining  # pylint: disable=wrong-import-position
from dense_entity.modeling import config as config_lib  # pylint: disable=wrong-import-position


def main(argv):
  from absl import flags  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  link_sources = config_lib.parse_link_sources(f.link_sources, "--link_sources")
  stats = mining.run(f.export_dir, f.index_dir, f.extract_dir, f.output_dir, f.round,
                     f.previous_dir, f.index_kind, f.k,
                     beam_io.default_pipeline_options(argv[1:], own_flags=list(f)),
                     link_sources=link_sources)
  print(json.dumps(stats, indent=2, sort_keys=True))


if __name__ == "__main__":
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("export_dir", None, "Exported encoders of the current model.")
  flags.DEFINE_string("index_dir", None, "Index directory built from that export.")
  flags.DEFINE_string("extract_dir", None, "Finished extraction (training mentions, entities).")
  flags.DEFINE_string("output_dir", None, "This round's output directory.")
  flags.DEFINE_integer("round", 1, "Mining round number (1 for the first mining round).",
                       lower_bound=1)
  flags.DEFINE_string("previous_dir", None, "The previous round's output, appended to.")
  flags.DEFINE_string("index_kind", "brute_force", "Index kind used for the search.")
  flags.DEFINE_string("link_sources", "", "Mine only training mentions of these link sources "
                      "(comma-separated, as train --link_sources; '': all).")
  flags.DEFINE_integer("k", mining.DEFAULT_K, "Nearest entities searched per mention.",
                       lower_bound=1)
  flags.mark_flags_as_required(["export_dir", "index_dir", "extract_dir", "output_dir"])
  entry.run(main, "python -m beam_pipelines.mine_hard_negatives",
          # Flags not defined here go to Beam if Beam knows them, else are an error.
          flags_parser=entry.known_flags_parser("python -m beam_pipelines.mine_hard_negatives"))
