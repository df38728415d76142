"""The dual encoder: mention tower phi(m), entity tower psi(e), cosine score.

Gillick et al. (2019), section 4.1 and Figure 1:
- mention tower: left context, right context and masked sentence are encoded and combined first;
  the result is combined with the span encoding;
- entity tower: first paragraph and categories are combined first; the result is combined with
  the title encoding;
- all text features share one embedding table (`layers.SharedEmbedding`); entity ids are not
  features, so an entity never seen in training is encodable from its title, text and categories.
Both towers take raw strings and return L2-normalised float32 `[batch, encoding_dim]`, so the
score s(m, e) = cos(phi(m), psi(e)) is a dot product.
"""

import logging
from typing import Dict, Optional, Sequence

import keras
import tensorflow as tf

from dense_entity.modeling import config as config_lib
from dense_entity.modeling import featurizer as featurizer_lib
from dense_entity.modeling import layers
from dense_entity.kb import schema


def _l2_normalize(x):
  # epsilon keeps an all-zero encoding finite (it stays zero instead of NaN).
  return tf.math.l2_normalize(x, axis=-1, epsilon=1e-12)


def _bag_means(embedding, features, num_rows, extra=(), all_rows=False):
  """Mean embeddings of the unigrams and bigrams of rows [0, num_rows) of flat `features`
  (featurizer.FlatFeatures; rows from num_rows on are left out), and of `extra` bags, all in
  one lookup (issue 17; layers.segment_mean_embedding).

  Args:
    embedding: layers.SharedEmbedding.
    features: featurizer.FlatFeatures of a batch featurized in one pass.
    num_rows: int64 scalar.
    extra: featurizer.FlatCharNgrams bags (the span's or title's character trigrams; rows
      int64 `[m]`, counts int64 `[rows_i]`).
    all_rows: whether num_rows is all the rows of `features` (fewer ops: nothing to cut off).

  Returns:
    (unigram means `[num_rows, dim]`, bigram means `[num_rows, dim]`, [extra means
    `[rows_i, dim]`]).
  """
  if all_rows:
    counts = features.counts
    ids = [features.unigram_ids, features.bigram_ids]
    segments = [features.rowids, features.bigram_rowids + num_rows]
    bigram_counts = tf.maximum(counts - 1, 0)
  else:
    counts = features.counts[:num_rows]
    bigram_counts = tf.maximum(counts - 1, 0)
    kept = tf.reduce_sum(counts)
    kept_bigrams = tf.reduce_sum(bigram_counts)
    ids = [features.unigram_ids[:kept], features.bigram_ids[:kept_bigrams]]
    segments = [features.rowids[:kept], features.bigram_rowids[:kept_bigrams] + num_rows]
  all_counts = [counts, bigram_counts]
  offset = 2 * num_rows
  sizes = [num_rows, num_rows]
  for bag in extra:
    ids.append(bag.ids)
    segments.append(bag.rowids + offset)
    all_counts.append(bag.counts)
    sizes.append(tf.size(bag.counts, out_type=tf.int64))
    offset += sizes[-1]
  means = embedding.segment_means(tf.concat(ids, 0), tf.concat(segments, 0),
                                  tf.concat(all_counts, 0))
  return tf.split(means, tf.stack(sizes), axis=0, num=2 + len(extra))


def _char_ngrams(text_featurizer, f, stop):
  """Character trigrams (featurizer.FlatCharNgrams) of rows [0, stop) of flat features `f`
  (the span's or the title's: the first rows of a tower's batch); stop an int64 scalar."""
  last = tf.reduce_sum(f.counts[:stop])
  return text_featurizer.char_ngrams_flat(f.tokens[:last], f.rowids[:last], stop)


def _title_and_alias_ngrams(text_featurizer, f, batch):
  """Character trigrams of rows [0, batch) (titles) and [2 batch, 3 batch) (aliases) of flat
  features `f` in one pass, as rows [0, batch) and [batch, 2 batch)."""
  title_end = tf.reduce_sum(f.counts[:batch])
  alias_start = tf.reduce_sum(f.counts[:2 * batch])
  return text_featurizer.char_ngrams_flat(
      tf.concat([f.tokens[:title_end], f.tokens[alias_start:]], 0),
      tf.concat([f.rowids[:title_end], f.rowids[alias_start:] - batch], 0), 2 * batch)


def _combine(dense, context_match, context_vector, name_match, name_vector):
  """[sqrt(1 - w_c - w_n) * l2n(dense), sqrt(w_c) * context, sqrt(w_n) * name], the channels
  that exist (layers.combine_channels); l2n(dense) alone without them."""
  parts = [(layer.weight, vector) for layer, vector in ((context_match, context_vector),
                                                        (name_match, name_vector))
           if layer is not None]
  if not parts:
    return _l2_normalize(dense)
  return layers.combine_channels(dense, parts)


@keras.saving.register_keras_serializable(package="dense_entity")
class MentionEncoder(keras.layers.Layer):
  """phi(m): the four mention features (tf.string `[batch]` each) -> `[batch, encoding_dim]`."""

  def __init__(self, text_featurizer: featurizer_lib.TextFeaturizer,
               embedding: layers.SharedEmbedding, model_config: config_lib.ModelConfig,
               span_encoder: Optional[layers.BagOfNgramsEncoder] = None,
               context_match: Optional[layers.ContextMatchEncoder] = None,
               name_match: Optional[layers.ContextMatchEncoder] = None, **kwargs):
    super().__init__(**kwargs)
    self.text_featurizer = text_featurizer
    self.embedding = embedding
    self.context_match = context_match
    self.name_match = name_match
    c = model_config
    # Plain attributes, not a dict: TF checkpoints track attributes of Keras 3 layers, and
    # layers held in a dict would silently be left out of checkpoints.
    self.span_encoder = span_encoder or layers.BagOfNgramsEncoder(embedding, c.hidden_dim,
                                                                  name="encode_span")
    self.left_encoder = layers.BagOfNgramsEncoder(embedding, c.hidden_dim, name="encode_left")
    self.right_encoder = layers.BagOfNgramsEncoder(embedding, c.hidden_dim, name="encode_right")
    self.sentence_encoder = layers.BagOfNgramsEncoder(embedding, c.hidden_dim,
                                                      name="encode_sentence")
    self.context_encoder = layers.CompoundEncoder(c.hidden_dim, c.hidden_dim, name="context")
    self.mention_encoder = layers.CompoundEncoder(c.hidden_dim, c.encoding_dim, name="mention")
    self.char_ngrams = c.char_ngrams

  def build(self, input_shape):
    # Raw strings give no shapes to build sublayers from: each builds on its first call.
    del input_shape

  def call(self, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    # All four features in one pass (issue 17: per-op overhead dominated calls of a few
    # mentions): featurized as one batch of 4 * batch strings (span, left, right, sentence),
    # their bags averaged in one lookup, then split back. Each feature's encoding is the one it
    # gets on its own: equal to the bit (same ids, sums in the same order), and in the exported
    # SavedModels up to float rounding (layers.serving_lookups).
    parts = (schema.MENTION_SPAN, schema.MENTION_LEFT, schema.MENTION_RIGHT,
             schema.MENTION_SENTENCE)
    texts = [tf.convert_to_tensor(features[n], tf.string) for n in parts]
    batch = tf.size(texts[0], out_type=tf.int64)
    f = self.text_featurizer.flat_features(tf.concat(texts, 0))
    grams = None
    if self.char_ngrams or self.name_match is not None:
      # The span's character trigrams (rows [0, batch): the span's tokens come first).
      grams = _char_ngrams(self.text_featurizer, f, batch)
    unigrams, bigrams, *char_means = _bag_means(
        self.embedding, f, len(parts) * batch, (grams,) if self.char_ngrams else (),
        all_rows=True)
    unigrams = tf.split(unigrams, len(parts), axis=0, num=len(parts))
    bigrams = tf.split(bigrams, len(parts), axis=0, num=len(parts))
    span = self.span_encoder((unigrams[0], bigrams[0]) + tuple(char_means))
    context = self.context_encoder([
        self.left_encoder((unigrams[1], bigrams[1])),
        self.right_encoder((unigrams[2], bigrams[2])),
        self.sentence_encoder((unigrams[3], bigrams[3])),
    ])
    encoding = self.mention_encoder([context, span])
    # The context channel reads the (masked) sentence, so the span's own words do not count
    # there; the name channel reads the span's character trigrams.
    lexical = name = None
    if self.context_match is not None:
      first = tf.reduce_sum(f.counts[:3 * batch])
      lexical = self.context_match.encode(f.unigram_ids[first:], f.tokens[first:],
                                          f.rowids[first:] - 3 * batch, batch)
    if self.name_match is not None:
      name = self.name_match.encode(grams.ids, grams.grams, grams.rowids, batch)
    return _combine(encoding, self.context_match, lexical, self.name_match, name)


@keras.saving.register_keras_serializable(package="dense_entity")
class EntityEncoder(keras.layers.Layer):
  """psi(e): title, text (tf.string `[batch]`), categories and aliases ('|'-joined tf.string
  `[batch]` each) -> `[batch, encoding_dim]`.

  The paper's features are title, text and categories (section 4.1). The aliases (redirect
  titles, schema.ENTITY_ALIASES) are read by the name channel only: its vector is the unit
  TF-IDF trigram vector of the title plus `name_match_alias_weight` times that of all the
  aliases, normalised again, so a redirect ('HTTP' for 'Hypertext transfer protocol') matches
  while the title stays the closest name. A batch without the aliases feature (callers of
  older versions) reads as no aliases.
  """

  def __init__(self, text_featurizer: featurizer_lib.TextFeaturizer,
               embedding: layers.SharedEmbedding, model_config: config_lib.ModelConfig,
               title_encoder: Optional[layers.BagOfNgramsEncoder] = None,
               context_match: Optional[layers.ContextMatchEncoder] = None,
               name_match: Optional[layers.ContextMatchEncoder] = None, **kwargs):
    super().__init__(**kwargs)
    c = model_config
    self.text_featurizer = text_featurizer
    self.embedding = embedding
    self.context_match = context_match
    self.name_match = name_match
    self.category_featurizer = featurizer_lib.CategoryFeaturizer(c.num_category_buckets)
    self.title_encoder = title_encoder or layers.BagOfNgramsEncoder(embedding, c.hidden_dim,
                                                                    name="encode_title")
    self.text_encoder = layers.BagOfNgramsEncoder(embedding, c.hidden_dim, name="encode_text")
    self.category_encoder = layers.BagOfCategoriesEncoder(
        c.num_category_buckets, c.category_dim, c.hidden_dim, name="encode_categories")
    self.description_encoder = layers.CompoundEncoder(c.hidden_dim, c.hidden_dim,
                                                      name="description")
    self.entity_encoder = layers.CompoundEncoder(c.hidden_dim, c.encoding_dim, name="entity")
    self.char_ngrams = c.char_ngrams
    self.name_match_alias_weight = float(c.name_match_alias_weight)

  def build(self, input_shape):
    # Raw strings give no shapes to build sublayers from: each builds on its first call.
    del input_shape

  def call(self, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    # Title, text and (for the name channel) aliases in one pass (issue 17), as rows
    # [0, batch), [batch, 2 batch) and [2 batch, 3 batch) of one featurized batch.
    title = tf.convert_to_tensor(features[schema.ENTITY_TITLE], tf.string)
    batch = tf.size(title, out_type=tf.int64)
    texts = [title, tf.convert_to_tensor(features[schema.ENTITY_TEXT], tf.string)]
    aliases = features.get(schema.ENTITY_ALIASES)
    with_aliases = (self.name_match is not None and aliases is not None
                    and self.name_match_alias_weight > 0)
    if with_aliases:
      texts.append(featurizer_lib.alias_text(tf.convert_to_tensor(aliases, tf.string)))
    f = self.text_featurizer.flat_features(tf.concat(texts, 0))
    grams = names = None
    if self.name_match is not None and with_aliases:
      # The trigrams of title (rows [0, batch)) and aliases (rows [batch, 2 batch)) in one
      # pass; the title's are the first rows.
      names = _title_and_alias_ngrams(self.text_featurizer, f, batch)
      title_grams = tf.reduce_sum(names.counts[:batch])
      grams = featurizer_lib.FlatCharNgrams(names.grams[:title_grams], names.ids[:title_grams],
                                            names.rowids[:title_grams], names.counts[:batch])
    elif self.char_ngrams or self.name_match is not None:
      grams = _char_ngrams(self.text_featurizer, f, batch)
    # The aliases' tokens give trigrams only.
    unigrams, bigrams, *char_means = _bag_means(
        self.embedding, f, 2 * batch, (grams,) if self.char_ngrams else (),
        all_rows=not with_aliases)
    unigrams = tf.split(unigrams, 2, axis=0, num=2)
    bigrams = tf.split(bigrams, 2, axis=0, num=2)
    description = self.description_encoder([
        self.text_encoder((unigrams[1], bigrams[1])),
        self.category_encoder.encode_flat(
            *self.category_featurizer.flat_ids(features[schema.ENTITY_CATEGORIES])),
    ])
    title = self.title_encoder((unigrams[0], bigrams[0]) + tuple(char_means))
    encoding = self.entity_encoder([description, title])
    lexical = name = None
    if self.context_match is not None:
      # Title and text (the tokens of 'title text'): an entity without a text is matched on
      # the words of its title ('Georgia (U.S. state)': 'u', 's', 'state'). Rows i and
      # batch + i are entity i's; its title's tokens come first, as in 'title text'.
      ids, tokens, rowids = f.unigram_ids, f.tokens, f.rowids
      if with_aliases:
        kept = tf.reduce_sum(f.counts[:2 * batch])
        ids, tokens, rowids = ids[:kept], tokens[:kept], rowids[:kept]
      lexical = self.context_match.encode(ids, tokens, rowids % tf.maximum(batch, 1), batch)
    if self.name_match is not None and with_aliases:
      # The aliases' trigram vector, added to the title's at a lower weight: one bag of all
      # names would dilute the title of an entity with many redirects ('Germany': 'German
      # art' outranked it for 'Germany'). Both vectors from one pass over 2 * batch rows.
      title_name, alias_name = tf.split(
          self.name_match.encode(names.ids, names.grams, names.rowids, 2 * batch), 2, axis=0,
          num=2)
      name = tf.math.l2_normalize(title_name + self.name_match_alias_weight * alias_name,
                                  axis=-1, epsilon=1e-12)
    elif self.name_match is not None:
      name = self.name_match.encode(grams.ids, grams.grams, grams.rowids, batch)
    return _combine(encoding, self.context_match, lexical, self.name_match, name)


class DualEncoder(tf.Module):
  """Both towers over one featurizer and one shared embedding table, plus the learned scales.

  Args:
    model_config: dimensions (config.ModelConfig).
    vocabulary: words with their own embedding rows (e.g. GloVe's), or None.
    initial_embeddings: optional float32 `[len(vocabulary), d']` rows copied into the first d'
      columns of the vocabulary rows (GloVe initialisation, paper section 4.1).

  Attributes:
    mention_encoder, entity_encoder: the towers (Keras layers; a keras.Model would add its own
      float32 serving signature to the SavedModel, which raw-string towers cannot trace).
    scale: learned scalar `a` multiplying cosines in the softmax task (section 4.2).
    hard_negative_scale, hard_negative_bias: a_h and b_h of the logistic task (section 4.3).
  """

  def __init__(self, model_config: config_lib.ModelConfig,
               vocabulary: Optional[Sequence[str]] = None, initial_embeddings=None):
    super().__init__(name="dual_encoder")
    self.model_config = model_config
    self.text_featurizer = featurizer_lib.TextFeaturizer(model_config.num_buckets, vocabulary)
    self.embedding = layers.SharedEmbedding(self.text_featurizer.num_rows,
                                            model_config.embedding_dim, name="shared_embedding")
    if model_config.zero_init_buckets:
      self._zero_bucket_rows()
    if initial_embeddings is not None:
      self._init_vocabulary_rows(initial_embeddings)
    # Optionally one feed-forward layer encodes both the mention span and the entity title, so
    # the same string gives the same feature encoding on both sides, also for words never seen
    # in training (not in the paper; config.ModelConfig.share_span_title_encoder).
    shared = None
    if model_config.share_span_title_encoder:
      shared = layers.BagOfNgramsEncoder(self.embedding, model_config.hidden_dim,
                                         name="encode_span_and_title")
    # Optionally a lexical context-description channel shared by both towers
    # (config.ModelConfig.context_match_dim; layers.ContextMatchEncoder).
    self.context_match = None
    if model_config.context_match_dim > 0:
      self.context_match = layers.ContextMatchEncoder(
          self.text_featurizer.num_rows, model_config.context_match_dim,
          model_config.context_match_weight, name="context_match")
    # Optionally a lexical name channel over character trigrams of span and title
    # (config.ModelConfig.name_match_dim).
    self.name_match = None
    if model_config.name_match_dim > 0:
      self.name_match = layers.ContextMatchEncoder(
          self.text_featurizer.num_rows, model_config.name_match_dim,
          model_config.name_match_weight, name="name_match")
    self.mention_encoder = MentionEncoder(self.text_featurizer, self.embedding, model_config,
                                          span_encoder=shared, context_match=self.context_match,
                                          name_match=self.name_match, name="mention_encoder")
    self.entity_encoder = EntityEncoder(self.text_featurizer, self.embedding, model_config,
                                        title_encoder=shared, context_match=self.context_match,
                                        name_match=self.name_match, name="entity_encoder")
    self.scale = tf.Variable(model_config.initial_scale, dtype=tf.float32, name="scale")
    self.hard_negative_scale = tf.Variable(model_config.initial_scale, dtype=tf.float32,
                                           name="hard_negative_scale")
    self.hard_negative_bias = tf.Variable(0.0, dtype=tf.float32, name="hard_negative_bias")
    # Build both towers so variables exist before checkpoints are restored.
    self.mention_encoder({name: tf.constant([""]) for name in schema.MENTION_FEATURES})
    self.entity_encoder({name: tf.constant([""]) for name in schema.ENTITY_FEATURES})

  @property
  def encoding_dim(self) -> int:
    """Width of both towers' encodings: encoding_dim (+ context_match_dim and name_match_dim
    when enabled)."""
    c = self.model_config
    return c.encoding_dim + max(c.context_match_dim, 0) + max(c.name_match_dim, 0)

  def _zero_bucket_rows(self):
    """Sets the hash-bucket rows [vocab_size, num_rows) of the shared table to zero
    (config.ModelConfig.zero_init_buckets)."""
    table = self.embedding.embeddings
    v = self.text_featurizer.vocab_size
    table.assign(tf.concat([tf.convert_to_tensor(table)[:v],
                            tf.zeros([table.shape[0] - v, table.shape[1]], table.dtype)], 0))

  def _init_vocabulary_rows(self, vectors):
    vectors = tf.convert_to_tensor(vectors, tf.float32)
    v, d = vectors.shape
    if v != self.text_featurizer.vocab_size:
      raise ValueError(f"initial_embeddings has {v} rows for a vocabulary of "
                       f"{self.text_featurizer.vocab_size} words")
    if d != self.model_config.embedding_dim:
      # Said, not silent: a 300-d GloVe file for a 50-d preset keeps the first 50 values
      # of each vector; a narrower file leaves the other dimensions at their random start.
      logging.warning("initial embeddings have %d dimensions, the model %d: %s", d,
                      self.model_config.embedding_dim,
                      f"only the first {self.model_config.embedding_dim} values of each vector "
                      "are used" if d > self.model_config.embedding_dim else
                      f"dimensions {d}.. keep their random initialisation")
    d = min(d, self.model_config.embedding_dim)
    # Scale pretrained rows to the initializer's norm so that bucket rows and word rows start
    # on a comparable footing.
    rows = vectors[:, :d]
    rows = rows / (tf.norm(rows, axis=-1, keepdims=True) + 1e-6) * (0.1 * d ** 0.5)
    table = self.embedding.embeddings
    table.assign(tf.tensor_scatter_nd_update(
        tf.convert_to_tensor(table), tf.range(v)[:, None],
        tf.concat([rows, tf.convert_to_tensor(table)[:v, d:]], axis=1)))

  @property
  def trainable_variables(self):
    return (list(self.mention_encoder.trainable_variables)
            + [w for w in self.entity_encoder.trainable_variables
               if all(w is not m for m in self.mention_encoder.trainable_variables)]
            + [self.scale, self.hard_negative_scale, self.hard_negative_bias])
