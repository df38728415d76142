"""Encodes every KB entity with the exported entity encoder and builds the retrieval indexes.

Usage:
  python -m export.encode_entities --export_dir=WS/export --extract_dir=WS/extract \
      --output_dir=WS/index [--kinds=brute_force,ah,ah_tree] [--storage_dtype=auto]

Writes WS/index/entity_encodings.npy, entity_titles.txt, one index directory per kind and
indexes.json (dense_entity.retrieval.entity_encodings.encode_and_index), with a progress bar
(entities/s). A killed run resumes with the shards it had encoded. Every flag and input is
checked before any work; WS/index must be new, empty or hold earlier encodings and indexes,
which stay as they were until the new encodings, titles and indexes are all built.
"""

from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  from dense_entity.retrieval import entity_encodings  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("export_dir", None, "Directory of the exported encoders.")
  flags.DEFINE_string("extract_dir", None, "Finished extraction (entities-* shards).")
  flags.DEFINE_string("output_dir", None, "Where encodings, titles and indexes go.")
  flags.DEFINE_list("kinds", ["brute_force", "ah", "ah_tree"], "Index kinds to build.")
  flags.DEFINE_enum("storage_dtype", "auto", entity_encodings.STORAGE_DTYPES,
                    "Stored encodings: auto (float16 above 1 GiB of float32), float32, "
                    "float16.")
  flags.DEFINE_integer("max_names_per_entity",
                       entity_encodings.DEFAULT_MAX_NAMES_PER_ENTITY, lower_bound=0,
                       help="Name rows per entity (its aliases, each a row of its own; retrieval "
                       "scores an entity by its best row); 0: one row per entity.")


def main(argv):
  del argv
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import entity_encodings  # pylint: disable=g-import-not-at-top
  # Every flag and input is checked before the progress bar starts and anything is written.
  entity_encodings.check_arguments(FLAGS.export_dir, FLAGS.extract_dir, FLAGS.output_dir,
                                   FLAGS.kinds, FLAGS.storage_dtype,
                                   FLAGS.max_names_per_entity)
  total = records.require_extraction(FLAGS.extract_dir).get("counts", {}).get("entities")
  with tqdm(total=total, unit="entity", desc="encoding", smoothing=0.1) as bar:
    summary = entity_encodings.encode_and_index(FLAGS.export_dir, FLAGS.extract_dir,
                                                FLAGS.output_dir, FLAGS.kinds,
                                                progress=bar.update,
                                                storage_dtype=FLAGS.storage_dtype,
                                                max_names_per_entity=FLAGS.max_names_per_entity)
  for kind, info in summary["indexes"].items():
    print(f"{kind}: built as {info['effective_kind']} in {info['build_seconds']:.1f} s, "
          f"{info['index_bytes']} bytes -> {info['path']}")


if __name__ == "__main__":
  entry.quiet_native_logs()  # before define_flags loads TensorFlow
  define_flags()
  flags.mark_flags_as_required(["export_dir", "extract_dir", "output_dir"])
  entry.run(main, "python -m export.encode_entities")
