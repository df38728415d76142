"""Builds brute-force / ScaNN AH / ScaNN AH + tree indexes over entity encodings (paper 5.2).

`build_indexes` writes, under its output directory (the command `python -m export.build_index`
runs it on an encodings file):
  entity_titles.txt        one entity title per line; line i is entity id i (and row i of
                           every index).
  row_entities.npy         with name rows only: int32 [rows], the entity id of every index row
                           (rows n.. are more names of entities; index.NameRowsIndex).
  <kind>/                  one EntityIndex directory per kind (index_manifest.json + files).
  indexes.json             summary: n, dim, fingerprint, and per kind the effective kind,
                           fallback reason, build time (seconds) and size (bytes).
Index parameters are derived from n (index.derive_config), so the same command works for
100 entities and for millions. Every file is built in `.staging-*` inside the output directory and
moved in only when every index is built, indexes.json last; the output directory must be new,
empty or hold earlier encodings and indexes (check_output_dir).
"""

import json
import os
import shutil
import uuid
from typing import Any, Dict, Optional, Sequence

import numpy as np

from dense_entity.common import fileio
from dense_entity.retrieval import index as index_lib

SUMMARY_FILENAME = "indexes.json"
# Inside the output directory: the new titles, row map and indexes of a run, until published.
_STAGING_PREFIX = ".staging-"


def read_titles(path: str) -> list:
  """Reads entity titles, one per line (UTF-8); line i is the title of row id i.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: naming 'PATH:LINE', when a line is not UTF-8.
  """
  try:
    with open(path, encoding="utf-8") as f:
      return [line.rstrip("\n") for line in f]
  except UnicodeDecodeError as e:
    with open(path, "rb") as f:
      for number, line in enumerate(f, 1):
        try:
          line.decode("utf-8")
        except UnicodeDecodeError as line_error:
          raise ValueError(f"{path}:{number}: not UTF-8 text ({line_error.reason} at byte "
                           f"{line_error.start} of the line); titles must be UTF-8, one per "
                           "line") from None
    raise ValueError(f"{path}: not UTF-8 text ({e.reason})") from None


def check_kinds(kinds: Sequence[str]) -> list:
  """Returns `kinds` as a list after checking them (before any work).

  Raises:
    ValueError: no kinds, or a kind not in index.KINDS (named).
  """
  kinds = list(kinds)
  if not kinds:
    raise ValueError("No index kinds given.")
  unknown = [k for k in kinds if k not in index_lib.KINDS]
  if unknown:
    raise ValueError(f"Unknown index kinds {unknown}; expected some of {index_lib.KINDS}.")
  return kinds


def check_output_dir(output_dir: str, kinds: Sequence[str]) -> None:
  """Checks that `output_dir` may receive encodings and indexes (before any work): new, empty,
  or holding earlier ones (fileio.check_output_dir with fileio.INDEX), and each kind's
  directory in it new or an earlier index.

  Raises:
    NotADirectoryError: `output_dir` is a file.
    FileExistsError: naming the directory, when it holds another stage's output or other
      files, or an index kind's directory holds something other than an index.
  """
  fileio.check_output_dir(output_dir, fileio.INDEX)
  for kind in kinds:
    fileio.check_replaceable(os.path.join(output_dir, kind), index_lib.MANIFEST_FILENAME)


def remove_staging(output_dir: str) -> None:
  """Removes the staging directories (`.staging-*`) killed runs left in `output_dir`."""
  if os.path.isdir(output_dir):
    for name in os.listdir(output_dir):
      if name.startswith(_STAGING_PREFIX):
        shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)


def build_indexes(encodings: np.ndarray, titles: Sequence[str], output_dir: str,
                  kinds: Sequence[str], model_fingerprint: str,
                  config: Optional[index_lib.IndexConfig] = None,
                  normalize_rows: bool = True,
                  row_entities: Optional[np.ndarray] = None,
                  publish_with: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
  """Builds and saves one index per kind, plus the row-id -> title list (paper section 5.2).

  Everything is built in a staging directory inside `output_dir` first; only when every index
  is built are the files published: the summaries (indexes.json and the names in
  `publish_with` that end in .json) are removed first, then titles, row map, `publish_with`
  files and index directories are moved in, and indexes.json is written last. So a failed or
  killed build leaves the earlier titles, indexes and encodings of `output_dir` as they were
  (a kill within the moves leaves no indexes.json). Disk: the old and the new indexes side by
  side until published.

  Args:
    encodings: [rows, d] float32 L2-normalised encodings; row i < n is entity titles[i], rows
      n.. (with `row_entities`) more names of entities.
    titles: n entity titles (no newlines).
    output_dir: destination directory (created); index directories of `kinds` are replaced.
    kinds: subset of index.KINDS.
    model_fingerprint: fingerprint of the model that produced the encodings.
    config: ScaNN parameters; None derives them from n and d.
    normalize_rows: L2-normalise the rows (index.EntityIndex.build); False for encodings of
      the towers, which are normalised by the model (with the lexical channel, to norm <= 1).
    row_entities: int `[rows]`, the entity id of every row (0..n-1, then the entity each
      name row names; index.check_row_entities), written to row_entities.npy; None: one row
      per entity (a stale row_entities.npy is removed).
    publish_with: {file name: path} of more finished files (on the filesystem of
      `output_dir`) moved to OUTPUT_DIR/NAME with the indexes, e.g. the encodings of
      entity_encodings.encode_and_index; names ending in .json are written after the others.

  Returns:
    The summary written to output_dir/indexes.json: {"num_entities", "num_rows", "dim",
    "model_fingerprint", "titles": path, "indexes": {kind: {"path", "effective_kind",
    "fallback_reason", "build_seconds", "index_bytes", "parameters"}}}.

  Raises:
    ValueError: unknown kind, no kinds, titles not matching the encodings, a title with a
      newline, or anything EntityIndex.build rejects; all before anything is written.
    NotADirectoryError, FileExistsError: `output_dir` is a file, or holds something other than
      encodings and indexes (check_output_dir); nothing is written.
  """
  kinds = check_kinds(kinds)
  encodings = np.asarray(encodings)
  if encodings.ndim != 2:
    raise ValueError(f"Encodings must have shape [n, dim], got {encodings.shape}.")
  if row_entities is not None:
    row_entities = np.asarray(row_entities, np.int32)
    index_lib.check_row_map(row_entities, encodings.shape[0], len(titles))
  elif len(titles) != encodings.shape[0]:
    raise ValueError(f"{len(titles)} titles for {encodings.shape[0]} encodings; row i of the "
                     "encodings must be titles[i].")
  bad = [i for i, t in enumerate(titles) if "\n" in t or "\r" in t]
  if bad:
    raise ValueError(f"Titles contain line breaks at rows {bad[:5]}.")
  check_output_dir(output_dir, kinds)
  os.makedirs(output_dir, exist_ok=True)
  remove_staging(output_dir)
  staging = os.path.join(output_dir, _STAGING_PREFIX + uuid.uuid4().hex[:8])
  os.makedirs(staging)
  try:
    summary = _build_staged(encodings, titles, staging, output_dir, kinds, model_fingerprint,
                            config, normalize_rows, row_entities)
    _publish(staging, output_dir, kinds, row_entities is not None, dict(publish_with or {}))
    fileio.write_text_atomically(os.path.join(output_dir, SUMMARY_FILENAME),
                                 json.dumps(summary, indent=2, sort_keys=True) + "\n")
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return summary


def _build_staged(encodings, titles, staging, output_dir, kinds, model_fingerprint, config,
                  normalize_rows, row_entities) -> Dict[str, Any]:
  """Writes titles, the row map and every index into `staging`; returns the summary with the
  paths they will have in `output_dir`."""
  fileio.write_text_atomically(os.path.join(staging, index_lib.TITLES_FILENAME),
                               "".join(t + "\n" for t in titles))
  if row_entities is not None:
    with open(os.path.join(staging, index_lib.ROW_ENTITIES_FILENAME), "wb") as f:
      np.save(f, row_entities)
  summary = {
      "num_entities": len(titles),
      "num_rows": int(encodings.shape[0]),
      "dim": int(encodings.shape[1]),
      "model_fingerprint": model_fingerprint,
      "titles": os.path.join(output_dir, index_lib.TITLES_FILENAME),
      "indexes": {},
  }
  for kind in kinds:
    index = index_lib.EntityIndex.build(encodings, kind, model_fingerprint, config,
                                        normalize_rows=normalize_rows)
    manifest = index.save(os.path.join(staging, kind), overwrite=True)
    summary["indexes"][kind] = {
        "path": os.path.join(output_dir, kind),
        "effective_kind": index.effective_kind,
        "fallback_reason": index.fallback_reason,
        "build_seconds": index.build_seconds,
        "index_bytes": int(sum(manifest["files"].values())),
        "parameters": manifest["parameters"],
    }
    # Freed before the next kind is built: a brute-force index holds the float32 matrix (5.9 GB
    # for all of Wikipedia with name rows), which would otherwise add to the next build's peak.
    del index
  return summary


def _publish(staging: str, output_dir: str, kinds: Sequence[str], has_row_map: bool,
             publish_with: Dict[str, str]) -> None:
  """Moves the staged files (and `publish_with`) into `output_dir`, summaries last."""
  summaries = [n for n in publish_with if n.endswith(".json")]
  for name in [SUMMARY_FILENAME] + summaries:
    path = os.path.join(output_dir, name)
    if os.path.exists(path):
      os.remove(path)
  for name, source in publish_with.items():
    if name not in summaries:
      os.replace(source, os.path.join(output_dir, name))
  os.replace(os.path.join(staging, index_lib.TITLES_FILENAME),
             os.path.join(output_dir, index_lib.TITLES_FILENAME))
  rows_path = os.path.join(output_dir, index_lib.ROW_ENTITIES_FILENAME)
  if has_row_map:
    os.replace(os.path.join(staging, index_lib.ROW_ENTITIES_FILENAME), rows_path)
  elif os.path.exists(rows_path):
    os.remove(rows_path)
  for kind in kinds:
    fileio.replace_directory(os.path.join(staging, kind), os.path.join(output_dir, kind),
                             index_lib.MANIFEST_FILENAME)
  for name in summaries:
    os.replace(publish_with[name], os.path.join(output_dir, name))
