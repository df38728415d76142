"""Training loop of the dual encoder under any tf.distribute strategy.

Gillick et al. (2019), section 4.2: in-batch sampled softmax over the global batch. Under a
multi-replica strategy each replica encodes its share of the batch, entity encodings are
gathered across replicas, and every mention is scored against every entity of the global batch,
so the negatives do not depend on the number of replicas.

State (model, optimizer, step) is checkpointed to `model_dir/checkpoints` every `eval_every`
steps and at the end; a new run with the same model_dir resumes from the latest checkpoint.
"""

import gzip
import logging
import math
import os
import time
from typing import Callable, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.modeling import config as config_lib
from dense_entity.kb import records
from dense_entity.modeling import models
from dense_entity.training import optimizers
from dense_entity.kb import schema
from dense_entity.modeling import tasks

VOCAB_FILE = "vocab.txt"
CHECKPOINT_DIR = "checkpoints"


def read_glove(path: str, max_words: int = 0) -> Tuple[List[str], np.ndarray]:
  """Reads a GloVe text file (`word v1 ... vd` per line, plain or .gz).

  Args:
    path: the file.
    max_words: keep the first `max_words` words (GloVe files are sorted by frequency); 0: all.

  Returns:
    (words, vectors float32 `[words, d]`); repeated words keep their first vector.

  Raises:
    ValueError: naming the file and line when a line has the wrong number of values.
  """
  opener = gzip.open if path.endswith(".gz") else open
  words, vectors, seen, dim = [], [], set(), None
  with opener(path, "rt", encoding="utf-8") as f:
    for line_no, line in enumerate(f, 1):
      parts = line.rstrip("\n").rstrip().split(" ")
      if dim is None:
        dim = len(parts) - 1
      if len(parts) - 1 != dim or dim < 1:
        raise ValueError(f"{path}:{line_no}: expected a word and {dim} values, "
                         f"got {len(parts)} fields")
      if parts[0] in seen or not parts[0]:
        continue
      seen.add(parts[0])
      words.append(parts[0])
      vectors.append(np.asarray(parts[1:], dtype=np.float32))
      if max_words and len(words) >= max_words:
        break
  if not words:
    raise ValueError(f"{path}: no vectors")
  return words, np.stack(vectors)


def read_vocabulary(model_dir: str) -> List[str]:
  path = os.path.join(model_dir, VOCAB_FILE)
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path) as f:
    return [w for w in f.read().split("\n") if w]


def _write_vocabulary(model_dir: str, words: List[str]):
  path = os.path.join(model_dir, VOCAB_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write("".join(w + "\n" for w in words))
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def make_optimizer(train_config: config_lib.TrainConfig) -> optimizers.LazyOptimizer:
  return optimizers.LazyOptimizer(train_config.optimizer, train_config.learning_rate,
                                  momentum=train_config.momentum)


def document_frequencies(text_featurizer, entity_files: List[str],
                         batch_size: int = 1024) -> Tuple[np.ndarray, int]:
  """Counts, for each unigram row of the shared table, the entities whose text holds it.

  Args:
    text_featurizer: the model's featurizer.TextFeaturizer (row ids as the model sees them).
    entity_files: entity TFRecord shards (extraction output).
    batch_size: entities featurized per batch.

  Returns:
    (df int64 `[num_rows]`, number of entities counted). An entity's text is its title and
    first paragraph, as the entity tower's lexical channel reads it (models.EntityEncoder).
  """
  rows = text_featurizer.num_rows
  df = np.zeros(rows, np.int64)
  num_texts = 0
  for batch in records.entity_dataset(entity_files, batch_size):
    texts = tf.strings.join([batch[schema.ENTITY_TITLE], batch[schema.ENTITY_TEXT]], " ")
    ids = text_featurizer(texts)[0]
    num_texts += int(tf.math.count_nonzero(ids.row_lengths()))
    # One count per (entity, row) pair, however often the word occurs in the text.
    pairs = np.unique(ids.value_rowids().numpy() * rows + ids.flat_values.numpy())
    df += np.bincount(pairs % rows, minlength=rows)
  return df, num_texts


def restore_model(model_dir: str) -> Tuple[models.DualEncoder, config_lib.ExperimentConfig]:
  """Rebuilds the dual encoder of `model_dir` and restores its latest checkpoint.

  Raises:
    FileNotFoundError: when `model_dir` has no config or no checkpoint.
  """
  cfg = config_lib.load(model_dir)
  model = models.DualEncoder(cfg.model, read_vocabulary(model_dir))
  latest = tf.train.latest_checkpoint(os.path.join(model_dir, CHECKPOINT_DIR))
  if latest is None:
    raise FileNotFoundError(f"no checkpoint in {os.path.join(model_dir, CHECKPOINT_DIR)}")
  # Optimizer slots are in the checkpoint too; every model variable must be restored.
  _restore_all(tf.train.Checkpoint(model=model).read(latest).expect_partial(), latest)
  return model, cfg


def _restore_all(status, path: str) -> None:
  """Raises ValueError naming `path` when the checkpoint lacks variables the program has."""
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(
        f"checkpoint {path} does not hold every variable of this model (written by another "
        f"version of the program or another config?); train into a new model_dir. {e}") from e


class Trainer:
  """Builds the model under `strategy`, restores the latest checkpoint, and trains.

  Args:
    cfg: the experiment config (written to model_dir/config.json on the first run; a resumed
      run uses the one in model_dir).
    extract_dir: a finished extraction (MANIFEST.json present).
    model_dir: checkpoints, config.json, vocab.txt and TensorBoard summaries.
    strategy: a tf.distribute strategy (distribute_utils.get_strategy).
  """

  def __init__(self, cfg: config_lib.ExperimentConfig, extract_dir: str, model_dir: str,
               strategy: Optional[tf.distribute.Strategy] = None):
    self.strategy = strategy or tf.distribute.get_strategy()
    self.extract_dir = extract_dir
    self.model_dir = model_dir
    # Check the input before writing anything into model_dir.
    manifest = records.require_extraction(extract_dir)
    num_train = manifest.get("counts", {}).get("mentions_train")
    if num_train is not None and num_train < cfg.train.batch_size:
      raise ValueError(
          f"{os.path.join(extract_dir, schema.MANIFEST_FILE)}: {num_train} training mentions, "
          f"fewer than one batch of {cfg.train.batch_size} (pages skipped by the extraction: "
          f"{manifest.get('pages_skipped', 0)}); nothing to train on")
    tf.io.gfile.makedirs(model_dir)
    if tf.io.gfile.exists(os.path.join(model_dir, config_lib.CONFIG_FILE)):
      cfg = config_lib.load(model_dir)
      vocabulary, vectors = read_vocabulary(model_dir), None
    else:
      vocabulary, vectors = [], None
      if cfg.glove_path:
        vocabulary, vectors = read_glove(cfg.glove_path, cfg.vocab_size)
      _write_vocabulary(model_dir, vocabulary)
      config_lib.save(cfg, model_dir)
    self.cfg = cfg
    tc = cfg.train
    if tc.batch_size % self.strategy.num_replicas_in_sync:
      raise ValueError(f"batch_size {tc.batch_size} is not divisible by the "
                       f"{self.strategy.num_replicas_in_sync} replicas")
    tf.keras.utils.set_random_seed(tc.seed)
    with self.strategy.scope():
      self.model = models.DualEncoder(cfg.model, vocabulary, vectors)
      self.optimizer = make_optimizer(tc)
      self.step = tf.Variable(0, dtype=tf.int64, name="step", trainable=False)
      # The last mining round whose negatives training uses (0: in-batch negatives only).
      self.mining_round = tf.Variable(0, dtype=tf.int64, name="mining_round",
                                      trainable=False)
      self.optimizer.build(self.model.trainable_variables)
    self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                          step=self.step, mining_round=self.mining_round)
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, os.path.join(model_dir, CHECKPOINT_DIR), max_to_keep=3)
    if self.manager.latest_checkpoint:
      _restore_all(self.checkpoint.restore(self.manager.latest_checkpoint),
                   self.manager.latest_checkpoint)
      logging.info("resumed from %s at step %d", self.manager.latest_checkpoint,
                   int(self.step.numpy()))
    elif self.model.context_match is not None:
      # IDF weights of the lexical channel come from the KB's entity texts, once; the
      # checkpoint keeps them, so a resumed run and the export use the same weights.
      df, n = document_frequencies(self.model.text_featurizer,
                                   records.record_files(extract_dir, schema.ENTITIES_PREFIX))
      self.model.context_match.set_document_frequencies(df, n)
      logging.info("context match: IDF from %d entity texts, %d weighted rows", n,
                   int(np.count_nonzero(df)))
    self.train_files = records.record_files(extract_dir, schema.TRAIN_MENTIONS_PREFIX)
    heldout = tf.io.gfile.glob(os.path.join(extract_dir, schema.HELDOUT_MENTIONS_PREFIX + "-*"))
    self.heldout_files = sorted(heldout)
    self.writer = tf.summary.create_file_writer(os.path.join(model_dir, "summaries"))
    self._train_fn = self._eval_fn = None
    self.negative_files: List[str] = []
    self.pair_batch_size = 0
    self._num_train_mentions = num_train
    self.last_heldout_auc = float("nan")

  # --- one step on one replica -------------------------------------------------------------
  def _replica_logits(self, batch):
    ctx = tf.distribute.get_replica_context()
    mentions = self.model.mention_encoder(records.mention_features(batch))
    entities = self.model.entity_encoder(records.entity_features(batch))
    # Collectives do not carry strings: entity ids travel as 63-bit fingerprints (only used to
    # mask duplicates; a collision between two titles has probability ~ batch^2 / 2^63).
    gold = tf.strings.to_hash_bucket_fast(batch[schema.ENTITY_TITLE], (1 << 63) - 1)
    all_entities = ctx.all_gather(entities, axis=0)
    all_gold = ctx.all_gather(gold, axis=0)
    offset = ctx.replica_id_in_sync_group * tf.shape(gold)[0]
    mask = tasks.duplicate_entity_mask(gold, all_gold, offset)
    logits = tasks.in_batch_logits(mentions, all_entities, self.model.scale, mask)
    labels = tf.range(tf.shape(gold)[0]) + offset
    return logits, labels, mentions, entities, mask

  def _train_step(self, batch, pairs=None):
    """One step of the softmax task, plus the logistic task when hard negative `pairs` are
    given (paper section 4.3: equal weights; the batch's own pairs are the positives, and the
    logistic loss is the mean over the global batch's positive and negative pairs)."""
    global_batch = self.cfg.train.batch_size
    with tf.GradientTape() as tape:
      logits, labels, mentions, entities, _ = self._replica_logits(batch)
      loss = tf.reduce_sum(tasks.in_batch_softmax_loss(logits, labels)) / global_batch
      if pairs is not None:
        m = self.model
        positive = tasks.logistic_loss(mentions, entities, tf.ones_like(labels),
                                       m.hard_negative_scale, m.hard_negative_bias)
        negative = tasks.logistic_loss(
            m.mention_encoder(records.mention_features(pairs)),
            m.entity_encoder(records.entity_features(pairs)),
            tf.zeros(tf.shape(pairs[schema.ENTITY_TITLE]), tf.int32),
            m.hard_negative_scale, m.hard_negative_bias)
        loss += ((tf.reduce_sum(positive) + tf.reduce_sum(negative))
                 / (global_batch + self.pair_batch_size))
    variables = self.model.trainable_variables
    grads = tape.gradient(loss, variables)
    self.optimizer.apply_gradients(zip(grads, variables))
    recall = tasks.in_batch_recall_at_1(logits, labels)
    return loss, recall

  def _eval_step(self, batch):
    logits, labels, _, _, mask = self._replica_logits(batch)
    return (tasks.in_batch_recall_at_1(logits, labels),
            tasks.in_batch_pair_auc(logits, labels, mask))

  # --- loops -------------------------------------------------------------------------------
  def _train_steps(self, iterator, n, pair_iterator=None):
    """Runs `n` steps in one tf.function call; returns the last step's loss and recall."""
    loss = recall = tf.constant(0.0)
    for _ in tf.range(n):
      args = (next(iterator),) if pair_iterator is None else (next(iterator),
                                                              next(pair_iterator))
      per_loss, per_recall = self.strategy.run(self._train_step, args=args)
      loss = self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_loss, None)
      recall = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_recall, None)
      self.step.assign_add(1)
    return loss, recall

  def _dataset(self, files, repeat, shuffle, global_batch=None):
    tc = self.cfg.train
    global_batch = global_batch or tc.batch_size

    def dataset_fn(ctx: tf.distribute.InputContext):
      # On one worker the strategy hands consecutive per-replica batches to replicas 0, 1, ...
      # in turn, so each step's replicas together hold one global batch, in order.
      per_replica = ctx.get_per_replica_batch_size(global_batch)
      return records.mention_dataset(files, per_replica,
                                  shuffle_buffer=tc.shuffle_buffer if shuffle else 0,
                                  repeat=repeat, seed=tc.seed, drop_remainder=True,
                                  shard=(ctx.num_input_pipelines, ctx.input_pipeline_id))

    return self.strategy.distribute_datasets_from_function(dataset_fn)

  def evaluate(self) -> float:
    """Held-out in-batch recall@1 over the first `eval_batches` held-out batches, always the
    same ones (nan when there are no held-out files or fewer mentions than one batch)."""
    if not self.heldout_files:
      return float("nan")
    if self._eval_fn is None:
      self._eval_fn = tf.function(lambda b: self.strategy.run(self._eval_step, args=(b,)))
      self._eval_dataset = self._dataset(self.heldout_files, repeat=False, shuffle=False)
    recalls, aucs = [], []
    for batch in self._eval_dataset:
      if len(recalls) >= self.cfg.train.eval_batches:
        break
      recall, auc = self._eval_fn(batch)
      recalls.append(float(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, recall, None)))
      aucs.append(float(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, auc, None)))
    self.last_heldout_auc = float(np.mean(aucs)) if aucs else float("nan")
    return float(np.mean(recalls)) if recalls else float("nan")

  @property
  def num_train_mentions(self) -> int:
    """Training mentions: the extraction MANIFEST's count, else counted once, when first
    asked (only hard negative training needs it)."""
    if self._num_train_mentions is None:
      self._num_train_mentions = sum(
          1 for f in self.train_files for _ in tf.data.TFRecordDataset(f))
    return self._num_train_mentions

  def set_hard_negatives(self, files: List[str], mining_round: int,
                         num_pairs: Optional[int] = None):
    """Trains from now on with the logistic task on these hard negative pair files.

    Pairs are drawn at the rate of the training mentions they were mined from: with P pairs
    for M training mentions, each step takes about batch_size * P / M of them (at least one per
    replica, at most batch_size), so one pass over the mentions is about one pass over the
    pairs. A fixed full batch of pairs per step would show each of a few hundred pairs hundreds
    of times per epoch and overfit them.

    Args:
      files: TFRecord shards of pair records (beam_pipelines.mine_hard_negatives output).
      mining_round: the round that mined them (>= the checkpoint's round).
      num_pairs: pairs in `files`; counted when None.

    Raises:
      ValueError: when `mining_round` is older than the round the checkpoint was trained on.
    """
    if mining_round < int(self.mining_round.numpy()):
      raise ValueError(
          f"hard negatives of mining round {mining_round} given, but the checkpoint in "
          f"{self.model_dir} is already trained on round {int(self.mining_round.numpy())}")
    self.negative_files = sorted(files)
    if num_pairs is None:
      num_pairs = sum(1 for f in self.negative_files for _ in tf.data.TFRecordDataset(f))
    tc = self.cfg.train
    replicas = self.strategy.num_replicas_in_sync
    per_step = math.ceil(tc.batch_size * num_pairs / max(self.num_train_mentions, 1))
    per_step = min(max(per_step, 1), tc.batch_size)
    self.pair_batch_size = math.ceil(per_step / replicas) * replicas
    self.mining_round.assign(mining_round)
    self._train_fn = None

  def train(self, progress: Optional[Callable[[int, dict], None]] = None) -> dict:
    """Trains until `train_steps`; returns the last metrics (loss, recalls, examples/s)."""
    tc = self.cfg.train
    start = int(self.step.numpy())
    metrics = {"step": start}
    if start >= tc.train_steps:
      metrics["heldout_in_batch_recall@1"] = self.evaluate()
      return metrics

    if self._train_fn is None:
      self._train_fn = tf.function(self._train_steps)
      self._train_iterator = iter(self._dataset(self.train_files, repeat=True, shuffle=True))
      self._pair_iterator = None
      if self.negative_files:
        self._pair_iterator = iter(self._dataset(self.negative_files, repeat=True,
                                                 shuffle=True,
                                                 global_batch=self.pair_batch_size))
    pair_iterator = self._pair_iterator
    iterator = self._train_iterator
    chunk = min(50, tc.eval_every)
    step = start
    t0, examples = time.time(), 0
    while step < tc.train_steps:
      n = min(chunk, tc.train_steps - step, tc.eval_every - step % tc.eval_every)
      loss, recall = self._train_fn(iterator, tf.constant(n), pair_iterator)
      step = int(self.step.numpy())
      examples += n * tc.batch_size
      metrics = {"step": step, "loss": float(loss), "train_in_batch_recall@1": float(recall),
                 "examples_per_second": examples / max(time.time() - t0, 1e-9),
                 "scale": float(self.model.scale.numpy())}
      with self.writer.as_default(step=step):
        tf.summary.scalar("loss", metrics["loss"])
        tf.summary.scalar("train_in_batch_recall_at_1", metrics["train_in_batch_recall@1"])
        tf.summary.scalar("scale", metrics["scale"])
      if step % tc.eval_every == 0 or step >= tc.train_steps:
        metrics["heldout_in_batch_recall@1"] = self.evaluate()
        metrics["heldout_in_batch_auc"] = self.last_heldout_auc
        metrics["mining_round"] = int(self.mining_round.numpy())
        with self.writer.as_default(step=step):
          tf.summary.scalar("heldout_in_batch_recall_at_1",
                            metrics["heldout_in_batch_recall@1"])
          tf.summary.scalar("heldout_in_batch_auc", metrics["heldout_in_batch_auc"])
        self.manager.save(checkpoint_number=step)
        logging.info("step %d %s", step, metrics)
      if progress:
        progress(n, metrics)
    self.writer.flush()
    return metrics
