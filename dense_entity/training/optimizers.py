"""Optimizers with lazy (sparse) updates of embedding rows, under any tf.distribute strategy.

The shared embedding table has millions of rows (paper: 5M buckets x 300) and a batch touches a
few thousand. Keras optimizers turn the sparse gradient of such a table into a dense one and
update every row every step; these update only the rows in the batch (as TF1's sparse
`MomentumOptimizer` and `LazyAdam` did), so a step costs O(rows touched), not O(table).
Dense variables get the usual dense update.

- 'sgd': momentum SGD (paper, section 4.2: momentum 0.9, learning rate 0.01);
- 'adam': Adam (Kingma & Ba 2015) with lazy moment updates for sparse rows.

Gradients are summed across replicas (the loss is already divided by the global batch) and the
same update is applied on every replica's copy.
"""

from typing import List

import keras
import tensorflow as tf

from dense_entity.modeling import config as config_lib


def _tf_variable(v):
  """The tf.Variable behind a Keras 3 variable (or `v` itself)."""
  return v.value if isinstance(v, keras.Variable) else v


class LazyOptimizer(tf.Module):
  """Momentum SGD or Adam with row-sparse updates for IndexedSlices gradients.

  Args:
    kind: 'sgd' or 'adam'.
    learning_rate: step size.
    momentum: momentum of 'sgd'.
    beta_1, beta_2, epsilon: Adam's constants.

  Create it, and call `build(variables)`, inside the strategy scope; call `apply_gradients`
  inside `strategy.run` (or outside any strategy).
  """

  def __init__(self, kind: str = "sgd", learning_rate: float = 0.01, momentum: float = 0.9,
               beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7):
    super().__init__(name="lazy_optimizer")
    if kind not in ("sgd", "adam"):
      raise ValueError(f"unknown optimizer {kind!r}; use 'sgd' or 'adam'")
    self.kind = kind
    self.learning_rate = learning_rate
    self.momentum = momentum
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.slots: List[List[tf.Variable]] = []
    self._index = {}

  def build(self, variables):
    """Creates the slot variables of `variables` (zeros, one or two per variable)."""
    names = ("momentum",) if self.kind == "sgd" else ("m", "v")
    for i, var in enumerate(variables):
      tv = _tf_variable(var)
      self._index[id(tv)] = i
      self.slots.append([tf.Variable(tf.zeros(tv.shape, tv.dtype), trainable=False,
                                     name=f"{n}_{i}") for n in names])

  def apply_gradients(self, grads_and_vars):
    """Applies one update. Variables with a None gradient are left as they are."""
    pairs = [(g, _tf_variable(v)) for g, v in grads_and_vars if g is not None]
    if tf.distribute.in_cross_replica_context():
      return self._distributed_apply(tf.distribute.get_strategy(), pairs)
    return tf.distribute.get_replica_context().merge_call(self._distributed_apply,
                                                          args=(pairs,))

  def _distributed_apply(self, strategy, pairs):
    reduced = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM, pairs)
    self.iterations.assign_add(1)
    step = tf.cast(self.iterations, tf.float32)
    for grad, (_, var) in zip(reduced, pairs):
      slots = self.slots[self._index[id(var)]]
      strategy.extended.update(var, self._update, args=(grad, step, *slots), group=False)

  def _update(self, var, grad, step, *slots):
    lr = tf.cast(self.learning_rate, var.dtype)
    if self.kind == "adam":
      b1, b2 = self.beta_1, self.beta_2
      lr = lr * tf.sqrt(1.0 - tf.pow(b2, step)) / (1.0 - tf.pow(b1, step))
    if isinstance(grad, tf.IndexedSlices):
      # Sum the gradients of repeated rows, then update those rows only.
      rows, positions = tf.unique(grad.indices)
      values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(rows)[0])
      if self.kind == "sgd":
        (accum,) = slots
        new = self.momentum * tf.gather(accum, rows) + values
        accum.scatter_update(tf.IndexedSlices(new, rows))
        var.scatter_sub(tf.IndexedSlices(lr * new, rows))
      else:
        m, v = slots
        new_m = b1 * tf.gather(m, rows) + (1.0 - b1) * values
        new_v = b2 * tf.gather(v, rows) + (1.0 - b2) * tf.square(values)
        m.scatter_update(tf.IndexedSlices(new_m, rows))
        v.scatter_update(tf.IndexedSlices(new_v, rows))
        var.scatter_sub(tf.IndexedSlices(lr * new_m / (tf.sqrt(new_v) + self.epsilon), rows))
      return var
    if self.kind == "sgd":
      (accum,) = slots
      accum.assign(self.momentum * accum + grad)
      return var.assign_sub(lr * accum)
    m, v = slots
    m.assign(b1 * m + (1.0 - b1) * grad)
    v.assign(b2 * v + (1.0 - b2) * tf.square(grad))
    return var.assign_sub(lr * m / (tf.sqrt(v) + self.epsilon))


def make_optimizer(train_config: config_lib.TrainConfig) -> LazyOptimizer:
  """The optimizer `train_config` names ('sgd' or 'adam'), with its learning rate and momentum.

  Create it inside the strategy scope. Raises ValueError for an unknown optimizer name.
  """
  return LazyOptimizer(train_config.optimizer, train_config.learning_rate,
                       momentum=train_config.momentum)
