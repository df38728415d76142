"""Layers round-trip their configs; checkpoints restore every variable; optimizers are exact."""

import keras
import numpy as np
import tensorflow as tf

from dense_entity import config
from dense_entity import featurizer
from dense_entity import layers
from dense_entity import models
from dense_entity import optimizers
from dense_entity import schema
from tests import testutil


def _mention_batch():
  return {n: tf.constant([row[i] for row in testutil.MENTIONS])
          for i, n in enumerate(schema.MENTION_FEATURES)}


def _entity_batch():
  return {schema.ENTITY_TITLE: tf.constant([r[4] for r in testutil.MENTIONS]),
          schema.ENTITY_TEXT: tf.constant([r[5] for r in testutil.MENTIONS]),
          schema.ENTITY_CATEGORIES: tf.constant(["|".join(r[6]) for r in testutil.MENTIONS])}


def test_layer_configs_round_trip():
  for layer in (featurizer.TextFeaturizer(100, ["a", "b"]), featurizer.CategoryFeaturizer(7),
                layers.SharedEmbedding(10, 4), layers.BagOfCategoriesEncoder(7, 3, 5),
                layers.CompoundEncoder(6, 2)):
    config_ = layer.get_config()
    clone = type(layer).from_config(config_)
    assert clone.get_config() == config_
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert restored.get_config() == config_


def test_ragged_mean_embedding_averages_and_gives_zero_for_empty_rows():
  table = tf.Variable([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]])
  ids = tf.ragged.constant([[0, 1], [], [2, 2, 1]], dtype=tf.int64)
  out = layers.ragged_mean_embedding(table, ids).numpy()
  np.testing.assert_allclose(out, [[2.0, 1.0], [0.0, 0.0], [13 / 3, 10 / 3]], rtol=1e-6)


def test_checkpoint_restores_every_variable_of_both_towers(tmp_path):
  cfg = config.get_preset("tiny").model
  tf.keras.utils.set_random_seed(1)
  model = models.DualEncoder(cfg)
  path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
  saved = {v.path if hasattr(v, "path") else v.name for v in model.trainable_variables}
  assert len(saved) == len(model.trainable_variables)
  tf.keras.utils.set_random_seed(2)
  other = models.DualEncoder(cfg)
  tf.train.Checkpoint(model=other).read(path).assert_existing_objects_matched()
  np.testing.assert_allclose(model.mention_encoder(_mention_batch()).numpy(),
                             other.mention_encoder(_mention_batch()).numpy(), atol=1e-6)
  np.testing.assert_allclose(model.entity_encoder(_entity_batch()).numpy(),
                             other.entity_encoder(_entity_batch()).numpy(), atol=1e-6)
  ckpt_vars = tf.train.list_variables(path)
  # Every trainable variable is in the checkpoint (plus the save counter).
  assert len(ckpt_vars) == len(model.trainable_variables) + 1


def test_encodings_are_unit_norm_and_glove_rows_initialise_vocabulary():
  vocab = ["ore", "river"]
  vectors = np.array([[1, 0, 0], [0, 2, 0]], np.float32)
  model = models.DualEncoder(config.get_preset("tiny").model, vocab, vectors)
  table = model.embedding.embeddings.numpy()
  # Rows keep the GloVe direction in their first 3 columns.
  np.testing.assert_allclose(table[0, 1:3], [0, 0], atol=1e-6)
  assert table[0, 0] > 0 and table[1, 1] > 0
  norms = np.linalg.norm(model.mention_encoder(_mention_batch()).numpy(), axis=-1)
  np.testing.assert_allclose(norms, 1.0, rtol=1e-5)


def test_lazy_momentum_sgd_updates_only_touched_rows():
  table = tf.Variable(np.ones((4, 2), np.float32))
  dense = tf.Variable([1.0, 2.0])
  opt = optimizers.LazyOptimizer("sgd", learning_rate=0.1, momentum=0.9)
  opt.build([table, dense])
  grad = tf.IndexedSlices(tf.constant([[1.0, 1.0], [2.0, 0.0]]), tf.constant([1, 1]))
  opt.apply_gradients([(grad, table), (tf.constant([1.0, -1.0]), dense)])
  # Row 1's gradients sum to [3, 1]; momentum starts at 0: row -= 0.1 * [3, 1].
  np.testing.assert_allclose(table.numpy(), [[1, 1], [0.7, 0.9], [1, 1], [1, 1]], rtol=1e-6)
  np.testing.assert_allclose(dense.numpy(), [0.9, 2.1], rtol=1e-6)
  grad = tf.IndexedSlices(tf.constant([[1.0, 0.0]]), tf.constant([2]))
  opt.apply_gradients([(grad, table), (tf.constant([1.0, -1.0]), dense)])
  # Row 1 untouched (lazy); dense momentum: accum = 0.9 * 1 + 1 = 1.9.
  np.testing.assert_allclose(table.numpy()[1], [0.7, 0.9], rtol=1e-6)
  np.testing.assert_allclose(table.numpy()[2], [0.9, 1.0], rtol=1e-6)
  np.testing.assert_allclose(dense.numpy(), [0.9 - 0.19, 2.1 + 0.19], rtol=1e-6)


def test_lazy_adam_matches_dense_adam_on_touched_rows():
  table = tf.Variable(np.zeros((3, 1), np.float32))
  opt = optimizers.LazyOptimizer("adam", learning_rate=0.01)
  opt.build([table])
  opt.apply_gradients([(tf.IndexedSlices(tf.constant([[2.0]]), tf.constant([0])), table)])
  # First Adam step moves by lr * g / (|g| + eps) = 0.01 (bias-corrected).
  np.testing.assert_allclose(table.numpy()[:, 0], [-0.01, 0, 0], atol=1e-6)
