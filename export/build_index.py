"""Builds brute-force / ScaNN AH / ScaNN AH + tree indexes over an entity encodings file.

Usage:
  python -m export.build_index --encodings=entity_encodings.npy --titles=entity_titles.txt \
      --output_dir=DIR --kinds=brute_force,ah,ah_tree --model_fingerprint=STR

Writes DIR/entity_titles.txt, one index directory per kind and DIR/indexes.json
(dense_entity.retrieval.index_builder.build_indexes), all built before any replaces the earlier
ones. DIR must be new, empty or hold encodings and indexes (WS/index); every flag and input is
checked first (a file that is not a .npy array or not UTF-8 titles is named, exit 2).
Encodings with name rows (more rows than titles; retrieval.entity_encodings) need their row ->
entity map: `--row_entities`, by default row_entities.npy beside --encodings when it exists.
"""

import os

from absl import flags
import numpy as np

from dense_entity.common import entry
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder

FLAGS = flags.FLAGS


def load_array(path: str, flag: str) -> np.ndarray:
  """Loads the .npy array file `path` (memory-mapped) that the command-line `flag` names.

  Raises:
    FileNotFoundError: `path` does not exist.
    IsADirectoryError: `path` is a directory.
    ValueError: naming `flag` and `path`, when it is not a .npy array file (text, pickled
      objects, .npz, a truncated file).
  """
  if os.path.isdir(path):
    raise IsADirectoryError(f"{flag}={path} is a directory, not a .npy file")
  try:
    array = np.load(path, mmap_mode="r", allow_pickle=False)
  except FileNotFoundError:
    raise FileNotFoundError(f"{flag}={path} does not exist") from None
  except (ValueError, OSError, EOFError) as e:
    raise ValueError(f"{flag}={path} is not a .npy array file ({' '.join(str(e).split())[:120]})"
                     ) from None
  if not isinstance(array, np.ndarray):
    raise ValueError(f"{flag}={path} is not a .npy array file (an .npz archive?)")
  return array


def main(argv):
  del argv
  # Every flag and input is checked before anything is built or written.
  kinds = index_builder.check_kinds([k.strip() for k in FLAGS.kinds.split(",") if k.strip()])
  index_builder.check_output_dir(FLAGS.output_dir, kinds)
  encodings = load_array(FLAGS.encodings, "--encodings")
  if encodings.ndim != 2 or encodings.dtype.kind != "f":
    raise ValueError(f"--encodings={FLAGS.encodings} holds {encodings.dtype} "
                     f"{list(encodings.shape)}, not float encodings [rows, dim]")
  titles = index_builder.read_titles(FLAGS.titles)
  rows_path = FLAGS.row_entities or os.path.join(os.path.dirname(os.path.abspath(
      FLAGS.encodings)), index_lib.ROW_ENTITIES_FILENAME)
  row_entities = None
  if FLAGS.row_entities or os.path.isfile(rows_path):
    row_entities = load_array(rows_path, "--row_entities")
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
