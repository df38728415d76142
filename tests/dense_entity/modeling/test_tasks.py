"""In-batch softmax and logistic tasks against values computed by hand."""

import math

import numpy as np
import tensorflow as tf

from dense_entity.modeling import tasks


def _unit(v):
  v = np.asarray(v, np.float32)
  return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_in_batch_softmax_loss_matches_hand_computation():
  m = _unit([[1, 0], [0, 1]])
  e = _unit([[1, 0], [1, 1]])
  scale = 2.0
  logits = tasks.in_batch_logits(m, e, scale)
  # cosines: row 0: [1, 1/sqrt2]; row 1: [0, 1/sqrt2]
  c = 1 / math.sqrt(2)
  expected_logits = np.array([[2.0, 2 * c], [0.0, 2 * c]], np.float32)
  np.testing.assert_allclose(logits.numpy(), expected_logits, rtol=1e-6)
  loss = tasks.in_batch_softmax_loss(logits, tf.constant([0, 1])).numpy()
  row0 = -math.log(math.exp(2.0) / (math.exp(2.0) + math.exp(2 * c)))
  row1 = -math.log(math.exp(2 * c) / (math.exp(0.0) + math.exp(2 * c)))
  np.testing.assert_allclose(loss, [row0, row1], rtol=1e-5)
  assert float(tasks.in_batch_recall_at_1(logits, tf.constant([0, 1]))) == 1.0


def test_duplicate_entities_are_masked_and_loss_equals_deduplicated_batch():
  # Rows 0 and 2 share 'Ore River': neither may see the other's column as a negative, and for
  # rows 1 and 3 'Ore River' is one negative, not two (bug bank ex-03).
  entities = ["Ore River", "Port Alder", "Ore River", "Birch Cove"]
  mask = tasks.duplicate_entity_mask(tf.constant(entities), tf.constant(entities)).numpy()
  expected = np.zeros((4, 4), bool)
  expected[0, 2] = expected[2, 0] = True  # the gold is no negative of itself
  expected[1, 2] = expected[3, 2] = True  # the second 'Ore River' column
  np.testing.assert_array_equal(mask, expected)

  rng = np.random.default_rng(0)
  m = _unit(rng.normal(size=(4, 3)))
  e = _unit(rng.normal(size=(4, 3)))
  e[2] = e[0]  # same entity, same encoding
  masked = tasks.in_batch_softmax_loss(
      tasks.in_batch_logits(m, e, 5.0, tf.constant(mask)), tf.range(4)).numpy()
  # The de-duplicated batch, built without the mask: each distinct entity once, with its
  # encoding; row i's label is its own entity.
  distinct = list(dict.fromkeys(entities))
  encodings = np.stack([e[entities.index(name)] for name in distinct])
  for row in range(4):
    logits = 5.0 * (m[row] @ encodings.T)
    label = distinct.index(entities[row])
    reference = -(logits[label] - np.log(np.sum(np.exp(logits))))
    np.testing.assert_allclose(masked[row], reference, rtol=1e-5)
  # The values of the bug report: the old mask gave 2.388 and 8.320 for rows 1 and 3.
  np.testing.assert_allclose(masked[[1, 3]], [2.381, 8.007], atol=1e-3)


def test_mask_offsets_own_column_for_replicas():
  rows = tf.constant(["B", "A"])
  cols = tf.constant(["A", "B", "B", "A"])  # global batch; rows are columns 2 and 3
  mask = tasks.duplicate_entity_mask(rows, cols, column_offset=2).numpy()
  # Row 0 (own column 2, 'B'): the other 'B' and the second 'A' are masked; row 1 (own column
  # 3, 'A'): the other 'A' and the second 'B'.
  np.testing.assert_array_equal(mask, [[False, True, False, True], [True, False, True, False]])


def test_logistic_loss_matches_hand_computation():
  m = _unit([[1, 0]])
  e = _unit([[0, 1]])
  loss = tasks.logistic_loss(m, e, tf.constant([0]), 3.0, 0.5).numpy()
  # cos = 0, logit = 0.5, label 0 -> -log(1 - sigmoid(0.5))
  np.testing.assert_allclose(loss, [math.log(1 + math.exp(0.5))], rtol=1e-6)


def test_in_batch_pair_auc_counts_negatives_below_the_positive():
  logits = tf.constant([[3.0, 1.0, 4.0], [2.0, 2.0, 0.0], [0.0, 1.0, 5.0]])
  labels = tf.constant([0, 1, 2])
  # row 0: one of two negatives below; row 1: one tie (1/2) and one below; row 2: both below.
  auc = float(tasks.in_batch_pair_auc(logits, labels))
  np.testing.assert_allclose(auc, (0.5 + 0.75 + 1.0) / 3, rtol=1e-6)
  mask = tf.constant([[False, False, True], [False, False, False], [False, False, False]])
  auc = float(tasks.in_batch_pair_auc(logits, labels, mask))
  np.testing.assert_allclose(auc, (1.0 + 0.75 + 1.0) / 3, rtol=1e-6)
