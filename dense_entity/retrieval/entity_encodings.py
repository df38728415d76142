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

Name rows. An entity is one row per name: row i < n encodes entity i as the towers were trained
on it (title, text, categories, aliases), and every alias of it (a redirect title or an anchor
alias from the KB merge; up to `max_names_per_entity`, distinct under case folding and not its
title) adds a row encoding the same entity under that name (title = the alias, same text and
categories, no aliases). Retrieval scores an entity by its best row (index.NameRowsIndex), so a
mention spelled as a redirect ('Ubuntu Linux') matches that name as exactly as a title, where one
row had to average every name into one vector (measured at 4.47M entities: README, "All of
Wikipedia as the candidate set"). Row ids of name rows follow the entities' sorted order, after
the n entity rows; `row_entities.npy` maps every row to its entity.

The command `python -m export.encode_entities` runs `encode_and_index` on a workspace.
"""

import json
import os
import shutil
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

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
_NAME_SPEC = {name: records.ENTITY_SPEC[name]
              for name in (schema.ENTITY_TITLE, schema.ENTITY_ALIASES)}
# Name rows per entity at most (README: 17k of the 4.47M entities of all Wikipedia have more than
# 8 aliases, mostly misspellings and old titles).
DEFAULT_MAX_NAMES_PER_ENTITY = 32


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


def entity_names(title: str, aliases: str, max_names: int) -> List[str]:
  """The names that get a row of their own besides the title: the '|'-joined `aliases` in
  order, without empty ones, the title and repeats (compared case-folded), at most
  `max_names` (0: none)."""
  seen, names = {title.casefold()}, []
  for alias in aliases.split(schema.CATEGORY_SEPARATOR):
    alias = alias.strip()
    if len(names) >= max_names:
      break
    if alias and alias.casefold() not in seen:
      seen.add(alias.casefold())
      names.append(alias)
  return names


def _read_names_by_file(files: Sequence[str]) -> List[Tuple[List[str], List[str]]]:
  """(titles, '|'-joined aliases) of each TFRecord file's records, in file order (reads only
  those two features)."""
  out = []
  for path in files:
    titles, aliases = [], []
    ds = tf.data.TFRecordDataset(path).batch(8192).map(
        lambda x: tf.io.parse_example(x, _NAME_SPEC), num_parallel_calls=tf.data.AUTOTUNE)
    for batch in ds:
      titles.extend(t.decode("utf-8") for t in batch[schema.ENTITY_TITLE].numpy())
      aliases.extend(schema.CATEGORY_SEPARATOR.join(a.decode("utf-8") for a in row)
                     for row in batch[schema.ENTITY_ALIASES].to_list())
    out.append((titles, aliases))
  return out


class _RowLayout(NamedTuple):
  titles: List[str]             # n sorted entity titles: row i < n is titles[i]
  rows: List[np.ndarray]        # per file, the entity row of each record in file order
  name_start: np.ndarray        # int64 [n]: first name row of entity i
  row_entities: np.ndarray      # int32 [n + name rows]: the entity of every row


def _row_layout(extract_dir: str, files: Sequence[str], max_names: int) -> _RowLayout:
  """Row ids of entities (sorted titles) and of their name rows (after them, in the same order).

  Raises:
    ValueError: an entity title appears twice in the extraction (names the title).
  """
  per_file = _read_names_by_file(files)
  titles = sorted(t for file_titles, _ in per_file for t in file_titles)
  for a, b in zip(titles, titles[1:]):
    if a == b:
      raise ValueError(f"{extract_dir}: entity {a!r} appears twice")
  row_of = {t: i for i, t in enumerate(titles)}
  n = len(titles)
  counts = np.zeros(n, np.int64)
  rows = []
  for file_titles, file_aliases in per_file:
    file_rows = np.fromiter((row_of[t] for t in file_titles), np.int64, len(file_titles))
    rows.append(file_rows)
    if max_names:
      for row, title, aliases in zip(file_rows, file_titles, file_aliases):
        if aliases:
          counts[row] = len(entity_names(title, aliases, max_names))
  name_start = n + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
  row_entities = np.concatenate([np.arange(n), np.repeat(np.arange(n), counts)]).astype(np.int32)
  return _RowLayout(titles, rows, name_start, row_entities)


class EncodedKB(NamedTuple):
  """What `encode_kb` returns."""
  encodings: np.ndarray     # [rows, dim] float32 or float16, memory-mapped read-only
  titles: List[str]         # n sorted entity titles; entity id i = titles[i] = row i
  row_entities: Optional[np.ndarray]  # int32 [rows], the entity of every row; None: rows = n


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
              storage_dtype: str = "auto",
              max_names_per_entity: int = DEFAULT_MAX_NAMES_PER_ENTITY,
              publish: bool = True) -> EncodedKB:
  """Encodes every KB entity into OUTPUT_DIR/entity_encodings.npy, streaming and resumable.

  Paper section 5.2: entities are encoded once by the entity tower; row i of the matrix is
  the i-th entity title in sorted order (DESIGN.md, "Ids"), and rows n.. are the entities'
  name rows (module docstring).

  Args:
    export_dir: an exported model (export_manifest.json present).
    extract_dir: a finished extraction (its entities-* TFRecord shards).
    output_dir: destination; OUTPUT_DIR/.encoding holds the work in progress.
    batch_size: entities per encoder call.
    progress: called with the number of entities encoded after each batch (also for shards
      skipped on resume, so a progress bar starts where the last run stopped).
    storage_dtype: 'auto' (float16 above 1 GiB of float32, `storage_dtype_for`), 'float32'
      or 'float16'.
    max_names_per_entity: name rows per entity at most (`entity_names`); 0: one row per
      entity.
    publish: move the finished encodings and encodings_manifest.json into `output_dir` and
      remove the work in progress. False leaves both finished in OUTPUT_DIR/.encoding
      (`work_files`) for the caller to publish with the titles and indexes (encode_and_index);
      a later call resumes with every shard done.

  Returns:
    EncodedKB(encodings [rows, dim] float32 or float16, memory-mapped read-only, rows as the
    towers made them; the n sorted entity titles; row_entities int32 [rows], or None when
    there are no name rows). A run that stops (killed, or an exception, also from `progress`)
    keeps its finished shards for the next run.

  Raises:
    FileNotFoundError: the export or the extraction is not finished.
    ValueError: an entity title appears twice, an unknown storage_dtype or a negative
      max_names_per_entity.
  """
  _check_storage_dtype(storage_dtype)  # before any work, not only when the dtype is chosen
  if max_names_per_entity < 0:
    raise ValueError(f"max_names_per_entity must be >= 0, got {max_names_per_entity}")
  manifest = savedmodel.read_manifest(export_dir)
  fingerprint, dim = manifest["model_fingerprint"], int(manifest["encoding_dim"])
  files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  work = os.path.join(output_dir, _WORK_DIR)
  state = {"model_fingerprint": fingerprint, "dim": dim, "storage_dtype": storage_dtype,
           "max_names_per_entity": max_names_per_entity,
           "files": [[os.path.abspath(f), os.path.getsize(f)] for f in files]}
  if (_read_json(os.path.join(work, _STATE_FILE), None) != state
      or not os.path.exists(os.path.join(work, ENCODINGS_FILE))):
    shutil.rmtree(work, ignore_errors=True)  # another model or KB: nothing to resume
  os.makedirs(work, exist_ok=True)
  layout = _row_layout(extract_dir, files, max_names_per_entity)
  n, num_rows = len(layout.titles), len(layout.row_entities)
  dtype = storage_dtype_for(num_rows, dim, storage_dtype)
  partial = os.path.join(work, ENCODINGS_FILE)
  done = set(_read_json(os.path.join(work, _DONE_FILE), []))
  if not os.path.exists(os.path.join(work, _STATE_FILE)):
    np.lib.format.open_memmap(partial, mode="w+", dtype=dtype, shape=(num_rows, dim)).flush()
    fileio.write_text_atomically(os.path.join(work, _STATE_FILE), json.dumps(state))
    done = set()
  matrix = np.load(partial, mmap_mode="r+")
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
  for shard, (path, shard_rows) in enumerate(zip(files, layout.rows)):
    if shard in done:
      if progress:
        progress(len(shard_rows))
      continue
    names = _NameRows(encoder, matrix, batch_size)
    start = 0
    for batch in records.entity_dataset([path], batch_size):
      size = int(batch[schema.ENTITY_TITLE].shape[0])
      rows = shard_rows[start:start + size]
      matrix[rows] = encoder({k: batch[k] for k in schema.ENTITY_FEATURES},
                             batch_size=batch_size)
      if max_names_per_entity:
        names.add(batch, layout.name_start[rows], max_names_per_entity)
      start += size
      if progress:
        progress(size)
    names.flush()
    matrix.flush()
    done.add(shard)
    fileio.write_text_atomically(os.path.join(work, _DONE_FILE), json.dumps(sorted(done)))
  del matrix
  fileio.write_text_atomically(
      os.path.join(work, ENCODINGS_MANIFEST),
      json.dumps({"model_fingerprint": fingerprint, "num_entities": n, "num_rows": num_rows,
                  "max_names_per_entity": max_names_per_entity, "dim": dim,
                  "dtype": np.dtype(dtype).name, "extract_dir": os.path.abspath(extract_dir),
                  "shards": len(files)}, indent=2, sort_keys=True) + "\n")
  final = partial
  if publish:
    final = os.path.join(output_dir, ENCODINGS_FILE)
    manifest_path = os.path.join(output_dir, ENCODINGS_MANIFEST)
    if os.path.exists(manifest_path):
      os.remove(manifest_path)  # never a manifest over encodings it does not describe
    os.replace(partial, final)
    os.replace(os.path.join(work, ENCODINGS_MANIFEST), manifest_path)
    shutil.rmtree(work, ignore_errors=True)
  return EncodedKB(np.load(final, mmap_mode="r"), layout.titles,
                   layout.row_entities if num_rows > n else None)


def work_files(output_dir: str) -> dict:
  """{published name: path} of the finished encodings that `encode_kb(..., publish=False)`
  left in OUTPUT_DIR/.encoding."""
  work = os.path.join(output_dir, _WORK_DIR)
  return {name: os.path.join(work, name) for name in (ENCODINGS_FILE, ENCODINGS_MANIFEST)}


class _NameRows:
  """Collects name rows of entity batches and encodes them batch_size at a time into `matrix`."""

  def __init__(self, encoder, matrix: np.ndarray, batch_size: int):
    self.encoder, self.matrix, self.batch_size = encoder, matrix, batch_size
    self.features = {k: [] for k in schema.ENTITY_FEATURES}
    self.rows: List[int] = []

  def add(self, batch, name_start: np.ndarray, max_names: int) -> None:
    """Queues the name rows of one entity batch (rows from name_start[i] for record i)."""
    cols = {k: batch[k].numpy() for k in schema.ENTITY_FEATURES}
    for i, aliases in enumerate(cols[schema.ENTITY_ALIASES]):
      if not aliases:
        continue
      title = cols[schema.ENTITY_TITLE][i].decode("utf-8")
      for j, name in enumerate(entity_names(title, aliases.decode("utf-8"), max_names)):
        self.features[schema.ENTITY_TITLE].append(name.encode("utf-8"))
        self.features[schema.ENTITY_TEXT].append(cols[schema.ENTITY_TEXT][i])
        self.features[schema.ENTITY_CATEGORIES].append(cols[schema.ENTITY_CATEGORIES][i])
        self.features[schema.ENTITY_ALIASES].append(b"")
        self.rows.append(int(name_start[i]) + j)
      if len(self.rows) >= self.batch_size:
        self.flush()

  def flush(self) -> None:
    if self.rows:
      self.matrix[np.asarray(self.rows)] = self.encoder(self.features,
                                                        batch_size=self.batch_size)
    self.features = {k: [] for k in schema.ENTITY_FEATURES}
    self.rows = []


def check_arguments(export_dir: str, extract_dir: str, output_dir: str, kinds: Sequence[str],
                    storage_dtype: str = "auto",
                    max_names_per_entity: int = DEFAULT_MAX_NAMES_PER_ENTITY) -> dict:
  """Checks every argument of `encode_and_index` before any work; returns the export manifest.

  Raises:
    FileNotFoundError: the export or the extraction is not finished.
    ValueError: an unknown or no index kind, an unknown storage_dtype or a negative
      max_names_per_entity.
    NotADirectoryError, FileExistsError: `output_dir` is a file or holds something other than
      encodings and indexes (index_builder.check_output_dir).
  """
  manifest = savedmodel.read_manifest(export_dir)
  kinds = index_builder.check_kinds(kinds)
  _check_storage_dtype(storage_dtype)
  if max_names_per_entity < 0:
    raise ValueError(f"max_names_per_entity must be >= 0, got {max_names_per_entity}")
  records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  index_builder.check_output_dir(output_dir, kinds)
  return manifest


def encode_and_index(export_dir: str, extract_dir: str, output_dir: str,
                     kinds: Sequence[str] = ("brute_force",), progress=None,
                     storage_dtype: str = "auto",
                     max_names_per_entity: int = DEFAULT_MAX_NAMES_PER_ENTITY) -> dict:
  """Encodes the KB (`encode_kb`, storing `storage_dtype`, with up to `max_names_per_entity`
  name rows per entity) and writes encodings, titles, row_entities.npy and indexes to
  `output_dir`.

  Every argument is checked before any work. The encodings stay in OUTPUT_DIR/.encoding (a
  killed run resumes there, also when it was killed while the indexes were built) until every
  index is built; then encodings, titles, row map and indexes replace the earlier ones together
  (index_builder.build_indexes, publish_with). So a failed or killed run leaves an earlier
  finished `output_dir` consistent: its encodings, titles, row map and indexes all of one run.

  Returns:
    The index summary of index_builder.build_indexes.

  Raises:
    FileNotFoundError: the export or the extraction is not finished.
    ValueError: an unknown or no index kind, an unknown storage_dtype, a negative
      max_names_per_entity, or an entity title twice.
    NotADirectoryError, FileExistsError: `output_dir` is a file or holds something other than
      encodings and indexes (index_builder.check_output_dir).
  """
  manifest = check_arguments(export_dir, extract_dir, output_dir, kinds, storage_dtype,
                             max_names_per_entity)
  os.makedirs(output_dir, exist_ok=True)
  kb = encode_kb(export_dir, extract_dir, output_dir, progress=progress,
                 storage_dtype=storage_dtype, max_names_per_entity=max_names_per_entity,
                 publish=False)
  # The towers' encodings are used as they are: re-normalising would rank entities whose
  # lexical part is empty above the score the model was trained with (index module docstring).
  summary = index_builder.build_indexes(kb.encodings, kb.titles, output_dir, kinds,
                                        manifest["model_fingerprint"], normalize_rows=False,
                                        row_entities=kb.row_entities,
                                        publish_with=work_files(output_dir))
  shutil.rmtree(os.path.join(output_dir, _WORK_DIR), ignore_errors=True)
  return summary

