"""In-graph text featurization: tokens, unigram ids and hashed bigram ids (tensorflow-text).

Gillick et al. (2019), section 4.1: every text feature is a bag of unigrams and bigrams; unigrams
in the vocabulary (GloVe's, when given) get their own row of the shared embedding table, and
out-of-vocabulary unigrams and all bigrams are hashed into `num_buckets` rows after the vocabulary.
Row layout of the shared table: [0, V) vocabulary words, [V, V + num_buckets) hash buckets.

Everything here is TensorFlow ops, so training, the Beam pipelines and the exported SavedModels
featurize with the same graph; nothing in Python re-implements it. Hashing uses
`tf.strings.to_hash_bucket_fast` (FarmHash Fingerprint64), stable across processes and machines,
never Python's `hash()`.
"""

import re
from typing import NamedTuple, Optional, Sequence, Tuple

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from dense_entity.kb import schema
from dense_entity.kb import script_ranges
from dense_entity.modeling import layers

# Tokens: runs of letters/digits/marks, or any other single non-space character; the mention
# mask symbol stays one token. Applied after case folding, so the mask is matched lower-cased.
#
# Scripts written without spaces between words (issue 15, item 4): each Han ideograph is one token,
# and each run of Hiragana or of Katakana is one token, split from the Han and Latin around it
# (BERT's basic tokenizer makes every CJK ideograph a token; the kana runs are the script-change
# split of tf_text.UnicodeScriptTokenizer). A Japanese clause, one token of up to hundreds of
# characters before issue 15 (unique, so its unigram was a lone hash bucket and it had no bigram),
# is now one token per kanji and per kana run
# ('中央語を書き表すために' -> 中 央 語 を 書 き 表 すために), whose unigrams and bigrams
# recur across texts. Combining marks (a variation selector, a voicing mark) stay on their base
# character. The ranges are written out (script_ranges.CJK_*), not RE2's \p{Han}, so that
# kb/mention_features.py splits the same units with Python's `re`.
#
# Every alternative added here matches only characters of those ranges: text without them (English,
# Latin, Cyrillic, Greek, Indic, ...) tokenizes exactly as before, so the ids of an existing model
# do not change (checked on 27,418 real lines of the bn, el, hy, mr, uk, vi dumps and wikitext_en:
# no token differs on a line without CJK). An exported SavedModel keeps the patterns it was exported
# with (they are graph constants). Indic scripts need nothing new: vowel signs and virama are \pM,
# part of the word run, and case_fold_utf8 (NFKC_Casefold) deletes ZWJ/ZWNJ, so no token is cut
# inside a grapheme. Thai, Lao, Khmer and Myanmar (no spaces between words either, but words of
# several clusters: splitting them needs a dictionary) are left as they were: a run between spaces
# or punctuation is one token.
_MASK = schema.MENTION_MASK.lower().replace("[", r"\[").replace("]", r"\]")
_PUNCT = r"[^\pL\pN\pM\s]"
_HAN = "[" + script_ranges.re2_class(script_ranges.CJK_HAN) + r"]\pM*"
_HIRAGANA = "[" + script_ranges.re2_class(script_ranges.CJK_HIRAGANA) + r"](?:[" + (
    script_ranges.re2_class(script_ranges.CJK_HIRAGANA) + r"]|\pM)*")
_KATAKANA = "[" + script_ranges.re2_class(script_ranges.CJK_KATAKANA) + r"](?:[" + (
    script_ranges.re2_class(script_ranges.CJK_KATAKANA) + r"]|\pM)*")
_CJK = _HAN + "|" + _HIRAGANA + "|" + _KATAKANA
DELIM_PATTERN = _MASK + "|" + _CJK + "|" + _PUNCT + r"|\s+"
KEEP_DELIM_PATTERN = _MASK + "|" + _CJK + "|" + _PUNCT

BIGRAM_SEPARATOR = " "
# N-gram widths are constants of the model, not user input.
NGRAM_WIDTH = 2
CHAR_NGRAM_WIDTH = 3
# Character n-grams of a token are taken over '<' + token + '>' (boundaries, as fastText does)
# and hashed with this prefix, so the n-gram 'the' and the word 'the' get different buckets.
_CHAR_NGRAM_PREFIX = "\x01"


def alias_text(aliases: tf.Tensor) -> tf.Tensor:
  """'|'-joined aliases (schema.ENTITY_ALIASES as tf.data reads it) -> one text of them, the
  separators made spaces, so `tokenize` splits between aliases. tf.string `[batch]`."""
  return tf.strings.regex_replace(aliases, re.escape(schema.CATEGORY_SEPARATOR), " ")


class FlatTokens(NamedTuple):
  """Tokens of a batch of strings, flat: `tokens` tf.string `[n]` in order, `rowids` int64
  `[n]` (the string of each token; sorted), `counts` int64 `[batch]` (tokens per string)."""
  tokens: tf.Tensor
  rowids: tf.Tensor
  counts: tf.Tensor


def tokenize_flat(texts: tf.Tensor) -> FlatTokens:
  """`tokenize` without building a ragged tensor (the encoders' one pass, issue 17)."""
  texts = tf.convert_to_tensor(texts, tf.string)
  # NFKC, then case folding, in one op: case_fold_utf8 is ICU's NFKC_Casefold, which
  # normalizes to NFKC itself (same output with and without NFKC first on 46k real lines and on
  # every code point up to U+2FFFF; tokenize_reference below does both).
  texts = tf_text.case_fold_utf8(texts)
  # The tokens of tokenize_reference, in fewer and cheaper ops (issue 17: regex_split made one
  # RE2 search with a capture group per delimiter, every space included, and was half the
  # encoders' op time). Each kept delimiter (mask, CJK unit, punctuation) is matched by one
  # global replace that pads it with spaces, so one split on whitespace yields the word runs and
  # the kept delimiters; a kept delimiter never holds nor borders on a match of another, so the
  # matches are the same as regex_split's. The split (StringSplitV2: ASCII whitespace) sees RE2's
  # \s = [\t\n\f\r ] as spaces, and also \v, punctuation to RE2: \v is carried through as NUL
  # and restored in the tokens. regex_split reads each string up to its first NUL (a C string),
  # so the text from a NUL on is dropped first, which also frees NUL for \v. Identical tokens on
  # the lines above (tests/dense_entity/modeling/test_featurizer_scripts.py checks real lines and
  # edge cases against tokenize_reference).
  texts = tf.strings.regex_replace(texts, r"(?s:\x00.*)", "")
  texts = tf.strings.regex_replace(texts, r"\v", "\x00")
  texts = tf.strings.regex_replace(texts, KEEP_DELIM_PATTERN, r" \0 ")
  indices, tokens, _ = tf.raw_ops.StringSplitV2(input=texts, sep="")
  rowids = indices[:, 0]
  # The raw op: tf.math.bincount adds seven ops of argument checks (per-op overhead is most of a
  # single mention's time).
  counts = tf.raw_ops.DenseBincount(input=rowids, size=tf.size(texts, out_type=tf.int64),
                                    weights=tf.zeros([0], tf.int64))
  # NUL, punctuation to the pattern, is always a token of its own: a compare, not a regex.
  return FlatTokens(tf.where(tokens == "\x00", "\v", tokens), rowids, counts)


def tokenize(texts: tf.Tensor) -> tf.RaggedTensor:
  """Normalizes (NFKC, case folding) and tokenizes strings.

  Args:
    texts: tf.string `[batch]`.

  Returns:
    tf.string ragged `[batch, (tokens)]`; '' and whitespace-only strings give no tokens.
  """
  flat = tokenize_flat(texts)
  return tf.RaggedTensor.from_row_lengths(flat.tokens, flat.counts, validate=False)


def tokenize_reference(texts: tf.Tensor) -> tf.RaggedTensor:
  """`tokenize` as it was defined before issue 17, by tf_text.regex_split (slow: one RE2 search
  per delimiter); the tests hold `tokenize` to it, so a trained model's ids stay the same."""
  texts = tf_text.normalize_utf8(tf.convert_to_tensor(texts, tf.string), "NFKC")
  texts = tf_text.case_fold_utf8(texts)
  return tf_text.regex_split(texts, DELIM_PATTERN, KEEP_DELIM_PATTERN)


def bigrams(tokens: tf.RaggedTensor) -> tf.RaggedTensor:
  """Returns adjacent token pairs joined by a space, ragged `[batch, (tokens - 1)]`."""
  return tf_text.ngrams(tokens, NGRAM_WIDTH, reduction_type=tf_text.Reduction.STRING_JOIN,
                        string_separator=BIGRAM_SEPARATOR)


class FlatFeatures(NamedTuple):
  """`FlatTokens` of a batch with their unigram ids (int64 `[n]`), and the bigram ids and rows
  of the bigrams of every string in order (int64 `[sum(max(counts - 1, 0))]` each; rows
  sorted)."""
  tokens: tf.Tensor
  rowids: tf.Tensor
  counts: tf.Tensor
  unigram_ids: tf.Tensor
  bigram_ids: tf.Tensor
  bigram_rowids: tf.Tensor


class FlatCharNgrams(NamedTuple):
  """Character trigrams of flat tokens (`TextFeaturizer.char_ngrams_flat`): `grams` tf.string
  `[m]` (prefixed), `ids` int64 `[m]` (rows of the shared table), `rowids` int64 `[m]` (the row
  of each trigram; sorted), `counts` int64 `[rows]` (trigrams per row)."""
  grams: tf.Tensor
  ids: tf.Tensor
  rowids: tf.Tensor
  counts: tf.Tensor


@keras.saving.register_keras_serializable(package="dense_entity")
class TextFeaturizer(keras.layers.Layer):
  """Maps strings to unigram and bigram row ids of the shared embedding table.

  Args:
    num_buckets: hash buckets after the vocabulary (paper: 5M).
    vocabulary: words with their own rows, in row order (no duplicates); None or [] to hash
      every unigram.

  Call:
    texts: tf.string `[batch]`.
    Returns (unigram_ids, bigram_ids): int64 ragged `[batch, (tokens)]` and
    `[batch, (tokens - 1)]`, values in [0, len(vocabulary) + num_buckets).
  """

  def __init__(self, num_buckets: int, vocabulary: Optional[Sequence[str]] = None, **kwargs):
    super().__init__(trainable=False, **kwargs)
    if num_buckets <= 0:
      raise ValueError(f"num_buckets must be positive, got {num_buckets}")
    self.num_buckets = int(num_buckets)
    self.vocabulary = list(vocabulary or [])
    if len(set(self.vocabulary)) != len(self.vocabulary):
      raise ValueError("vocabulary has duplicate words")
    self._table = None
    if self.vocabulary:
      self._table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(
              tf.constant(self.vocabulary, tf.string),
              tf.range(len(self.vocabulary), dtype=tf.int64)),
          default_value=-1)

  @property
  def vocab_size(self) -> int:
    return len(self.vocabulary)

  @property
  def num_rows(self) -> int:
    """Rows of the shared embedding table: vocabulary + hash buckets."""
    return self.vocab_size + self.num_buckets

  def _hashed(self, strings: tf.Tensor) -> tf.Tensor:
    return self.vocab_size + tf.strings.to_hash_bucket_fast(strings, self.num_buckets)

  def _unigram_ids_flat(self, tokens: tf.Tensor) -> tf.Tensor:
    hashed = self._hashed(tokens)
    if self._table is None:
      return hashed
    ids = self._table.lookup(tokens)
    return tf.where(ids >= 0, ids, hashed)

  def unigram_ids(self, tokens: tf.RaggedTensor) -> tf.RaggedTensor:
    return tf.ragged.map_flat_values(self._unigram_ids_flat, tokens)

  def flat_features(self, texts) -> "FlatFeatures":
    """`featurize`, flat: the towers' one pass over all their text features (issue 17)."""
    flat = tokenize_flat(texts)
    tokens, rowids = flat.tokens, flat.rowids
    # Every pair of adjacent tokens is joined and hashed, then the pairs of one string are kept
    # (as `bigrams` makes them within each string).
    pairs = tf.strings.join([tokens[:-1], tokens[1:]], separator=BIGRAM_SEPARATOR)
    same_row = tf.where(rowids[:-1] == rowids[1:])[:, 0]
    return FlatFeatures(tokens, rowids, flat.counts, self._unigram_ids_flat(tokens),
                        tf.gather(self._hashed(pairs), same_row), tf.gather(rowids, same_row))

  def call(self, texts) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
    return self.featurize(texts)[1:]

  def featurize(self, texts) -> Tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """Returns (tokens, unigram_ids, bigram_ids) of tf.string `[batch]` texts."""
    texts = tf.convert_to_tensor(texts, tf.string)
    tokens = tokenize(texts)
    return (tokens, self.unigram_ids(tokens),
            tf.ragged.map_flat_values(self._hashed, bigrams(tokens)))

  def char_ngrams(self, tokens: tf.RaggedTensor) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Character trigrams of each token and their rows, for names (not in the paper).

    A token is accent-folded (NFKD, combining marks dropped: 'jürgen' and 'jurgen' share
    their trigrams), wrapped as '<token>' and cut into overlapping trigrams ('<zu', 'zug',
    'ug>'), hashed into the same buckets as bigrams (prefixed, so the trigram 'the' and the
    word 'the' differ). Words never seen in training still share trigrams with words that
    were (Bojanowski et al. 2017, fastText's subword vectors).

    Args:
      tokens: tf.string ragged `[batch, (tokens)]` (`tokenize`).

    Returns:
      (trigrams tf.string ragged `[batch, (trigrams)]` (prefixed), int64 ragged row ids of the
      shared table, same shape).
    """
    flat = self.char_ngrams_flat(tokens.flat_values, layers.value_rowids(tokens),
                                 tokens.nrows(out_type=tf.int64))
    return (tf.RaggedTensor.from_row_lengths(flat.grams, flat.counts, validate=False),
            tf.RaggedTensor.from_row_lengths(flat.ids, flat.counts, validate=False))

  def char_ngrams_flat(self, tokens: tf.Tensor, rowids: tf.Tensor,
                       num_rows: tf.Tensor) -> "FlatCharNgrams":
    """`char_ngrams` of flat tokens, without ragged tensors (issue 17).

    Each trigram is cut by one `Substr` (3 characters from its position) out of its wrapped
    token, positions from one `RaggedRange`: about 20 ops where the ragged path of
    `char_ngrams_reference` (unicode_split, tf_text.ngrams' sliding window) takes 70, which at
    a few microseconds of executor time each was a fifth of a single mention's call. Same
    trigrams in the same order (checked against `char_ngrams_reference` by the tests).

    Args:
      tokens: tf.string `[n]` (`tokenize_flat`'s tokens: normalized, valid UTF-8).
      rowids: int64 `[n]`, sorted: the row of each token.
      num_rows: int64 scalar, rows in all (rows without tokens get no trigrams).

    Returns:
      FlatCharNgrams: trigrams tf.string `[m]` (prefixed), their ids int64 `[m]`, their rows
      int64 `[m]` (sorted) and the trigrams per row int64 `[num_rows]`.
    """
    folded = tf.strings.regex_replace(tf_text.normalize_utf8(tokens, "NFKD"), r"\p{Mn}", "")
    # Invalid UTF-8 (passed through by case folding and normalization) as U+FFFD per bad byte,
    # as unicode_split decodes it in char_ngrams_reference; Substr and length count characters.
    wrapped = tf.strings.unicode_transcode(tf.strings.join(["<", folded, ">"]), "UTF-8",
                                           "UTF-8", errors="replace", replacement_char=0xFFFD)
    chars = tf.strings.length(wrapped, unit="UTF8_CHAR")
    per_token = tf.maximum(chars - (CHAR_NGRAM_WIDTH - 1), 0)
    splits, starts = tf.raw_ops.RaggedRange(starts=0, limits=per_token, deltas=1,
                                            Tsplits=tf.int64)
    token_of_gram = tf.searchsorted(splits[1:], tf.range(splits[-1]), side="right",
                                    out_type=tf.int64)
    grams = tf.strings.join([
        _CHAR_NGRAM_PREFIX,
        tf.strings.substr(tf.gather(wrapped, token_of_gram), starts,
                          tf.fill(tf.shape(starts), CHAR_NGRAM_WIDTH), unit="UTF8_CHAR")])
    counts = tf.math.unsorted_segment_sum(tf.cast(per_token, tf.int64), rowids, num_rows)
    return FlatCharNgrams(grams, self._hashed(grams), tf.gather(rowids, token_of_gram), counts)

  def char_ngrams_reference(self, tokens: tf.RaggedTensor
                            ) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """`char_ngrams` as it was computed before issue 17 (unicode_split and tf_text.ngrams over
    ragged tensors: 70 ops); the tests hold `char_ngrams` to it, so trained ids stay the same."""
    folded = tf.ragged.map_flat_values(
        lambda t: tf.strings.regex_replace(tf_text.normalize_utf8(t, "NFKD"), r"\p{Mn}", ""),
        tokens)
    wrapped = tf.ragged.map_flat_values(
        lambda t: tf.strings.join([_CHAR_NGRAM_PREFIX + "<", t, ">"]), folded)
    chars = tf.strings.unicode_split(wrapped, "UTF-8")  # [batch, (tokens), (chars)]
    # The prefix is the first character of every token: n-grams start after it.
    chars = chars[:, :, 1:]
    grams = tf_text.ngrams(chars, CHAR_NGRAM_WIDTH, axis=-1,
                           reduction_type=tf_text.Reduction.STRING_JOIN, string_separator="")
    grams = tf.ragged.map_flat_values(lambda g: tf.strings.join([_CHAR_NGRAM_PREFIX, g]),
                                      grams.merge_dims(1, 2))
    return grams, tf.ragged.map_flat_values(self._hashed, grams)

  def char_ngram_ids(self, tokens: tf.RaggedTensor) -> tf.RaggedTensor:
    """The rows of `char_ngrams(tokens)`: int64 ragged `[batch, (trigrams)]`."""
    return self.char_ngrams(tokens)[1]

  def get_config(self):
    config = super().get_config()
    config.update(num_buckets=self.num_buckets, vocabulary=self.vocabulary)
    config.pop("trainable", None)
    return config


@keras.saving.register_keras_serializable(package="dense_entity")
class CategoryFeaturizer(keras.layers.Layer):
  """Maps '|'-joined category names to hashed category ids.

  Call:
    categories: tf.string `[batch]`, names joined by `schema.CATEGORY_SEPARATOR`.
    Returns int64 ragged `[batch, (categories)]` in [0, num_buckets); '' gives none.
  """

  def __init__(self, num_buckets: int, **kwargs):
    super().__init__(trainable=False, **kwargs)
    self.num_buckets = int(num_buckets)

  def call(self, categories):
    ids, _, counts = self.flat_ids(categories)
    return tf.RaggedTensor.from_row_lengths(ids, counts, validate=False)

  def flat_ids(self, categories) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`call`, flat (issue 17: a dozen ops where the ragged split and mask took fifty).

    Returns:
      (ids int64 `[n]` in [0, num_buckets), rows int64 `[n]` (sorted), counts int64
      `[batch]`): the non-empty names of each string, in order.
    """
    categories = tf.convert_to_tensor(categories, tf.string)
    indices, names, _ = tf.raw_ops.StringSplitV2(input=categories,
                                                 sep=schema.CATEGORY_SEPARATOR)
    kept = tf.where(tf.strings.length(names) > 0)[:, 0]
    rowids = tf.gather(indices[:, 0], kept)
    counts = tf.raw_ops.DenseBincount(input=rowids, size=tf.size(categories, out_type=tf.int64),
                                      weights=tf.zeros([0], tf.int64))
    return (tf.strings.to_hash_bucket_fast(tf.gather(names, kept), self.num_buckets), rowids,
            counts)

  def get_config(self):
    config = super().get_config()
    config.update(num_buckets=self.num_buckets)
    config.pop("trainable", None)
    return config
