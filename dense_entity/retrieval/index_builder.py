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
100 entities and for millions.
"""

import json
import os
from typing import Any, Dict, Optional, Sequence

import numpy as np

from dense_entity.common import fileio
from dense_entity.retrieval import index as index_lib

SUMMARY_FILENAME = "indexes.json"


def read_titles(path: str) -> list:
  """Reads entity titles, one per line (UTF-8); line i is the title of row id i.

  Raises:
    FileNotFoundError: `path` does not exist.
  """
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def build_indexes(encodings: np.ndarray, titles: Sequence[str], output_dir: str,
                  kinds: Sequence[str], model_fingerprint: str,
                  config: Optional[index_lib.IndexConfig] = None,
                  normalize_rows: bool = True,
                  row_entities: Optional[np.ndarray] = None) -> Dict[str, Any]:
  """Builds and saves one index per kind, plus the row-id -> title list (paper section 5.2).

  Args:
    encodings: [rows, d] float32 L2-normalised encodings; row i < n is entity titles[i], rows
      n.. (with `row_entities`) more names of entities.
    titles: n entity titles (no newlines).
    output_dir: destination directory (created); existing index directories are replaced.
    kinds: subset of index.KINDS.
    model_fingerprint: fingerprint of the model that produced the encodings.
    config: ScaNN parameters; None derives them from n and d.
    normalize_rows: L2-normalise the rows (index.EntityIndex.build); False for encodings of
      the towers, which are normalised by the model (with the lexical channel, to norm <= 1).
    row_entities: int `[rows]`, the entity id of every row (0..n-1, then the entity each
      name row names; index.check_row_entities), written to row_entities.npy; None: one row
      per entity (a stale row_entities.npy is removed).

  Returns:
    The summary written to output_dir/indexes.json: {"num_entities", "num_rows", "dim",
    "model_fingerprint", "titles": path, "indexes": {kind: {"path", "effective_kind",
    "fallback_reason", "build_seconds", "index_bytes", "parameters"}}}.

  Raises:
    ValueError: unknown kind, no kinds, titles not matching the encodings, a title with a
      newline, or anything EntityIndex.build rejects.
  """
  kinds = list(kinds)
  if not kinds:
    raise ValueError("No index kinds given.")
  unknown = [k for k in kinds if k not in index_lib.KINDS]
  if unknown:
    raise ValueError(f"Unknown index kinds {unknown}; expected some of {index_lib.KINDS}.")
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
  os.makedirs(output_dir, exist_ok=True)
  titles_path = os.path.join(output_dir, index_lib.TITLES_FILENAME)
  fileio.write_text_atomically(titles_path, "".join(t + "\n" for t in titles))
  rows_path = os.path.join(output_dir, index_lib.ROW_ENTITIES_FILENAME)
  if row_entities is None:
    if os.path.exists(rows_path):
      os.remove(rows_path)
  else:
    with open(rows_path + ".tmp", "wb") as f:
      np.save(f, row_entities)
    os.replace(rows_path + ".tmp", rows_path)
  summary = {
      "num_entities": len(titles),
      "num_rows": int(encodings.shape[0]),
      "dim": int(encodings.shape[1]),
      "model_fingerprint": model_fingerprint,
      "titles": titles_path,
      "indexes": {},
  }
  for kind in kinds:
    index = index_lib.EntityIndex.build(encodings, kind, model_fingerprint, config,
                                        normalize_rows=normalize_rows)
    path = os.path.join(output_dir, kind)
    manifest = index.save(path, overwrite=True)
    summary["indexes"][kind] = {
        "path": path,
        "effective_kind": index.effective_kind,
        "fallback_reason": index.fallback_reason,
        "build_seconds": index.build_seconds,
        "index_bytes": int(sum(manifest["files"].values())),
        "parameters": manifest["parameters"],
    }
    # Freed before the next kind is built: a brute-force index holds the float32 matrix (5.9 GB
    # for all of Wikipedia with name rows), which would otherwise add to the next build's peak.
    del index
  fileio.write_text_atomically(os.path.join(output_dir, SUMMARY_FILENAME),
                         json.dumps(summary, indent=2, sort_keys=True) + "\n")
  return summary

