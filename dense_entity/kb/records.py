"""tf.data input of the extraction outputs (schema.py names the features; WORKSPACE.md the files).
"""

import json
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.kb import schema

_STRING = tf.io.FixedLenFeature([], tf.string, default_value="")
_STRINGS = tf.io.RaggedFeature(tf.string)

MENTION_SPEC = {
    **{name: _STRING for name in schema.MENTION_FEATURES},
    schema.ENTITY_TITLE: _STRING,
    schema.ENTITY_TEXT: _STRING,
    schema.ENTITY_CATEGORIES: _STRINGS,
    schema.ENTITY_ALIASES: _STRINGS,
    schema.SOURCE_PAGE: _STRING,
    schema.MENTION_ID: _STRING,
}

ENTITY_SPEC = {
    schema.ENTITY_TITLE: _STRING,
    schema.ENTITY_TEXT: _STRING,
    schema.ENTITY_CATEGORIES: _STRINGS,
    schema.ENTITY_ALIASES: _STRINGS,
}


def require_extraction(extract_dir: str) -> dict:
  """Returns the extraction MANIFEST.json; raises FileNotFoundError when the stage did not finish.
  """
  path = os.path.join(extract_dir, schema.MANIFEST_FILE)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(
        f"{path} is missing: {extract_dir} holds no finished extraction (run "
        "`python -m beam_pipelines.extract_wikipedia --output_dir=...` first)")
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def mining_round_files(negatives_dir: str, flag: str) -> Tuple[List[str], int]:
  """The sorted pair files and round number of a finished hard negative mining round.

  Args:
    negatives_dir: the round's output directory (WS/negatives/round_N).
    flag: the command-line flag that named it, for the message (e.g. '--hard_negatives').

  Raises:
    FileNotFoundError: naming `flag` and the directory, when it has no MANIFEST.json, its
      MANIFEST.json is not a mining round's (no 'round'), or no hard_negatives-* files are
      beside it.
  """
  path = os.path.join(negatives_dir, schema.MANIFEST_FILE)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(
        f"{flag}={negatives_dir} holds no finished mining round ({path} is missing); run "
        "`python -m beam_pipelines.mine_hard_negatives --output_dir=...` first")
  try:
    with tf.io.gfile.GFile(path) as f:
      manifest = json.load(f)
  except ValueError:
    manifest = None
  files = sorted(tf.io.gfile.glob(os.path.join(negatives_dir, schema.NEGATIVES_PREFIX + "-*")))
  if not isinstance(manifest, dict) or "round" not in manifest or not files:
    raise FileNotFoundError(f"{flag}={negatives_dir}: {path} is not a mining round's manifest, "
                            f"or no {schema.NEGATIVES_PREFIX}-* files are beside it")
  return files, int(manifest["round"])


def record_files(extract_dir: str, prefix: str) -> List[str]:
  """Sorted TFRecord shards `prefix-*` of a finished extraction; raises if there are none."""
  require_extraction(extract_dir)
  files = sorted(tf.io.gfile.glob(os.path.join(extract_dir, prefix + "-*")))
  if not files:
    raise FileNotFoundError(f"no {prefix}-* files in {extract_dir}")
  return files


def _join_categories(features):
  """Joins the categories and the aliases of each record with '|' (records without aliases,
  e.g. from older extractions, get '')."""
  for name in (schema.ENTITY_CATEGORIES, schema.ENTITY_ALIASES):
    if name in features:
      features[name] = tf.strings.reduce_join(features[name], axis=-1,
                                              separator=schema.CATEGORY_SEPARATOR)
  return features


def keep_link_sources(records: tf.data.Dataset,
                      link_sources: Sequence[str]) -> tf.data.Dataset:
  """Serialized mention records -> those whose schema.LINK_SOURCE is in `link_sources` (all
  of them when it is empty). Records without the feature (older extractions) have source ''
  and are dropped by any non-empty `link_sources`."""
  if not link_sources:
    return records
  keep = tf.constant(sorted(link_sources), tf.string)
  spec = {schema.LINK_SOURCE: _STRING}

  def kept(record):
    source = tf.io.parse_single_example(record, spec)[schema.LINK_SOURCE]
    return tf.reduce_any(tf.equal(source, keep))

  return records.filter(kept)


def keep_max_gold_rank(records: tf.data.Dataset, max_gold_rank: int) -> tf.data.Dataset:
  """Serialized hard negative pair records -> those mined from mentions whose gold entity
  ranked at most `max_gold_rank` (schema.GOLD_RANK, 0-based); all of them when
  `max_gold_rank` < 0. Records without the feature (mined before it was recorded) are
  dropped by any limit: check with `pairs_have_gold_rank` first."""
  if max_gold_rank < 0:
    return records
  spec = {schema.GOLD_RANK: tf.io.FixedLenFeature([], tf.int64, default_value=-1)}

  def kept(record):
    rank = tf.io.parse_single_example(record, spec)[schema.GOLD_RANK]
    return tf.logical_and(rank >= 0, rank <= max_gold_rank)

  return records.filter(kept)


def keep_described_negatives(records: tf.data.Dataset, described_only: bool) -> tf.data.Dataset:
  """Serialized hard negative pair records -> those whose negative entity has a description
  (a non-empty schema.ENTITY_TEXT), when `described_only`; all of them otherwise. Not in the
  paper: at full KB most mined negatives are title-only entries, and the logistic task on them
  lowers every title-only entity (README, "Hard negative mining at full scale")."""
  if not described_only:
    return records
  spec = {schema.ENTITY_TEXT: _STRING}

  def kept(record):
    return tf.strings.length(tf.io.parse_single_example(record, spec)[schema.ENTITY_TEXT]) > 0

  return records.filter(kept)


def entity_ids(titles: tf.Tensor) -> tf.Tensor:
  """Entity titles (tf.string, any shape) -> int64 ids of the same shape: 63-bit title
  fingerprints (the ids training gives gold entities; a collision between two of n titles has
  probability ~ n^2 / 2^63)."""
  return tf.strings.to_hash_bucket_fast(titles, (1 << 63) - 1)


def drop_negatives(records: tf.data.Dataset,
                   excluded_ids: Optional[np.ndarray]) -> tf.data.Dataset:
  """Serialized hard negative pair records -> those whose negative entity's id (entity_ids of
  its schema.ENTITY_TITLE) is not in `excluded_ids` (int64 `[n]`, any order); all of them when
  None or empty. Not in the paper: the trainer excludes the entities that are already the gold
  of many training mentions (Trainer.set_hard_negatives, max_negative_golds); measured at full
  KB, this does not remove mining's recall loss (README, "Hard negative mining at full
  scale")."""
  if excluded_ids is None or not len(excluded_ids):  # pylint: disable=g-explicit-length-test
    return records
  excluded = tf.constant(np.unique(np.asarray(excluded_ids, np.int64)), tf.int64)
  last = int(excluded.shape[0]) - 1
  spec = {schema.ENTITY_TITLE: _STRING}

  def kept(record):
    negative = entity_ids(tf.io.parse_single_example(record, spec)[schema.ENTITY_TITLE])
    i = tf.minimum(tf.searchsorted(excluded, negative[tf.newaxis])[0], last)
    return tf.not_equal(excluded[i], negative)

  return records.filter(kept)


def keep_pairs(records: tf.data.Dataset, max_gold_rank: int = -1, described_only: bool = False,
               excluded_negatives: Optional[np.ndarray] = None) -> tf.data.Dataset:
  """Serialized hard negative pair records -> those that every pair filter keeps
  (keep_max_gold_rank, keep_described_negatives, drop_negatives); all of them by default."""
  return drop_negatives(keep_described_negatives(keep_max_gold_rank(records, max_gold_rank),
                                                 described_only), excluded_negatives)


def pairs_have_gold_rank(files: List[str]) -> bool:
  """Whether the first record of hard negative pair `files` has schema.GOLD_RANK (rounds
  mined before it was recorded have none); False when there is no record."""
  for record in tf.data.TFRecordDataset(files).take(1):
    return schema.GOLD_RANK in tf.train.Example.FromString(record.numpy()).features.feature
  return False


def count_link_sources(files: List[str]) -> dict:
  """{link source: records} of mention record files ('' for records without one)."""
  counts: dict = {}
  spec = {schema.LINK_SOURCE: _STRING}
  for batch in tf.data.TFRecordDataset(files).batch(8192):
    values, _, n = tf.unique_with_counts(tf.io.parse_example(batch, spec)[schema.LINK_SOURCE])
    for value, c in zip(values.numpy().tolist(), n.numpy().tolist()):
      name = value.decode("utf-8")
      counts[name] = counts.get(name, 0) + c
  return counts


def mention_dataset(files: List[str], batch_size: int, shuffle_buffer: int = 0,
                    repeat: bool = False, seed: int = 1,
                    drop_remainder: bool = False, shard=(1, 0),
                    link_sources: Sequence[str] = (),
                    max_gold_rank: int = -1,
                    described_only: bool = False,
                    excluded_negatives: Optional[np.ndarray] = None) -> tf.data.Dataset:
  """Batches of mention examples with their gold entity's features.

  Args:
    files: TFRecord shards of mention examples.
    batch_size: examples per batch.
    shuffle_buffer: 0 keeps file order.
    repeat: repeat forever.
    seed: shuffle seed.
    drop_remainder: drop a last partial batch.
    shard: (num_shards, index): read only every num_shards-th file (one input pipeline of
      several workers).
    link_sources: keep only mentions whose link was written there (keep_link_sources); empty:
      all.
    max_gold_rank, described_only, excluded_negatives: hard negative pair records only: the
      filters of keep_pairs (gold rank at most max_gold_rank, < 0: all; negatives with a
      description only; int64 entity ids whose pairs are left out, None: none).

  Returns:
    A dataset of dicts: the 4 mention features and the 4 entity features as tf.string
    `[batch]` (categories and aliases '|'-joined), plus SOURCE_PAGE and MENTION_ID.
  """
  ds = tf.data.Dataset.from_tensor_slices(files)
  if shard[0] > 1:
    ds = ds.shard(*shard)
  if shuffle_buffer:
    ds = ds.shuffle(len(files), seed=seed)
  ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = keep_link_sources(ds, link_sources)
  ds = keep_pairs(ds, max_gold_rank, described_only, excluded_negatives)
  if repeat:
    ds = ds.repeat()
  if shuffle_buffer:
    ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
  ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  ds = ds.map(lambda x: _join_categories(tf.io.parse_example(x, MENTION_SPEC)),
              num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def entity_dataset(files: List[str], batch_size: int) -> tf.data.Dataset:
  """Batches of entity features (tf.string `[batch]` each, categories and aliases
  '|'-joined), file order."""
  ds = tf.data.TFRecordDataset(files).batch(batch_size)
  ds = ds.map(lambda x: _join_categories(tf.io.parse_example(x, ENTITY_SPEC)),
              num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def mention_features(batch):
  return {name: batch[name] for name in schema.MENTION_FEATURES}


def entity_features(batch):
  return {name: batch[name] for name in schema.ENTITY_FEATURES}
