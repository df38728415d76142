"""Layers round-trip their configs; checkpoints restore every variable; optimizers are exact."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.modeling import featurizer
from dense_entity.modeling import layers
from dense_entity.modeling import models
from dense_entity.training import optimizers
from dense_entity.kb import schema
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


def _context_match(dim=256, weight=0.3, num_buckets=1 << 12):
  """A ContextMatchEncoder over a TextFeaturizer, IDF set from three entity texts."""
  feat = featurizer.TextFeaturizer(num_buckets)
  layer = layers.ContextMatchEncoder(feat.num_rows, dim, weight)
  texts = ["tbilisi is the capital of the country", "atlanta is the capital of the state",
           "the element mercury"]
  df = np.zeros(feat.num_rows, np.int64)
  for row in feat(tf.constant(texts))[0].numpy():
    df[np.unique(row)] += 1
  layer.set_document_frequencies(df, len(texts))
  return feat, layer


def _lexical(feat, layer, texts):
  tokens, unigrams, _ = feat.featurize(tf.constant(texts))
  return layer(unigrams, tokens).numpy()


def test_context_match_weights_words_by_idf_and_ignores_words_in_no_entity_text():
  feat, layer = _context_match()
  ids = feat(tf.constant(["tbilisi the zebra"]))[0].numpy()[0]
  idf = layer.term_weights.numpy()[ids]
  # 'tbilisi' is in 1 of 3 texts, 'the' in all 3, 'zebra' in none.
  np.testing.assert_allclose(idf, [np.log(4 / 2) + 1, np.log(4 / 4) + 1, 0.0], rtol=1e-6)
  vec = _lexical(feat, layer, ["tbilisi", "zebra giraffe", ""])
  np.testing.assert_allclose(np.linalg.norm(vec, axis=-1), [1.0, 0.0, 0.0], atol=1e-6)


def test_context_match_cosine_follows_shared_rare_words():
  feat, layer = _context_match()
  ctx = _lexical(feat, layer, ["[MASK] declared independence; its capital is tbilisi"])[0]
  country, state = _lexical(feat, layer, ["tbilisi is the capital of the country",
                                          "atlanta is the capital of the state"])
  assert ctx @ country > ctx @ state + 0.2
  # The hashing trick approximates the exact TF-IDF cosine (one token each: exact).
  single = _lexical(feat, layer, ["tbilisi", "tbilisi tbilisi", "atlanta"])
  np.testing.assert_allclose(single[0] @ single[1], 1.0, rtol=1e-6)
  dot = abs(single[0] @ single[2])  # one bucket each: the same bucket or orthogonal
  assert min(dot, abs(dot - 1.0)) < 1e-6


def test_dual_encoder_appends_the_weighted_lexical_channel_to_both_encodings():
  cfg = config.get_preset("tiny").model
  cfg.context_match_dim, cfg.context_match_weight = 32, 0.3
  model = models.DualEncoder(cfg)
  model.context_match.set_document_frequencies(np.ones(model.text_featurizer.num_rows), 3)
  mentions, entities = _mention_batch(), _entity_batch()
  full_m = model.mention_encoder(mentions).numpy()
  full_e = model.entity_encoder(entities).numpy()
  assert full_m.shape[-1] == full_e.shape[-1] == model.encoding_dim == cfg.encoding_dim + 32
  # Learned part: L2-normalised, times sqrt(1 - w).
  for full in (full_m, full_e):
    np.testing.assert_allclose(np.linalg.norm(full[:, :cfg.encoding_dim], axis=-1), 0.7 ** 0.5,
                               rtol=1e-5)
  # Lexical part, times sqrt(w): the mention's sentence; the entity's title and text.
  lexical_m = _lexical(model.text_featurizer, model.context_match,
                       [t.decode() for t in mentions[schema.MENTION_SENTENCE].numpy()])
  titles_and_texts = [f"{a.decode()} {b.decode()}" for a, b in zip(
      entities[schema.ENTITY_TITLE].numpy(), entities[schema.ENTITY_TEXT].numpy())]
  lexical_e = _lexical(model.text_featurizer, model.context_match, titles_and_texts)
  np.testing.assert_allclose(full_m[:, cfg.encoding_dim:], 0.3 ** 0.5 * lexical_m, atol=1e-6)
  np.testing.assert_allclose(full_e[:, cfg.encoding_dim:], 0.3 ** 0.5 * lexical_e, atol=1e-6)
  # So scores are 0.7 * cos(learned) + 0.3 * cos(lexical).
  learned_m = full_m[:, :cfg.encoding_dim] / 0.7 ** 0.5
  learned_e = full_e[:, :cfg.encoding_dim] / 0.7 ** 0.5
  np.testing.assert_allclose(full_m @ full_e.T, 0.7 * learned_m @ learned_e.T
                             + 0.3 * lexical_m @ lexical_e.T, atol=1e-5)


def test_context_match_layer_config_round_trips_and_rejects_bad_settings():
  layer = layers.ContextMatchEncoder(10, 4, 0.25)
  assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()
  for dim, weight in ((0, 0.3), (4, 0.0), (4, 1.0)):
    with pytest.raises(ValueError, match="ContextMatchEncoder"):
      layers.ContextMatchEncoder(10, dim, weight)
  with pytest.raises(ValueError, match="expected \\(10,\\)"):
    layer.set_document_frequencies(np.zeros(9), 1)


def test_char_ngrams_add_a_trigram_bag_to_span_and_title():
  cfg = config.get_preset("tiny").model
  cfg.char_ngrams = True
  model = models.DualEncoder(cfg)
  d = cfg.embedding_dim
  # Span and title read three bags (unigrams, bigrams, trigrams); the contexts and the text two.
  assert model.mention_encoder.span_encoder.dense.kernel.shape[0] == 3 * d
  assert model.entity_encoder.title_encoder.dense.kernel.shape[0] == 3 * d
  assert model.mention_encoder.left_encoder.dense.kernel.shape[0] == 2 * d
  assert model.entity_encoder.text_encoder.dense.kernel.shape[0] == 2 * d
  # Two spellings of an unseen name share their trigram bag, so their span features differ
  # only in the word bags.
  f = model.text_featurizer
  bags = [f.char_ngram_ids(featurizer.tokenize(tf.constant([t]))) for t in ("Kecskemét",
                                                                           "Kecskemet")]
  np.testing.assert_array_equal(model.embedding(bags[0]), model.embedding(bags[1]))
  # Without char_ngrams the towers are the paper's: two bags per feature.
  plain = models.DualEncoder(config.get_preset("tiny").model)
  assert plain.mention_encoder.span_encoder.dense.kernel.shape[0] == 2 * d


def test_zero_init_buckets_leave_names_of_unseen_words_without_a_random_encoding():
  cfg = config.get_preset("tiny").model
  cfg.zero_init_buckets = True
  vectors = np.arange(1, 2 * 5 + 1, dtype=np.float32).reshape(2, 5)
  model = models.DualEncoder(cfg, vocabulary=["paris", "texas"], initial_embeddings=vectors)
  table = model.embedding.embeddings.numpy()
  # GloVe rows as given (scaled), every hash-bucket row zero.
  assert np.all(np.linalg.norm(table[:2], axis=1) > 0)
  assert not np.any(table[2:])
  # A title of words never seen (bucket rows only) has a zero bag, so two such titles get the
  # same title feature whatever their words, while a known word gives a different one.
  f = model.text_featurizer
  bags = [model.embedding(f(tf.constant([t]))[0]) for t in ("kruszyny rumunki", "afp xq",
                                                            "paris")]
  np.testing.assert_array_equal(bags[0], np.zeros_like(bags[0]))
  np.testing.assert_array_equal(bags[1], np.zeros_like(bags[1]))
  assert np.any(bags[2].numpy())
  # The default is the paper's random initialisation.
  plain = models.DualEncoder(config.get_preset("tiny").model, vocabulary=["paris", "texas"],
                             initial_embeddings=vectors)
  assert np.all(np.any(plain.embedding.embeddings.numpy()[2:] != 0, axis=1))


def test_name_channel_scores_the_tfidf_cosine_of_span_and_title_trigrams():
  cfg = config.get_preset("tiny").model
  cfg.name_match_dim, cfg.name_match_weight = 64, 0.3
  cfg.context_match_dim, cfg.context_match_weight = 32, 0.2
  model = models.DualEncoder(cfg)
  f = model.text_featurizer
  model.context_match.set_document_frequencies(np.ones(f.num_rows), 3)
  model.name_match.set_document_frequencies(np.ones(f.num_rows), 3)
  mentions, entities = _mention_batch(), _entity_batch()
  full_m = model.mention_encoder(mentions).numpy()
  full_e = model.entity_encoder(entities).numpy()
  d, c = cfg.encoding_dim, cfg.context_match_dim
  assert full_m.shape[-1] == model.encoding_dim == d + c + 64
  # Learned part times sqrt(1 - 0.2 - 0.3); context part sqrt(0.2); name part sqrt(0.3).
  np.testing.assert_allclose(np.linalg.norm(full_m[:, :d], axis=-1), 0.5 ** 0.5, rtol=1e-5)

  def name_vectors(texts):
    grams, ids = f.char_ngrams(featurizer.tokenize(tf.constant(texts)))
    return model.name_match(ids, grams).numpy()

  name_m = name_vectors([row[0] for row in testutil.MENTIONS])  # the spans
  name_e = name_vectors([row[4] for row in testutil.MENTIONS])  # the titles
  np.testing.assert_allclose(full_m[:, d + c:], 0.3 ** 0.5 * name_m, atol=1e-6)
  np.testing.assert_allclose(full_e[:, d + c:], 0.3 ** 0.5 * name_e, atol=1e-6)
  # A span equal to its entity's title ('Ore River', 'Port Alder') has name cosine 1.
  cos = (name_m * name_e).sum(axis=-1)
  assert cos[0] == pytest.approx(1.0, abs=1e-5) and cos[1] == pytest.approx(1.0, abs=1e-5)
  # 'Alder' shares the trigrams of one word of 'Port Alder': in between.
  assert 0.2 < cos[4] < 0.9


def test_name_channel_reads_the_aliases_of_the_entity_beside_its_title():
  cfg = config.get_preset("tiny").model
  cfg.name_match_dim, cfg.name_match_weight = 64, 0.3
  model = models.DualEncoder(cfg)
  model.name_match.set_document_frequencies(np.ones(model.text_featurizer.num_rows), 3)
  d = cfg.encoding_dim
  span = model.mention_encoder({**{n: tf.constant([""]) for n in schema.MENTION_FEATURES},
                                schema.MENTION_SPAN: tf.constant(["HTTP"])}).numpy()[0, d:]

  def name_part(aliases):
    features = {schema.ENTITY_TITLE: tf.constant(["Hypertext transfer protocol"]),
                schema.ENTITY_TEXT: tf.constant([""]),
                schema.ENTITY_CATEGORIES: tf.constant([""])}
    if aliases is not None:
      features[schema.ENTITY_ALIASES] = tf.constant([aliases])
    return model.entity_encoder(features).numpy()[0, d:]

  # No shared trigram without the alias. With the redirect 'HTTP' the name vector is
  # unit(title) + 0.5 unit(aliases), normalised: the span's cosine with it is positive and
  # about 0.5 / sqrt(1 + 0.5^2) at most (title and aliases near orthogonal; hashing into 64
  # dimensions moves it a little), times the channel's weight.
  without, empty = name_part(None), name_part("")
  np.testing.assert_allclose(without, empty, atol=1e-6)
  with_alias = name_part("HTTP|Http/1.1")
  assert abs(float(span @ without)) < 0.05
  assert 0.05 < float(span @ with_alias) < 0.3 * 0.5
  # Many aliases do not dilute the title: a span equal to the title keeps a cosine of about
  # 1 / sqrt(1 + 0.5^2) with the name vector when the aliases share no trigram with it (0.86
  # at worst), where one bag of 100 names would leave it near 0.1.
  title_span = model.mention_encoder({
      **{n: tf.constant([""]) for n in schema.MENTION_FEATURES},
      schema.MENTION_SPAN: tf.constant(["Hypertext transfer protocol"])}).numpy()[0, d:]
  many = name_part("|".join(f"Alias number {i} xq{i}" for i in range(100)))
  assert float(title_span @ many) >= 0.3 / 1.25 ** 0.5 - 1e-3
  # name_match_alias_weight 0 reads the title only.
  cfg.name_match_alias_weight = 0.0
  title_only = models.DualEncoder(cfg)
  title_only.name_match.set_document_frequencies(np.ones(model.text_featurizer.num_rows), 3)
  features = {schema.ENTITY_TITLE: tf.constant(["Hypertext transfer protocol"]),
              schema.ENTITY_TEXT: tf.constant([""]), schema.ENTITY_CATEGORIES: tf.constant([""])}
  np.testing.assert_allclose(
      title_only.entity_encoder({**features,
                                 schema.ENTITY_ALIASES: tf.constant(["HTTP"])}).numpy()[0, d:],
      title_only.entity_encoder(features).numpy()[0, d:], atol=1e-6)
  # The learned part does not read the aliases.
  full = lambda a: model.entity_encoder({  # noqa: E731
      schema.ENTITY_TITLE: tf.constant(["Hypertext transfer protocol"]),
      schema.ENTITY_TEXT: tf.constant([""]), schema.ENTITY_CATEGORIES: tf.constant([""]),
      schema.ENTITY_ALIASES: tf.constant([a])}).numpy()[0, :d]
  np.testing.assert_allclose(full(""), full("HTTP"), atol=1e-6)


def test_channel_weights_that_leave_nothing_for_the_learned_part_are_refused():
  cfg = config.get_preset("tiny")
  cfg.model.context_match_dim, cfg.model.context_match_weight = 8, 0.5
  cfg.model.name_match_dim, cfg.model.name_match_weight = 8, 0.5
  with pytest.raises(ValueError, match="learned part"):
    config.validate(cfg)


def test_initial_embeddings_of_another_width_are_said_not_cut_silently(caplog):
  cfg = config.get_preset("tiny").model
  wide = np.ones((2, cfg.embedding_dim + 3), np.float32)
  with caplog.at_level("WARNING"):
    model = models.DualEncoder(cfg, vocabulary=["paris", "texas"], initial_embeddings=wide)
  assert f"only the first {cfg.embedding_dim} values" in caplog.text
  rows = model.embedding.embeddings.numpy()[:2]
  assert rows.shape[1] == cfg.embedding_dim and np.allclose(rows, rows[0, 0])  # cut, scaled
  caplog.clear()
  with caplog.at_level("WARNING"):
    models.DualEncoder(cfg, vocabulary=["paris", "texas"],
                       initial_embeddings=np.ones((2, cfg.embedding_dim), np.float32))
  assert "initial embeddings" not in caplog.text


def _per_feature_mention(m, features):
  """The mention tower as before issue 17: each feature featurized and encoded on its own."""
  feat = m.text_featurizer
  tokens, *sentence_ids = feat.featurize(tf.constant(features[schema.MENTION_SENTENCE]))
  context = m.context_encoder([
      m.left_encoder(feat(tf.constant(features[schema.MENTION_LEFT]))),
      m.right_encoder(feat(tf.constant(features[schema.MENTION_RIGHT]))),
      m.sentence_encoder(tuple(sentence_ids))])
  span_tokens, *span_ids = feat.featurize(tf.constant(features[schema.MENTION_SPAN]))
  grams = feat.char_ngrams(span_tokens)
  span = m.span_encoder(tuple(span_ids) + (grams[1],))
  return layers.combine_channels(m.mention_encoder([context, span]), [
      (m.context_match.weight, m.context_match(sentence_ids[0], tokens)),
      (m.name_match.weight, m.name_match(grams[1], grams[0]))]).numpy()


def _per_feature_entity(e, features):
  feat = e.text_featurizer
  text_tokens, *text_ids = feat.featurize(tf.constant(features[schema.ENTITY_TEXT]))
  title_tokens, *title_ids = feat.featurize(tf.constant(features[schema.ENTITY_TITLE]))
  description = e.description_encoder([
      e.text_encoder(tuple(text_ids)),
      e.category_encoder(e.category_featurizer(tf.constant(
          features[schema.ENTITY_CATEGORIES])))])
  grams = feat.char_ngrams(title_tokens)
  title = e.title_encoder(tuple(title_ids) + (grams[1],))
  lexical = e.context_match(tf.concat([title_ids[0], text_ids[0]], axis=1),
                            tf.concat([title_tokens, text_tokens], axis=1))
  alias_grams = feat.char_ngrams(featurizer.tokenize(featurizer.alias_text(
      tf.constant(features[schema.ENTITY_ALIASES]))))
  name = tf.math.l2_normalize(
      e.name_match(grams[1], grams[0])
      + e.name_match_alias_weight * e.name_match(alias_grams[1], alias_grams[0]),
      axis=-1, epsilon=1e-12)
  return layers.combine_channels(e.entity_encoder([description, title]), [
      (e.context_match.weight, lexical), (e.name_match.weight, name)]).numpy()


def test_one_pass_towers_equal_per_feature_encoding():
  """Issue 17: the towers featurize all their text features in one pass; each encoding must
  equal the one of featurizing and encoding every feature on its own."""
  cfg = dataclasses.replace(config.get_preset("tiny").model, context_match_dim=16,
                            name_match_dim=8, char_ngrams=True)
  model = models.DualEncoder(cfg, vocabulary=["the", "river", "port"])
  df = np.ones(model.text_featurizer.num_rows, np.int64)
  model.context_match.set_document_frequencies(df, 3)
  model.name_match.set_document_frequencies(df, 3)
  mentions = {
      schema.MENTION_SPAN: ["Ore River", "", "Port Alder", "東京"],
      schema.MENTION_LEFT: ["The", "", "A ferry near", "x"],
      schema.MENTION_RIGHT: ["meets the sea .", "", "", "は"],
      schema.MENTION_SENTENCE: ["The [MASK] meets the sea.", "", "A ferry near [MASK].",
                                "[MASK]は日本"]}
  mentions = {k: tf.constant(v) for k, v in mentions.items()}
  np.testing.assert_array_equal(model.mention_encoder(mentions).numpy(),
                                _per_feature_mention(model.mention_encoder, mentions))
  entities = {
      schema.ENTITY_TITLE: ["Ore River", "", "Port Alder"],
      schema.ENTITY_TEXT: ["The Ore River is a river.", "Text only", ""],
      schema.ENTITY_CATEGORIES: ["Rivers|Norland", "", "Ports"],
      schema.ENTITY_ALIASES: ["Ore|River Ore", "", ""]}
  entities = {k: tf.constant(v) for k, v in entities.items()}
  np.testing.assert_array_equal(model.entity_encoder(entities).numpy(),
                                _per_feature_entity(model.entity_encoder, entities))


def test_title_and_alias_trigrams_in_one_pass_equal_each_bag_alone():
  """Issue 17: the entity tower cuts the trigrams of titles and aliases in one pass over
  2 x batch rows; each entity's name vector must be l2n(unit(title) + w unit(aliases)) of its
  own title and aliases, as when each bag is read alone, in any batch."""
  cfg = config.get_preset("tiny").model
  cfg.name_match_dim, cfg.name_match_weight, cfg.char_ngrams = 64, 0.3, True
  model = models.DualEncoder(cfg)
  model.name_match.set_document_frequencies(np.ones(model.text_featurizer.num_rows), 3)
  feat, d = model.text_featurizer, cfg.encoding_dim
  titles = ["Hypertext transfer protocol", "Port Alder", "", "Lake Ore"]
  aliases = ["HTTP|Http/1.1", "", "Only an alias", "Ore lake|Lac d'Ore|Öre"]
  features = {schema.ENTITY_TITLE: tf.constant(titles), schema.ENTITY_TEXT: tf.constant(
      ["", "A port.", "x", "A lake in Norland."]), schema.ENTITY_CATEGORIES: tf.constant(
          ["", "Ports", "", "Lakes|Norland"]), schema.ENTITY_ALIASES: tf.constant(aliases)}
  batch = model.entity_encoder(features).numpy()

  def name_vector(texts):
    grams, ids = feat.char_ngrams(featurizer.tokenize(tf.constant(texts)))
    return model.name_match(ids, grams).numpy()

  w = cfg.name_match_alias_weight
  expected = name_vector(titles) + w * name_vector(
      [t.replace(schema.CATEGORY_SEPARATOR, " ") for t in aliases])
  expected /= np.maximum(np.linalg.norm(expected, axis=1, keepdims=True), 1e-12)
  np.testing.assert_allclose(batch[:, -64:], expected * cfg.name_match_weight ** 0.5, atol=1e-6)
  for i in range(len(titles)):
    alone = model.entity_encoder({k: v[i:i + 1] for k, v in features.items()}).numpy()
    np.testing.assert_allclose(alone[0], batch[i], atol=1e-6)
  assert d + 64 <= batch.shape[1]
