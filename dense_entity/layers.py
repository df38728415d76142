"""Encoder layers of the dual encoder (Gillick et al. 2019, section 4.1).

- `BagOfNgramsEncoder`: one text feature -> averaged unigram embeddings and averaged bigram
  embeddings from the shared table, concatenated, then a feed-forward layer.
- `BagOfCategoriesEncoder`: category ids -> averaged category embeddings, then feed-forward.
- `CompoundEncoder`: concatenates encodings and applies a feed-forward network; the towers
  stack these as the paper does (contexts first, then with the span; paragraph + categories
  first, then with the title).
"""

import keras
import tensorflow as tf


def ragged_mean_embedding(table: tf.Variable, ids: tf.RaggedTensor) -> tf.Tensor:
  """Averages the rows `ids` of `table` per example.

  Args:
    table: float32 `[rows, dim]`.
    ids: int ragged `[batch, (n)]`.

  Returns:
    float32 `[batch, dim]`; rows with no ids give zeros (never NaN: the divisor is at least 1).
  """
  ids = tf.cast(ids, tf.int64)
  # Gather from the tf.Variable itself (a ResourceGather of the rows needed). Gathering from a
  # Keras variable reads the whole table first, and once sparse updates have touched the table
  # every such read copies it (TF's copy-on-read mode): O(table) per step instead of O(rows).
  if isinstance(table, keras.Variable):
    table = table.value
  vectors = tf.gather(table, ids.flat_values)
  summed = tf.math.unsorted_segment_sum(vectors, ids.value_rowids(), ids.nrows())
  counts = tf.cast(tf.maximum(ids.row_lengths(), 1), vectors.dtype)
  return summed / counts[:, None]


@keras.saving.register_keras_serializable(package="dense_entity")
class SharedEmbedding(keras.layers.Layer):
  """The embedding table shared by all text features of both towers, `[rows, dim]`.

  Rows [0, V) are vocabulary words (initialised from GloVe when `initial_rows` is given), the
  rest are hash buckets for out-of-vocabulary unigrams and all bigrams.
  """

  def __init__(self, rows: int, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.rows = int(rows)
    self.dim = int(dim)
    self.embeddings = self.add_weight(
        name="embeddings", shape=(self.rows, self.dim),
        initializer=keras.initializers.RandomNormal(stddev=0.1))

  def call(self, ids: tf.RaggedTensor) -> tf.Tensor:
    return ragged_mean_embedding(self.embeddings, ids)

  def get_config(self):
    config = super().get_config()
    config.update(rows=self.rows, dim=self.dim)
    return config


@keras.saving.register_keras_serializable(package="dense_entity")
class BagOfNgramsEncoder(keras.layers.Layer):
  """One text feature: [mean unigram emb; mean bigram emb] -> Dense(output_dim, relu).

  Call:
    inputs: (unigram_ids, bigram_ids), int ragged `[batch, (n)]` each, rows of `embedding`.
    Returns float32 `[batch, output_dim]`.
  """

  def __init__(self, embedding: SharedEmbedding, output_dim: int, **kwargs):
    super().__init__(**kwargs)
    self.embedding = embedding
    self.output_dim = int(output_dim)
    self.dense = keras.layers.Dense(self.output_dim, activation="relu")

  def call(self, inputs):
    unigram_ids, bigram_ids = inputs
    features = tf.concat([self.embedding(unigram_ids), self.embedding(bigram_ids)], axis=-1)
    return self.dense(features)

  def get_config(self):
    config = super().get_config()
    config.update(output_dim=self.output_dim,
                  embedding=keras.saving.serialize_keras_object(self.embedding))
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["embedding"] = keras.saving.deserialize_keras_object(config["embedding"])
    return cls(**config)


@keras.saving.register_keras_serializable(package="dense_entity")
class BagOfCategoriesEncoder(keras.layers.Layer):
  """Categories: mean of category embeddings -> Dense(output_dim, relu).

  Call:
    category_ids: int ragged `[batch, (categories)]` in [0, num_buckets).
    Returns float32 `[batch, output_dim]` (an entity without categories gets Dense(0)).
  """

  def __init__(self, num_buckets: int, dim: int, output_dim: int, **kwargs):
    super().__init__(**kwargs)
    self.num_buckets = int(num_buckets)
    self.dim = int(dim)
    self.output_dim = int(output_dim)
    self.embeddings = self.add_weight(
        name="category_embeddings", shape=(self.num_buckets, self.dim),
        initializer=keras.initializers.RandomNormal(stddev=0.1))
    self.dense = keras.layers.Dense(self.output_dim, activation="relu")

  def call(self, category_ids):
    return self.dense(ragged_mean_embedding(self.embeddings, category_ids))

  def get_config(self):
    config = super().get_config()
    config.update(num_buckets=self.num_buckets, dim=self.dim, output_dim=self.output_dim)
    return config


@keras.saving.register_keras_serializable(package="dense_entity")
class CompoundEncoder(keras.layers.Layer):
  """Concatenates encodings, then Dense(hidden_dim, relu) -> Dense(output_dim).

  Call:
    inputs: list of float32 `[batch, d_i]`.
    Returns float32 `[batch, output_dim]`.
  """

  def __init__(self, hidden_dim: int, output_dim: int, **kwargs):
    super().__init__(**kwargs)
    self.hidden_dim = int(hidden_dim)
    self.output_dim = int(output_dim)
    self.hidden = keras.layers.Dense(self.hidden_dim, activation="relu")
    self.out = keras.layers.Dense(self.output_dim)

  def call(self, inputs):
    return self.out(self.hidden(tf.concat(list(inputs), axis=-1)))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_dim=self.hidden_dim, output_dim=self.output_dim)
    return config
