"""Builds brute-force / ScaNN AH / ScaNN AH + tree indexes over an entity encodings file.

Usage:
  python -m export.build_index --encodings=entity_encodings.npy --titles=entity_titles.txt \
      --output_dir=DIR --kinds=brute_force,ah,ah_tree --model_fingerprint=STR

Writes DIR/entity_titles.txt, one index directory per kind and DIR/indexes.json
(dense_entity.retrieval.index_builder.build_indexes). Encodings with name rows (more rows than
titles; retrieval.entity_encodings) need their row -> entity map: `--row_entities`, by default
row_entities.npy beside --encodings when it exists.
"""

import os

from absl import flags
import numpy as np

from dense_entity.common import entry
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder

FLAGS = flags.FLAGS


def main(argv):
  del argv
  encodings = np.load(FLAGS.encodings, mmap_mode="r")
  titles = index_builder.read_titles(FLAGS.titles)
  rows_path = FLAGS.row_entities or os.path.join(os.path.dirname(os.path.abspath(
      FLAGS.encodings)), index_lib.ROW_ENTITIES_FILENAME)
  row_entities = None
  if FLAGS.row_entities or os.path.isfile(rows_path):
    row_entities = np.load(rows_path)
  kinds = [k.strip() for k in FLAGS.kinds.split(",") if k.strip()]
  summary = index_builder.build_indexes(encodings, titles, FLAGS.output_dir, kinds,
                                        FLAGS.model_fingerprint,
                                        normalize_rows=FLAGS.normalize_rows,
                                        row_entities=row_entities)
  for kind, info in summary["indexes"].items():
    print(f"{kind}: built as {info['effective_kind']} in {info['build_seconds']:.2f} s, "
          f"{info['index_bytes']} bytes -> {info['path']}"
          + (f" ({info['fallback_reason']})" if info["fallback_reason"] else ""))


if __name__ == "__main__":
  flags.DEFINE_string("encodings", None, "Entity encodings .npy, float32 [n, dim].")
  flags.DEFINE_string("titles", None, "Entity titles, one per line; line i is row i.")
  flags.DEFINE_string("row_entities", None, "int32 [rows] entity id of every encoding row "
                      "(name rows); default: row_entities.npy beside --encodings if present.")
  flags.DEFINE_string("output_dir", None, "Directory for the indexes and entity_titles.txt.")
  flags.DEFINE_string("kinds", "brute_force,ah,ah_tree", "Comma-separated index kinds.")
  flags.DEFINE_string("model_fingerprint", None, "Fingerprint of the model that made the "
                      "encodings; recorded in each index manifest.")
  flags.DEFINE_bool("normalize_rows", False, "L2-normalise the rows; off for the towers' "
                    "encodings, which the model normalises (to norm <= 1 with the lexical "
                    "channel).")
  flags.mark_flags_as_required(["encodings", "titles", "output_dir", "model_fingerprint"])
  entry.run(main, "python -m export.build_index")
