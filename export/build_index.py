"""Builds brute-force / ScaNN AH / ScaNN AH + tree indexes over an entity encodings file.

Usage:
  python -m export.build_index --encodings=entity_encodings.npy --titles=entity_titles.txt \
      --output_dir=DIR --kinds=brute_force,ah,ah_tree --model_fingerprint=STR

Writes DIR/entity_titles.txt, one index directory per kind and DIR/indexes.json
(dense_entity.retrieval.index_builder.build_indexes).
"""

from absl import app
from absl import flags
import numpy as np

from dense_entity.retrieval import index_builder

FLAGS = flags.FLAGS


def main(argv):
  del argv
  encodings = np.load(FLAGS.encodings, mmap_mode="r")
  titles = index_builder.read_titles(FLAGS.titles)
  kinds = [k.strip() for k in FLAGS.kinds.split(",") if k.strip()]
  summary = index_builder.build_indexes(encodings, titles, FLAGS.output_dir, kinds,
                                        FLAGS.model_fingerprint,
                                        normalize_rows=FLAGS.normalize_rows)
  for kind, info in summary["indexes"].items():
    print(f"{kind}: built as {info['effective_kind']} in {info['build_seconds']:.2f} s, "
          f"{info['index_bytes']} bytes -> {info['path']}"
          + (f" ({info['fallback_reason']})" if info["fallback_reason"] else ""))


if __name__ == "__main__":
  flags.DEFINE_string("encodings", None, "Entity encodings .npy, float32 [n, dim].")
  flags.DEFINE_string("titles", None, "Entity titles, one per line; line i is row i.")
  flags.DEFINE_string("output_dir", None, "Directory for the indexes and entity_titles.txt.")
  flags.DEFINE_string("kinds", "brute_force,ah,ah_tree", "Comma-separated index kinds.")
  flags.DEFINE_string("model_fingerprint", None, "Fingerprint of the model that made the "
                      "encodings; recorded in each index manifest.")
  flags.DEFINE_bool("normalize_rows", False, "L2-normalise the rows; off for the towers' "
                    "encodings, which the model normalises (to norm <= 1 with the lexical "
                    "channel).")
  flags.mark_flags_as_required(["encodings", "titles", "output_dir", "model_fingerprint"])
  app.run(main)
