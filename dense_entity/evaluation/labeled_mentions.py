"""Entity-linking datasets as training mentions: each linked mention of a `--dataset`-style
source (AIDA-CoNLL train, any `jsonl:` file, ...) becomes a training example in the form the
extraction writes (kb.schema: the paper's four mention features, section 4.1, and the gold
entity's title, text, categories and aliases from the workspace's KB).

Gillick et al. (2019) train on Wikipedia links alone and leave in-domain tuning to future work
(section 7); these examples are kept as their own split (their own counters, a fraction of the
batches, `Trainer.set_labeled_mentions`) so that a model tuned on them is measured apart from
the Wikipedia-trained one.

A mention is used when its gold names a KB entity the way evaluation resolves golds
(kb.titles.TitleResolver: normalization, the extraction's redirects, the case- and
accent-insensitive matching key); NIL golds and golds missing from the KB are counted and left
out.
"""

import collections
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.evaluation import baselines
from dense_entity.evaluation import datasets as datasets_lib
from dense_entity.evaluation import metrics
from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.kb import titles as titles_lib

# Keys of every example: the mention record's features as records.mention_dataset yields them
# (categories and aliases '|'-joined).
EXAMPLE_KEYS = tuple(records.MENTION_SPEC)
_BATCH = 8192


def _kb_titles(entity_files: List[str]) -> List[str]:
  """Every entity title of the KB, in file order (one pass parsing only the titles)."""
  spec = {schema.ENTITY_TITLE: records.MENTION_SPEC[schema.ENTITY_TITLE]}
  ds = tf.data.TFRecordDataset(entity_files).batch(_BATCH).map(
      lambda x: tf.io.parse_example(x, spec)[schema.ENTITY_TITLE],
      num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
  out: List[str] = []
  for batch in ds.as_numpy_iterator():
    out.extend(t.decode("utf-8") for t in batch)
  return out


def _entity_features(entity_files: List[str], wanted: set) -> Dict[str, Dict[str, bytes]]:
  """title -> its entity features (bytes; categories and aliases '|'-joined), for `wanted`."""
  found: Dict[str, Dict[str, bytes]] = {}
  if not wanted:
    return found
  wanted_bytes = np.array(sorted(t.encode("utf-8") for t in wanted), dtype=object)
  for batch in records.entity_dataset(entity_files, _BATCH).as_numpy_iterator():
    keep = np.flatnonzero(np.isin(batch[schema.ENTITY_TITLE], wanted_bytes))
    for i in keep:
      title = batch[schema.ENTITY_TITLE][i].decode("utf-8")
      found[title] = {name: batch[name][i] for name in schema.ENTITY_FEATURES}
  return found


def load(specs: Sequence[str], extract_dir: str) -> Tuple[Dict[str, List[bytes]], Dict]:
  """Training examples from the linked mentions of `specs`, with the gold entity's features.

  Args:
    specs: 'FORMAT:PATH' datasets (evaluation.datasets.load).
    extract_dir: a finished extraction: its entities and redirects.tsv are the KB.

  Returns:
    (examples, stats): examples maps every EXAMPLE_KEYS name to a list of `[num_used]` bytes
    values (SOURCE_PAGE is 'DATASET:DOC_ID', MENTION_ID 'DATASET:INDEX'); stats holds, per
    dataset name and in 'total', the counts 'mentions', 'nil', 'gold_missing_from_kb' (NIL
    labels and unresolvable golds are 'nil'; a gold that resolves to no KB entity is
    missing), 'used' and 'distinct_entities'.

  Raises:
    ValueError / FileNotFoundError: as evaluation.datasets.load, naming the spec or file; a
      FileNotFoundError when `extract_dir` is no finished extraction; a ValueError when no
      mention of any dataset names a KB entity (nothing to train on).
  """
  entity_files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  loaded = [(datasets_lib.name_of(spec), datasets_lib.load(spec)) for spec in specs]
  kb_titles = set(_kb_titles(entity_files))
  redirects = baselines.load_redirects(os.path.join(extract_dir, schema.REDIRECTS_FILE))
  resolver = titles_lib.TitleResolver(kb_titles, redirects)
  nil_labels = set(metrics.DEFAULT_NIL_LABELS)
  golds: List[List[str]] = []
  stats: Dict[str, Dict[str, int]] = {}
  total = collections.Counter()
  for name, mentions in loaded:
    counts = collections.Counter(mentions=len(mentions))
    resolved = []
    for m in mentions:
      title = None if m.gold in nil_labels else resolver(m.gold)
      if title is None:
        counts["nil"] += 1
      elif title not in kb_titles:
        counts["gold_missing_from_kb"] += 1
        title = None
      resolved.append(title)
    golds.append(resolved)
    counts["used"] = sum(t is not None for t in resolved)
    counts["distinct_entities"] = len({t for t in resolved if t is not None})
    stats[name] = {k: counts[k] for k in ("mentions", "nil", "gold_missing_from_kb", "used",
                                           "distinct_entities")}
    total.update({k: v for k, v in stats[name].items() if k != "distinct_entities"})
  wanted = {t for resolved in golds for t in resolved if t is not None}
  stats["total"] = {**{k: total[k] for k in ("mentions", "nil", "gold_missing_from_kb",
                                                 "used")}, "distinct_entities": len(wanted)}
  if not wanted:
    raise ValueError(f"no mention of {list(specs)} names an entity of the KB in {extract_dir} "
                     f"({stats['total']}); nothing to train on")
  entities = _entity_features(entity_files, wanted)
  examples: Dict[str, List[bytes]] = {key: [] for key in EXAMPLE_KEYS}
  for (name, mentions), resolved in zip(loaded, golds):
    used = [(i, m, t) for i, (m, t) in enumerate(zip(mentions, resolved)) if t is not None]
    features = datasets_lib.all_features([m for _, m, _ in used])
    for (i, m, title), mention in zip(used, features):
      for key in schema.MENTION_FEATURES:
        examples[key].append(mention[key].encode("utf-8"))
      for key in schema.ENTITY_FEATURES:
        examples[key].append(entities[title][key])
      examples[schema.SOURCE_PAGE].append(f"{name}:{m.doc_id}".encode("utf-8"))
      examples[schema.MENTION_ID].append(f"{name}:{i}".encode("utf-8"))
  return examples, stats
