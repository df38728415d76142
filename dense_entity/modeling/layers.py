"""Encoder layers of the dual encoder (Gillick et al. 2019, section 4.1).

- `BagOfNgramsEncoder`: one text feature -> averaged unigram embeddings and averaged bigram
  embeddings from the shared table, concatenated, then a feed-forward layer.
- `BagOfCategoriesEncoder`: category ids -> averaged category embeddings, then feed-forward.
- `CompoundEncoder`: concatenates encodings and applies a feed-forward network; the towers
  stack these as the paper does (contexts first, then with the span; paragraph + categories
  first, then with the title).
"""

import contextlib

import keras
import tensorflow as tf


def value_rowids(ids: tf.RaggedTensor) -> tf.Tensor:
  """The row of each value of a 2-D ragged tensor, int64 `[values]`: one binary search over the
  row splits (RaggedTensor.value_rowids, when not cached, tiles a `[rows, longest row]` matrix:
  a quarter of an encoder's op time on batches of long sentences)."""
  splits = tf.cast(ids.row_splits, tf.int64)
  return tf.searchsorted(splits[1:], tf.range(splits[-1]), side="right", out_type=tf.int64)


# Set while the serving SavedModels are traced (`serving_lookups`).
_SERVING_LOOKUPS = False


@contextlib.contextmanager
def serving_lookups():
  """Within it, traced embedding means read the table and reduce it in one fused op.

  tf.sparse.segment_mean adds the rows of each segment straight from the table: on a batch of
  1,024 mentions 13 ms against 180 ms for a gather (a fresh `[ids, dim]` matrix: 70 MB) and a
  segment sum (issue 17). Only for serving: its gradient is not a sparse update of the rows
  read, and once a sparse optimizer has updated the table TensorFlow copies the whole table at
  every such read (copy-on-read), so training keeps `tf.gather` from the variable. The sums
  are the same up to float rounding (the fused op adds in blocks of rows).
  """
  global _SERVING_LOOKUPS
  previous, _SERVING_LOOKUPS = _SERVING_LOOKUPS, True
  try:
    yield
  finally:
    _SERVING_LOOKUPS = previous


def segment_mean_embedding(table: tf.Variable, ids: tf.Tensor, segment_ids: tf.Tensor,
                           counts: tf.Tensor) -> tf.Tensor:
  """Averages the rows `ids` of `table` per segment.

  Args:
    table: float32 `[rows, dim]`.
    ids: int `[n]`.
    segment_ids: int64 `[n]`, sorted: the segment of each id.
    counts: int `[segments]`, the ids of each segment.

  Returns:
    float32 `[segments, dim]`; segments with no ids give zeros (never NaN: the divisor is at
    least 1).
  """
  if isinstance(table, keras.Variable):
    table = table.value
  if _SERVING_LOOKUPS:
    return tf.sparse.segment_mean(tf.convert_to_tensor(table), ids, segment_ids,
                                  num_segments=tf.size(counts, tf.int64))
  # Gather from the tf.Variable itself (a ResourceGather of the rows needed). Gathering from a
  # Keras variable reads the whole table first, and once sparse updates have touched the table
  # every such read copies it (TF's copy-on-read mode): O(table) per step instead of O(rows).
  vectors = tf.gather(table, ids)
  summed = tf.math.unsorted_segment_sum(vectors, segment_ids, tf.size(counts, tf.int64))
  return summed / tf.maximum(tf.cast(counts, vectors.dtype), 1.0)[:, None]


def ragged_mean_embedding(table: tf.Variable, ids: tf.RaggedTensor) -> tf.Tensor:
  """Averages the rows `ids` of `table` per example.

  Args:
    table: float32 `[rows, dim]`.
    ids: int ragged `[batch, (n)]`.

  Returns:
    float32 `[batch, dim]`; rows with no ids give zeros (never NaN: the divisor is at least 1).
  """
  return segment_mean_embedding(table, tf.cast(ids.flat_values, tf.int64), value_rowids(ids),
                                tf.cast(ids.row_lengths(), tf.int64))


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

  def segment_means(self, ids, segment_ids, counts) -> tf.Tensor:
    """`segment_mean_embedding` of this table: the towers average all their bags in one pass."""
    return segment_mean_embedding(self.embeddings, ids, segment_ids, counts)

  def get_config(self):
    config = super().get_config()
    config.update(rows=self.rows, dim=self.dim)
    return config


@keras.saving.register_keras_serializable(package="dense_entity")
class BagOfNgramsEncoder(keras.layers.Layer):
  """One text feature: [mean unigram emb; mean bigram emb] -> Dense(output_dim, relu).

  Call:
    inputs: (unigram_ids, bigram_ids), int ragged `[batch, (n)]` each, rows of `embedding`;
      or (unigram_ids, bigram_ids, char_ngram_ids) for names with character n-grams
      (config.ModelConfig.char_ngrams): the mean of each bag, concatenated.
    Returns float32 `[batch, output_dim]`.
  """

  def __init__(self, embedding: SharedEmbedding, output_dim: int, **kwargs):
    super().__init__(**kwargs)
    self.embedding = embedding
    self.output_dim = int(output_dim)
    self.dense = keras.layers.Dense(self.output_dim, activation="relu")

  def build(self, input_shape):
    # One shape per bag (ragged ids, or a bag already averaged): each gives `dim` columns. Built
    # here, Keras does not warn of unbuilt state when the towers pass averaged bags.
    self.dense.build((None, self.embedding.dim * len(input_shape)))

  def call(self, inputs):
    # A dense input is a bag already averaged (the towers' one pass, models._bag_means).
    features = tf.concat([self.embedding(x) if isinstance(x, tf.RaggedTensor) else x
                          for x in inputs], axis=-1)
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

  def encode_flat(self, ids, rowids, counts):
    """`call` on flat ids (featurizer.CategoryFeaturizer.flat_ids): ids int `[n]`, rowids
    int64 `[n]` (sorted), counts int `[batch]` -> float32 `[batch, output_dim]`."""
    return self.dense(segment_mean_embedding(self.embeddings, ids, rowids, counts))

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


def combine_channels(dense: tf.Tensor, channels) -> tf.Tensor:
  """[sqrt(1 - sum w) * l2n(dense), sqrt(w_1) * v_1, ...] for channels [(w_i, v_i)].

  The v_i are L2-normalised (or zero) lexical vectors, so the dot product of two such
  encodings is (1 - sum w) * cos(dense) + sum_i w_i * cos(v_i). float32 `[batch, d + sum
  dims]`, norm <= 1.
  """
  rest = 1.0 - sum(w for w, _ in channels)
  dense = tf.math.l2_normalize(dense, axis=-1, epsilon=1e-12)
  return tf.concat([rest ** 0.5 * dense] + [w ** 0.5 * v for w, v in channels], axis=-1)


@keras.saving.register_keras_serializable(package="dense_entity")
class ContextMatchEncoder(keras.layers.Layer):
  """A lexical channel shared by both towers: hashed TF-IDF vectors of context and description.

  Not in Gillick et al. (2019). Their towers learn context-description matching from ~9M
  mentions; trained on a few hundred Wikipedia articles they learn to match span and title and
  barely use the context. This channel matches the words of the mention's (masked) sentence
  against the words of the entity's title and first paragraph without having to learn it: both
  texts become IDF-weighted bags of unigrams mapped to `dim` dimensions by the hashing trick
  (Weinberger et al., 2009: each token adds +-idf to one bucket, bucket and sign from one
  FarmHash of the token), L2-normalised, so their dot product approximates the TF-IDF cosine of the two
  texts. It is concatenated with the learned encodings (`combine`), as Luan et al. (2021,
  "Sparse, Dense, and Attentional Representations for Text Retrieval") concatenate sparse and
  dense vectors, so one nearest-neighbour search ranks by
  `(1 - w) * cos(learned) + w * cos(lexical)`.

  The towers are trained with it, so the learned part learns what the lexical one leaves
  over: on README's workspaces this gives higher held-out recall than adding the channel to
  towers trained without it (all dumps: recall@1 0.719 vs 0.711). The mixing weight w is a
  fixed hyper-parameter (0.25 in the small preset): learned by the softmax loss (tried on a
  first version, whose entity side read the text only) it fell from 0.2 to 0.05 in 2,000 steps,
  as the training mentions are memorised through span and title alone.

  IDF weights live in a non-trainable variable indexed by the featurizer's unigram row ids
  (`term_weights`, set once from the KB's entity texts by `set_document_frequencies`); a word
  in no entity text weighs 0, since it cannot match any description.

  Call:
    unigram_ids: int ragged `[batch, (tokens)]`, rows of the shared table (TextFeaturizer).
    tokens: tf.string ragged `[batch, (tokens)]`, the same tokens (hashed to buckets and signs).
    Returns float32 `[batch, dim]`, L2-normalised (all zeros for a text with no weighted word).
  """

  def __init__(self, rows: int, dim: int, weight: float = 0.25, **kwargs):
    super().__init__(**kwargs)
    if dim <= 0 or not 0.0 < weight < 1.0:
      raise ValueError(f"ContextMatchEncoder needs dim > 0 and 0 < weight < 1, got "
                       f"dim={dim}, weight={weight}")
    self.rows, self.dim, self.weight = int(rows), int(dim), float(weight)
    self.term_weights = self.add_weight(name="term_weights", shape=(self.rows,),
                                        initializer="zeros", trainable=False)

  def call(self, unigram_ids, tokens):
    return self.encode(unigram_ids.flat_values, tokens.flat_values, value_rowids(unigram_ids),
                       tf.cast(unigram_ids.nrows(), tf.int64))

  def encode(self, unigram_ids, tokens, rows, num_rows):
    """`call` on flat tokens: unigram_ids int `[n]`, tokens tf.string `[n]`, rows int64 `[n]`
    (the output row of each token), num_rows int64 scalar. float32 `[num_rows, dim]`."""
    ids = tf.cast(unigram_ids, tf.int64)
    table = self.term_weights.value if isinstance(self.term_weights, keras.Variable) else (
        self.term_weights)
    idf = tf.gather(table, ids)
    # One FarmHash per token gives both its bucket (h mod dim) and its sign (h < dim).
    hashed = tf.strings.to_hash_bucket_fast(tokens, 2 * self.dim)
    bucket = hashed % self.dim
    sign = tf.where(hashed < self.dim, 1.0, -1.0)
    segments = rows * self.dim + bucket
    summed = tf.math.unsorted_segment_sum(idf * sign, segments, num_rows * self.dim)
    return tf.math.l2_normalize(tf.reshape(summed, [-1, self.dim]), axis=-1, epsilon=1e-12)

  def set_document_frequencies(self, document_frequency, num_documents: int) -> None:
    """Sets IDF weights log((1 + N) / (1 + df)) + 1 for rows with df > 0, and 0 elsewhere.

    Args:
      document_frequency: int `[rows]`, entity texts holding each unigram row.
      num_documents: N, the number of entity texts counted.

    Raises:
      ValueError: when the shape is not `[rows]`.
    """
    df = tf.convert_to_tensor(document_frequency, tf.float32)
    if df.shape != (self.rows,):
      raise ValueError(f"document_frequency has shape {df.shape}, expected ({self.rows},)")
    idf = tf.math.log((1.0 + num_documents) / (1.0 + df)) + 1.0
    self.term_weights.assign(tf.where(df > 0, idf, tf.zeros_like(idf)))

  def get_config(self):
    config = super().get_config()
    config.update(rows=self.rows, dim=self.dim, weight=self.weight)
    return config
