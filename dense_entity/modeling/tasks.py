"""Training tasks: in-batch sampled softmax and the logistic hard-negative task.

Gillick et al. (2019):
- section 4.2: for a batch of B (mention, entity) pairs, the B x B matrix of cosines times a
  learned scalar `a` is read as logits; row i's label is column i (its own entity), and the
  other entities of the batch are the negatives;
- section 4.3: hard negative pairs are scored with g(a_h * cos + b_h), g the logistic function,
  trained with the softmax task at equal weights.
Two mentions of the same entity in one batch would make each other's gold a negative, and an
entity drawn twice would count twice as a negative of every other row; those logits are masked
so each row scores against each distinct entity once (the entity id is used only here, never
as a feature).
"""

import tensorflow as tf

_MASKED_LOGIT = -1e9


def duplicate_entity_mask(row_entities: tf.Tensor, column_entities: tf.Tensor,
                          column_offset=0) -> tf.Tensor:
  """True where column j must not count for row i: each distinct entity once per row.

  Row i keeps its own column; every other column holding row i's gold entity is masked (the
  gold is no negative of itself), and of the other entities each keeps only its first column
  in the batch (an entity drawn twice is one negative, not two).

  Args:
    row_entities: `[batch]` gold entity ids of the rows (strings, or int fingerprints).
    column_entities: `[num_columns]` entity ids of the columns, same dtype (the global batch
      under a distribution strategy).
    column_offset: index of row 0's own column (replica_id * per-replica batch).

  Returns:
    bool `[batch, num_columns]`.
  """
  same = tf.equal(row_entities[:, None], column_entities[None, :])
  batch = tf.shape(row_entities)[0]
  num_columns = tf.shape(column_entities)[0]
  own = tf.one_hot(tf.range(batch) + column_offset, num_columns,
                   on_value=True, off_value=False, dtype=tf.bool)
  # Column j repeats an earlier column's entity.
  equal_columns = tf.equal(column_entities[:, None], column_entities[None, :])
  earlier = tf.range(num_columns)[None, :] < tf.range(num_columns)[:, None]
  repeated = tf.reduce_any(tf.logical_and(equal_columns, earlier), axis=1)
  return tf.logical_and(tf.logical_or(same, repeated[None, :]), tf.logical_not(own))


def in_batch_logits(mention_encodings, entity_encodings, scale, mask=None):
  """Returns `scale * cos` logits `[batch, num_columns]`, masked entries set to -1e9.

  Args:
    mention_encodings: float32 `[batch, d]`, L2-normalised.
    entity_encodings: float32 `[num_columns, d]`, L2-normalised.
    scale: scalar, the learned `a`.
    mask: optional bool `[batch, num_columns]`, True for logits to drop.
  """
  logits = scale * tf.matmul(mention_encodings, entity_encodings, transpose_b=True)
  if mask is not None:
    logits = tf.where(mask, tf.cast(_MASKED_LOGIT, logits.dtype), logits)
  return logits


def in_batch_softmax_loss(logits, labels):
  """Per-example softmax cross entropy `[batch]` of `logits` against column ids `labels`."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def in_batch_recall_at_1(logits, labels):
  """Fraction of rows whose highest logit is their own column (in-batch recall@1)."""
  hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(labels, tf.int32))
  return tf.reduce_mean(tf.cast(hits, tf.float32))


def logistic_loss(mention_encodings, entity_encodings, labels, scale, bias):
  """Per-pair logistic loss `[pairs]` of g(a_h * cos(m, e) + b_h) against 0/1 `labels`."""
  cos = tf.reduce_sum(mention_encodings * entity_encodings, axis=-1)
  return tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=scale * cos + bias)


def in_batch_pair_auc(logits, labels, mask=None):
  """Mean over rows of the fraction of in-batch negatives scored below the row's own entity.

  The ROC AUC of (mention, entity) pairs of a batch, averaged per mention: each row's own
  column is the positive pair, its other (unmasked) columns the negatives; ties count 1/2.
  Any increasing scoring function (cosine, or the logistic task's g(a_h * cos + b_h) with
  a_h > 0) gives the same value. Returns a float32 scalar.
  """
  positive = tf.gather(logits, labels, axis=1, batch_dims=1)[:, None]
  negatives = tf.logical_not(tf.one_hot(labels, tf.shape(logits)[1], on_value=True,
                                        off_value=False, dtype=tf.bool))
  if mask is not None:
    negatives = tf.logical_and(negatives, tf.logical_not(mask))
  wins = tf.cast(logits < positive, tf.float32) + 0.5 * tf.cast(tf.equal(logits, positive),
                                                                tf.float32)
  negatives = tf.cast(negatives, tf.float32)
  per_row = tf.reduce_sum(wins * negatives, 1) / tf.maximum(tf.reduce_sum(negatives, 1), 1.0)
  return tf.reduce_mean(per_row)
