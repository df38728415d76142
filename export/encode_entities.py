"""Encodes every KB entity with the exported entity encoder and builds the retrieval indexes.

Usage:
  python -m export.encode_entities --export_dir=WS/export --extract_dir=WS/extract \
      --output_dir=WS/index [--kinds=brute_force,ah,ah_tree]

Writes WS/index/entity_encodings.npy, entity_titles.txt, one index directory per kind and
indexes.json (dense_entity.retrieval.entity_encodings.encode_and_index).
"""

from absl import app
from absl import flags

from dense_entity.retrieval import entity_encodings

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  flags.DEFINE_string("export_dir", None, "Directory of the exported encoders.")
  flags.DEFINE_string("extract_dir", None, "Finished extraction (entities-* shards).")
  flags.DEFINE_string("output_dir", None, "Where encodings, titles and indexes go.")
  flags.DEFINE_list("kinds", ["brute_force", "ah", "ah_tree"], "Index kinds to build.")


def main(argv):
  del argv
  summary = entity_encodings.encode_and_index(FLAGS.export_dir, FLAGS.extract_dir,
                                              FLAGS.output_dir, FLAGS.kinds)
  print(summary)


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["export_dir", "extract_dir", "output_dir"])
  app.run(main)
