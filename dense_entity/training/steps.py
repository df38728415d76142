"""Step functions of the dual encoder's training under any tf.distribute strategy.

Gillick et al. (2019), section 4.2: in-batch sampled softmax over the global batch. Under a
multi-replica strategy each replica encodes its share of the batch, entity encodings are
gathered across replicas, and every mention is scored against every entity of the global batch,
so the negatives do not depend on the number of replicas. Section 4.3: with hard negatives, the
logistic task on (mention, entity) pairs is added to the softmax task with equal weight.

`TrainSteps.train_steps` runs n steps; wrapped in one tf.function it is traced once and loops
over the steps inside the graph (tf.range), so a step costs no Python dispatch.
`distributed_dataset` feeds the steps: each step's replicas together hold one global batch, in
order, which is what the labels of `TrainSteps.replica_logits` assume.
"""

from typing import List, Optional, Sequence

import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import config as config_lib
from dense_entity.modeling import models
from dense_entity.modeling import tasks
from dense_entity.training import optimizers


def distributed_dataset(strategy: tf.distribute.Strategy, files: List[str],
                        train_config: config_lib.TrainConfig, repeat: bool, shuffle: bool,
                        global_batch: Optional[int] = None,
                        link_sources: Sequence[str] = (),
                        max_gold_rank: int = -1,
                        described_only: bool = False,
                        excluded_negatives=None) -> tf.distribute.DistributedDataset:
  """Mention (or hard negative pair) records of `files` in global batches across replicas.

  Args:
    strategy: the tf.distribute strategy.
    files: TFRecord shards of mention or pair records.
    train_config: its shuffle_buffer (when `shuffle`), seed and batch_size.
    repeat: repeat the records forever.
    shuffle: shuffle with `train_config.shuffle_buffer` and `train_config.seed`.
    global_batch: records per step over all replicas; None: `train_config.batch_size`.
    link_sources: mention records only: keep those whose link was written there
      (records.keep_link_sources; empty: all).
    max_gold_rank: pair records only: keep those whose gold ranked at most this when mined
      (records.keep_max_gold_rank; < 0: all).
    described_only: pair records only: keep those whose negative has a description
      (records.keep_described_negatives).
    excluded_negatives: pair records only: int64 entity ids whose pairs are left out
      (records.drop_negatives; None: none).

  Returns:
    a distributed dataset of per-replica batches `[global_batch / replicas]` (the last
    incomplete batch dropped).
  """
  global_batch = global_batch or train_config.batch_size

  def dataset_fn(ctx: tf.distribute.InputContext):
    # On one worker the strategy hands consecutive per-replica batches to replicas 0, 1, ...
    # in turn, so each step's replicas together hold one global batch, in order.
    per_replica = ctx.get_per_replica_batch_size(global_batch)
    return records.mention_dataset(files, per_replica,
                                   shuffle_buffer=train_config.shuffle_buffer if shuffle else 0,
                                   repeat=repeat, seed=train_config.seed, drop_remainder=True,
                                   shard=(ctx.num_input_pipelines, ctx.input_pipeline_id),
                                   link_sources=link_sources,
                                   max_gold_rank=max_gold_rank,
                                   described_only=described_only,
                                   excluded_negatives=excluded_negatives)

  return strategy.distribute_datasets_from_function(dataset_fn)


class TrainSteps:
  """The per-replica train and eval steps, and the loop body that runs n train steps.

  Args:
    model: the dual encoder, built under `strategy`'s scope.
    optimizer: its optimizer, built likewise.
    strategy: the tf.distribute strategy the steps run under.
    train_config: `batch_size` (the global batch) is read when a step is traced.
    step: int64 scalar variable, incremented once per train step.

  Attributes:
    pair_batch_size: hard negative pairs per global step (0: none). Read when `train_step` is
      traced: wrap `train_steps` in a new tf.function after changing it.
    pair_weight: weight of the logistic task beside the softmax task (1.0: the paper's equal
      weights, section 4.3). Read when `train_step` is traced, like `pair_batch_size`.
  """

  def __init__(self, model: models.DualEncoder, optimizer: optimizers.LazyOptimizer,
               strategy: tf.distribute.Strategy, train_config: config_lib.TrainConfig,
               step: tf.Variable):
    self.model = model
    self.optimizer = optimizer
    self.strategy = strategy
    self.train_config = train_config
    self.step = step
    self.pair_batch_size = 0
    self.pair_weight = 1.0
    # Optional (table: int64 gold fingerprint -> float32 log q, default log q) of the
    # sampling-bias correction (TrainConfig.logq_correction); set by the Trainer.
    self.log_q = None

  def replica_logits(self, batch, correct: bool = False):
    """Scores this replica's mentions against every entity of the global batch.

    Args:
      batch: this replica's mention records (records.mention_dataset), `[b]` each.
      correct: subtract log q of each column's entity (`log_q`, when set): the softmax task's
        sampling-bias correction (Yi et al., RecSys 2019, eq. 3). Training only; evaluation
        scores as retrieval does.

    Returns:
      (logits `[b, global_batch]`, labels int32 `[b]` (each mention's own column),
      mention encodings `[b, d]`, entity encodings `[b, d]`, mask bool `[b, global_batch]`
      (True where a column holds the mention's gold entity but is not its own column)).
    """
    ctx = tf.distribute.get_replica_context()
    mentions = self.model.mention_encoder(records.mention_features(batch))
    entities = self.model.entity_encoder(records.entity_features(batch))
    # Collectives do not carry strings: entity ids travel as 63-bit fingerprints (only used to
    # mask duplicates; a collision between two titles has probability ~ batch^2 / 2^63).
    gold = self.gold_fingerprints(batch[schema.ENTITY_TITLE])
    all_entities = ctx.all_gather(entities, axis=0)
    all_gold = ctx.all_gather(gold, axis=0)
    offset = ctx.replica_id_in_sync_group * tf.shape(gold)[0]
    mask = tasks.duplicate_entity_mask(gold, all_gold, offset)
    logits = tasks.in_batch_logits(mentions, all_entities, self.model.scale, mask)
    if correct and self.log_q is not None:
      logits -= self.log_q.lookup(all_gold)[tf.newaxis, :]
    labels = tf.range(tf.shape(gold)[0]) + offset
    return logits, labels, mentions, entities, mask

  @staticmethod
  def gold_fingerprints(titles: tf.Tensor) -> tf.Tensor:
    """The int64 ids replica_logits gives gold entities (records.entity_ids)."""
    return records.entity_ids(titles)

  def train_step(self, batch, pairs=None):
    """One step of the softmax task, plus the logistic task when hard negative `pairs` are
    given (paper section 4.3: equal weights, or `pair_weight`; the batch's own pairs are the
    positives, and the logistic loss is the mean over the global batch's positive and negative
    pairs).

    Returns:
      (this replica's share of the loss (sum over replicas: the loss), its in-batch
      recall@1), float32 scalars.
    """
    global_batch = self.train_config.batch_size
    with tf.GradientTape() as tape:
      logits, labels, mentions, entities, _ = self.replica_logits(batch, correct=True)
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
        loss += self.pair_weight * ((tf.reduce_sum(positive) + tf.reduce_sum(negative))
                                    / (global_batch + self.pair_batch_size))
    variables = self.model.trainable_variables
    grads = tape.gradient(loss, variables)
    self.optimizer.apply_gradients(zip(grads, variables))
    recall = tasks.in_batch_recall_at_1(logits, labels)
    return loss, recall

  def eval_step(self, batch):
    """In-batch recall@1 and pair AUC of this replica's mentions, float32 scalars."""
    logits, labels, _, _, mask = self.replica_logits(batch)
    return (tasks.in_batch_recall_at_1(logits, labels),
            tasks.in_batch_pair_auc(logits, labels, mask))

  def train_steps(self, iterator, n, pair_iterator=None):
    """Runs `n` steps (a scalar tensor) in one tf.function call; returns the last step's loss
    (summed over replicas) and recall (mean over replicas)."""
    loss = recall = tf.constant(0.0)
    for _ in tf.range(n):
      args = (next(iterator),) if pair_iterator is None else (next(iterator),
                                                              next(pair_iterator))
      per_loss, per_recall = self.strategy.run(self.train_step, args=args)
      loss = self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_loss, None)
      recall = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_recall, None)
      self.step.assign_add(1)
    return loss, recall
