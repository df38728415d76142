"""Encodes every KB entity with the exported entity encoder and builds the retrieval indexes.

Paper section 5.2: entities are pre-encoded once; a mention is then encoded and matched by
nearest-neighbour search. Row ids are assigned in sorted title order (deterministic, DESIGN.md
"Ids"), so the same KB always gives the same ids.

The command `python -m export.encode_entities` runs `encode_and_index` on a workspace.
"""

import os
from typing import List, Sequence

import numpy as np

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.retrieval import index_builder
from dense_entity.serving import savedmodel

ENCODINGS_FILE = "entity_encodings.npy"


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


def encode_and_index(export_dir: str, extract_dir: str, output_dir: str,
                     kinds: Sequence[str] = ("brute_force",), progress=None) -> dict:
  """Encodes the KB and writes encodings, titles and indexes to `output_dir`.

  Returns:
    The index summary of index_builder.build_indexes.
  """
  manifest = savedmodel.read_manifest(export_dir)
  entities = read_entities(extract_dir)
  encodings = encode_entities(export_dir, entities, progress=progress)
  os.makedirs(output_dir, exist_ok=True)
  tmp = os.path.join(output_dir, ENCODINGS_FILE + ".tmp.npy")
  np.save(tmp, encodings)
  os.replace(tmp, os.path.join(output_dir, ENCODINGS_FILE))
  return index_builder.build_indexes(encodings, [e[schema.ENTITY_TITLE] for e in entities],
                                   output_dir, kinds, manifest["model_fingerprint"])

