"""Encodes every KB entity with the exported entity encoder and builds the retrieval indexes.

Paper section 5.2: entities are pre-encoded once; a mention is then encoded and matched by
nearest-neighbour search. Row ids are assigned in sorted title order (deterministic, DESIGN.md
"Ids"), so the same KB always gives the same ids.

At Wikipedia scale (4.5M entities) the KB is encoded in a stream (`encode_kb`): one pass reads
only the titles to assign row ids, a second encodes the entity records shard by shard (the
extraction's TFRecord files) into a memory-mapped .npy, so memory stays bounded by one batch plus
the row-id map; a finished shard is recorded, and a run killed midway resumes with the shards it
had finished (same model fingerprint and the same input files). Encodings are stored as float32,
or as float16 when the float32 matrix would exceed index.FLOAT16_STORAGE_BYTES (1 GiB).

The command `python -m export.encode_entities` runs `encode_and_index` on a workspace.
"""

import json
import os
import shutil
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.common import fileio
from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder
from dense_entity.serving import savedmodel

ENCODINGS_FILE = "entity_encodings.npy"
ENCODINGS_MANIFEST = "encodings_manifest.json"
# Work in progress of `encode_kb`: the partial matrix, the sorted titles and the finished shards.
_WORK_DIR = ".encoding"
_STATE_FILE = "state.json"
_DONE_FILE = "done_shards.json"
_TITLE_SPEC = {schema.ENTITY_TITLE: tf.io.FixedLenFeature([], tf.string, default_value="")}


def read_entities(extract_dir: str) -> List[dict]:
  """All entity records of a finished extraction, sorted by title (row id order).

  Returns:
    dicts {ENTITY_TITLE, ENTITY_TEXT, ENTITY_CATEGORIES ('|'-joined)} of str.
  """
  files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  rows = []
  for batch in records.entity_dataset(files, 4096):
    cols = {k: [v.decode("utf-8") for v in batch[k].numpy()] for k in schema.ENTITY_FEATURES}
    rows.extend(dict(zip(cols, values)) for values in zip(*cols.values()))
  rows.sort(key=lambda r: r[schema.ENTITY_TITLE])
  for a, b in zip(rows, rows[1:]):
    if a[schema.ENTITY_TITLE] == b[schema.ENTITY_TITLE]:
      raise ValueError(f"{extract_dir}: entity {a[schema.ENTITY_TITLE]!r} appears twice")
  return rows


def encode_entities(export_dir: str, entities: Sequence[dict], batch_size: int = 1024,
                    progress=None) -> np.ndarray:
  """Returns float32 `[len(entities), dim]` L2-normalised encodings, row i = entities[i]."""
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
  out = []
  for start in range(0, len(entities), batch_size):
    chunk = entities[start:start + batch_size]
    out.append(encoder({k: [e[k] for e in chunk] for k in schema.ENTITY_FEATURES}))
    if progress:
      progress(len(chunk))
  dim = savedmodel.read_manifest(export_dir)["encoding_dim"]
  return np.concatenate(out) if out else np.zeros((0, dim), np.float32)


def _read_titles_by_file(files: Sequence[str]) -> List[List[str]]:
  """The entity titles of each TFRecord file, in file order (reads only the title feature)."""
  out = []
  for path in files:
    titles = []
    ds = tf.data.TFRecordDataset(path).batch(8192).map(
        lambda x: tf.io.parse_example(x, _TITLE_SPEC)[schema.ENTITY_TITLE],
        num_parallel_calls=tf.data.AUTOTUNE)
    for batch in ds:
      titles.extend(t.decode("utf-8") for t in batch.numpy())
    out.append(titles)
  return out


def _row_ids(extract_dir: str, files: Sequence[str]) -> Tuple[List[str], List[np.ndarray]]:
  """Sorted titles (row i = titles[i]) and, per file, the row id of each record in file order.

  Raises:
    ValueError: an entity title appears twice in the extraction (names the title).
  """
  per_file = _read_titles_by_file(files)
  titles = sorted(t for file_titles in per_file for t in file_titles)
  for a, b in zip(titles, titles[1:]):
    if a == b:
      raise ValueError(f"{extract_dir}: entity {a!r} appears twice")
  row_of = {t: i for i, t in enumerate(titles)}
  rows = [np.fromiter((row_of[t] for t in file_titles), np.int64, len(file_titles))
          for file_titles in per_file]
  return titles, rows


def _read_json(path: str, default):
  if not os.path.exists(path):
    return default
  with open(path, encoding="utf-8") as f:
    return json.load(f)


STORAGE_DTYPES = ("auto", "float32", "float16")


def _check_storage_dtype(storage_dtype: str) -> None:
  if storage_dtype not in STORAGE_DTYPES:
    raise ValueError(f"storage_dtype must be one of {STORAGE_DTYPES}, got {storage_dtype!r}")


def storage_dtype_for(n: int, dim: int, storage_dtype: str = "auto") -> np.dtype:
  """The dtype the `[n, dim]` encoding matrix is stored in: 'auto' is float16 when the float32
  matrix would exceed index.FLOAT16_STORAGE_BYTES (1 GiB), else float32.

  Raises:
    ValueError: storage_dtype not in STORAGE_DTYPES.
  """
  _check_storage_dtype(storage_dtype)
  if storage_dtype == "auto":
    return np.dtype(np.float16 if 4 * n * dim > index_lib.FLOAT16_STORAGE_BYTES
                    else np.float32)
  return np.dtype(storage_dtype)


def encode_kb(export_dir: str, extract_dir: str, output_dir: str, batch_size: int = 4096,
              progress: Optional[Callable[[int], None]] = None,
              storage_dtype: str = "auto") -> Tuple[np.ndarray, List[str]]:
  """Encodes every KB entity into OUTPUT_DIR/entity_encodings.npy, streaming and resumable.

  Paper section 5.2: entities are encoded once by the entity tower; row i of the matrix is
  the i-th entity title in sorted order (DESIGN.md, "Ids").

  Args:
    export_dir: an exported model (export_manifest.json present).
    extract_dir: a finished extraction (its entities-* TFRecord shards).
    output_dir: destination; OUTPUT_DIR/.encoding holds the work in progress.
    batch_size: entities per encoder call.
    progress: called with the number of entities encoded after each batch (also for shards
      skipped on resume, so a progress bar starts where the last run stopped).
    storage_dtype: 'auto' (float16 above 1 GiB of float32, `storage_dtype_for`), 'float32'
      or 'float16'.

  Returns:
    (encodings [n, dim] float32 or float16, memory-mapped read-only, L2-normalised rows;
    the n sorted entity titles). A run that stops (killed, or an exception, also from
    `progress`) keeps its finished shards for the next run.

  Raises:
    FileNotFoundError: the export or the extraction is not finished.
    ValueError: an entity title appears twice, or an unknown storage_dtype.
  """
  _check_storage_dtype(storage_dtype)  # before any work, not only when the dtype is chosen
  manifest = savedmodel.read_manifest(export_dir)
  fingerprint, dim = manifest["model_fingerprint"], int(manifest["encoding_dim"])
  files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  work = os.path.join(output_dir, _WORK_DIR)
  state = {"model_fingerprint": fingerprint, "dim": dim, "storage_dtype": storage_dtype,
           "files": [[os.path.abspath(f), os.path.getsize(f)] for f in files]}
  if _read_json(os.path.join(work, _STATE_FILE), None) != state:
    shutil.rmtree(work, ignore_errors=True)  # another model or KB: nothing to resume
  os.makedirs(work, exist_ok=True)
  titles, rows = _row_ids(extract_dir, files)
  n = len(titles)
  dtype = storage_dtype_for(n, dim, storage_dtype)
  partial = os.path.join(work, ENCODINGS_FILE)
  done = set(_read_json(os.path.join(work, _DONE_FILE), []))
  if not os.path.exists(os.path.join(work, _STATE_FILE)):
    np.lib.format.open_memmap(partial, mode="w+", dtype=dtype, shape=(n, dim)).flush()
    fileio.write_text_atomically(os.path.join(work, _STATE_FILE), json.dumps(state))
    done = set()
  matrix = np.load(partial, mmap_mode="r+")
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
  for shard, (path, shard_rows) in enumerate(zip(files, rows)):
    if shard in done:
      if progress:
        progress(len(shard_rows))
      continue
    start = 0
    for batch in records.entity_dataset([path], batch_size):
      size = int(batch[schema.ENTITY_TITLE].shape[0])
      matrix[shard_rows[start:start + size]] = encoder(
          {k: batch[k] for k in schema.ENTITY_FEATURES}, batch_size=batch_size)
      start += size
      if progress:
        progress(size)
    matrix.flush()
    done.add(shard)
    fileio.write_text_atomically(os.path.join(work, _DONE_FILE), json.dumps(sorted(done)))
  del matrix
  final = os.path.join(output_dir, ENCODINGS_FILE)
  os.replace(partial, final)
  fileio.write_text_atomically(
      os.path.join(output_dir, ENCODINGS_MANIFEST),
      json.dumps({"model_fingerprint": fingerprint, "num_entities": n, "dim": dim,
                  "dtype": np.dtype(dtype).name, "extract_dir": os.path.abspath(extract_dir),
                  "shards": len(files)}, indent=2, sort_keys=True) + "\n")
  shutil.rmtree(work, ignore_errors=True)
  return np.load(final, mmap_mode="r"), titles


def encode_and_index(export_dir: str, extract_dir: str, output_dir: str,
                     kinds: Sequence[str] = ("brute_force",), progress=None,
                     storage_dtype: str = "auto") -> dict:
  """Encodes the KB (`encode_kb`, storing `storage_dtype`) and writes encodings, titles and
  indexes to `output_dir`.

  Returns:
    The index summary of index_builder.build_indexes.
  """
  manifest = savedmodel.read_manifest(export_dir)
  os.makedirs(output_dir, exist_ok=True)
  encodings, titles = encode_kb(export_dir, extract_dir, output_dir, progress=progress,
                                storage_dtype=storage_dtype)
  # The towers' encodings are used as they are: re-normalising would rank entities whose
  # lexical part is empty above the score the model was trained with (index module docstring).
  return index_builder.build_indexes(encodings, titles, output_dir, kinds,
                                     manifest["model_fingerprint"], normalize_rows=False)

