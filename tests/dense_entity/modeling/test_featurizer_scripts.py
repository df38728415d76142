"""Featurizer on scripts without spaces (Japanese) and with combining marks (Bengali, Marathi).

Issue 15, item 4. The sentences are real text from ../shared/data/otherwiki/{ja,bn,mr}wiki-*.
"""

import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.kb import mention_features as mf
from dense_entity.kb import schema
from dense_entity.kb.mention_features import mention_features
from dense_entity.modeling import config
from dense_entity.modeling import featurizer
from dense_entity.modeling import models

JA = ("日本語の表記体系は中央語を書き表すために発達したものであり、方言の音韻を表記するためには"
      "必ずしも適していない。")
JA_TOKENS = ["日", "本", "語", "の", "表", "記", "体", "系", "は", "中", "央", "語", "を", "書", "き",
             "表", "すために", "発", "達", "したものであり", "、", "方", "言", "の", "音", "韻", "を",
             "表", "記", "するためには", "必", "ずしも", "適", "していない", "。"]
BN = ("১৯৪৭ থেকে ১৯৫২ খ্রিষ্টাব্দে পূর্ব বাংলায় সংগঠিত বাংলা ভাষা আন্দোলন এই ভাষার সাথে বাঙালি "
      "অস্তিত্বের যোগসূত্র স্থাপন করেছে।")
BN_TOKENS = ["১৯৪৭", "থেকে", "১৯৫২", "খ্রিষ্টাব্দে", "পূর্ব", "বাংলায়", "সংগঠিত", "বাংলা", "ভাষা",
             "আন্দোলন", "এই", "ভাষার", "সাথে", "বাঙালি", "অস্তিত্বের", "যোগসূত্র", "স্থাপন",
             "করেছে", "।"]
# ZWJ + virama inside a word (bnwiki writes 'উপন\u200d্যাস'): one token, the joiner dropped by
# case folding (NFKC_Casefold).
BN_ZWJ = "এই উপন\u200d্যাসটি সী কল\u200d্যাণী।"
BN_ZWJ_TOKENS = ["এই", "উপন্যাসটি", "সী", "কল্যাণী", "।"]
MR = "माहिती भरण्यासाठी जी साधने वापरली जातात त्याना इनपुट डिव्हाइसेस असे म्हणतात."
MR_TOKENS = ["माहिती", "भरण्यासाठी", "जी", "साधने", "वापरली", "जातात", "त्याना", "इनपुट",
             "डिव्हाइसेस", "असे", "म्हणतात", "."]

# Text without CJK tokenizes exactly as before issue 15 (the tokenizer of commit c105604):
# the ids of an already trained model must not change.
OLD_TOKENS = [
    ("AC Milan's [MASK] über-cool (1899–1900), U.S.A.; e-mail: x_y@z.org",
     ["ac", "milan", "'", "s", "[mask]", "über", "-", "cool", "(", "1899", "–", "1900", ")", ",",
      "u", ".", "s", ".", "a", ".", ";", "e", "-", "mail", ":", "x", "_", "y", "@", "z", ".",
      "org"]),
    ("Ελλάδα, ή Ελληνική Δημοκρατία; Τι είναι ο Όμηρος; ΟΔΥΣΣΕΙΑ",
     ["ελλάδα", ",", "ή", "ελληνική", "δημοκρατία", ";", "τι", "είναι", "ο", "όμηροσ", ";",
      "οδυσσεια"]),
    ("Київ — столиця України, «Категорія:Міста» 2024 р.",
     ["київ", "—", "столиця", "україни", ",", "«", "категорія", ":", "міста", "»", "2024", "р",
      "."]),
    ("Nguyễn Phú Trọng là Tổng Bí thư Đảng Cộng sản Việt Nam.",
     ["nguyễn", "phú", "trọng", "là", "tổng", "bí", "thư", "đảng", "cộng", "sản", "việt", "nam",
      "."]),
    ("Ǆemal ﬁnally straße Ⅻ ½ x²",
     ["džemal", "finally", "strasse", "xii", "1", "⁄", "2", "x2"]),
]


def _tokens(text):
  return [t.decode() for t in featurizer.tokenize(tf.constant([text])).to_list()[0]]


@pytest.mark.parametrize("text,expected", OLD_TOKENS)
def test_text_without_cjk_tokenizes_as_before(text, expected):
  assert _tokens(text) == expected


@pytest.mark.parametrize("text,expected", [(JA, JA_TOKENS), (BN, BN_TOKENS),
                                           (BN_ZWJ, BN_ZWJ_TOKENS), (MR, MR_TOKENS)])
def test_japanese_bengali_marathi_token_boundaries(text, expected):
  tokens = _tokens(text)
  assert tokens == expected
  # No token starts with a combining mark: none was cut inside a grapheme.
  assert not any(unicodedata.category(t[0]).startswith("M") for t in tokens)


def test_kana_runs_split_from_han_and_latin_and_marks_stay_attached():
  assert _tokens("コーヒーとＡＢＣ漢\ufe00字・らーめん[MASK]は東京") == [
      "コーヒー", "と", "abc", "漢", "字", "・", "らーめん", "[mask]", "は", "東", "京"]


def test_python_windows_split_the_same_units_as_the_graph():
  for text in (JA, BN, MR, "AC Milan's über-cool (1899–1900), U.S.A."):
    python_units = [m.group() for m in mf._TOKEN.finditer(text)]  # pylint: disable=protected-access
    assert len(python_units) == len(_tokens(text)), text


def test_japanese_and_bengali_mentions_through_featurizer_and_encoders():
  # Mentions of real sentences: '中央語' in the Japanese one, 'বাংলা ভাষা আন্দোলন' in the Bengali.
  ja = mention_features(JA, JA.index("中央語"), JA.index("中央語") + 3)
  bn_span = "বাংলা ভাষা আন্দোলন"
  bn = mention_features(BN, BN.index(bn_span), BN.index(bn_span) + len(bn_span))
  assert ja[schema.MENTION_LEFT] == "表記体系は" and ja[schema.MENTION_RIGHT] == "を書き表すために"
  assert bn[schema.MENTION_LEFT] == "১৯৫২ খ্রিষ্টাব্দে পূর্ব বাংলায় সংগঠিত"
  assert bn[schema.MENTION_RIGHT] == "এই ভাষার সাথে বাঙালি অস্তিত্বের"
  feat = featurizer.TextFeaturizer(num_buckets=1000, vocabulary=["の", "は"])
  for f in (ja, bn):
    for name in schema.MENTION_FEATURES:
      unigrams, bigrams = feat(tf.constant([f[name]]))
      unigrams, bigrams = unigrams.to_list()[0], bigrams.to_list()[0]
      assert unigrams and len(bigrams) == len(unigrams) - 1, (name, f[name])
      assert all(0 <= i < feat.num_rows for i in unigrams + bigrams)
  model = models.DualEncoder(config.get_preset("tiny").model)
  mentions = model.mention_encoder(
      {n: tf.constant([ja[n], bn[n]]) for n in schema.MENTION_FEATURES})
  entities = model.entity_encoder({schema.ENTITY_TITLE: tf.constant(["中央語", "বাংলা ভাষা আন্দোলন"]),
                                   schema.ENTITY_TEXT: tf.constant([JA, BN]),
                                   schema.ENTITY_CATEGORIES: tf.constant(["日本語", "ভাষা"])})
  for out in (mentions, entities):
    assert out.shape[0] == 2 and np.all(np.isfinite(out.numpy()))


# Issue 17: `tokenize` pads the kept delimiters by one regex_replace and splits on whitespace
# instead of calling tf_text.regex_split (featurizer.tokenize_reference); the tokens must stay
# the same or a trained model's ids would change.
EDGE_CASES = [
    "a\vb", "a \v b\v", "a\x00b c", "a\vb\x00\vc", "\x00", "a\x00", "x\u2028y\u2029z",
    "\u0301abc", "a,\u0301b", "漢\u0301字", "カタカナ\u3099ひら", "ab[MASK]cd", "[mask]",
    "[MASK][mask]", "[ma sk]", "  ", "", "\t\n\r\f", "a  b\t\tc", "ｆｕｌｌ　ｗｉｄｔｈ",
    "İstanbul ß ﬁ", "x\u00a0y\u0085z", "😀👍🏽 e\u0301", "\u200d\u200c", "ﾊﾝｶｸ ｶﾞ",
    "a\x1cb\x1dc\x1ed\x1fe", "a\x7fb", "\x0b\x0b", "p\u3000q", "a\u180eb\u1680c\u2009d\u200be",
    "end with space ", " lead", "...!!", "a.b,c;d", "x--y", "1,000.5%", "’quoted’ «x»",
]


def _regex_split_tokens(texts):
  return featurizer.tokenize_reference(tf.constant(texts)).to_list()


def _real_lines(per_source=300):
  """Lines of the real dumps (9 languages) and of the AIDA sentences."""
  import bz2  # pylint: disable=g-import-not-at-top
  import glob  # pylint: disable=g-import-not-at-top
  import itertools  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from tests import testutil  # pylint: disable=g-import-not-at-top
  lines = []
  for path in sorted(glob.glob(testutil.shared_data("otherwiki", "*.xml.bz2"))):
    with bz2.open(path, "rt", encoding="utf-8", errors="replace") as f:
      lines += [line.rstrip("\n") for line in itertools.islice(f, 2000, 2000 + per_source)]
  path = testutil.shared_data("eval", "aida", "aida_testa.jsonl")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in itertools.islice(f, 20):
        lines += json.loads(line)["text"].split(" . ")
  return lines


def test_tokenize_equals_regex_split_on_edge_cases():
  assert featurizer.tokenize(tf.constant(EDGE_CASES)).to_list() == _regex_split_tokens(
      EDGE_CASES)


def test_tokenize_equals_regex_split_on_real_lines():
  lines = _real_lines()
  if len(lines) < 1000:
    pytest.skip("../shared/data (otherwiki dumps, AIDA) not found")
  assert featurizer.tokenize(tf.constant(lines)).to_list() == _regex_split_tokens(lines)


def test_flat_features_equal_featurize():
  f = featurizer.TextFeaturizer(1 << 12, vocabulary=["the", "sea"])
  texts = ["The Ore River meets the sea.", "", "one", "  ", "a b c d"] + EDGE_CASES
  tokens, unigrams, bigrams = f.featurize(tf.constant(texts))
  flat = f.flat_features(tf.constant(texts))
  assert flat.tokens.numpy().tolist() == tokens.flat_values.numpy().tolist()
  assert flat.counts.numpy().tolist() == tokens.row_lengths().numpy().tolist()
  assert flat.unigram_ids.numpy().tolist() == unigrams.flat_values.numpy().tolist()
  assert flat.bigram_ids.numpy().tolist() == bigrams.flat_values.numpy().tolist()
  assert flat.bigram_rowids.numpy().tolist() == bigrams.value_rowids().numpy().tolist()


# Issue 17: character trigrams are cut by Substr out of each wrapped token (char_ngrams_flat)
# instead of unicode_split + tf_text.ngrams over ragged tensors (char_ngrams_reference); the
# trigrams and their ids must stay the same, or a trained model's name rows would change.
INVALID_UTF8 = [b"\xff\xfeabc", b"ab\xc3", b"\xe2\x82 x y", b"\x80\x80\x80\x80", b"ok \xed\xa0\x80"]


def _trigrams_both_ways(texts):
  f = featurizer.TextFeaturizer(1 << 20)
  tokens = featurizer.tokenize(tf.constant(texts))
  new_grams, new_ids = f.char_ngrams(tokens)
  old_grams, old_ids = f.char_ngrams_reference(tokens)
  return (new_grams.to_list(), new_ids.to_list()), (old_grams.to_list(), old_ids.to_list())


def test_char_trigrams_of_a_name():
  f = featurizer.TextFeaturizer(1 << 20)
  grams, ids = f.char_ngrams(featurizer.tokenize(tf.constant(["Zug", "", "Jürgen ab"])))
  p = "\x01".encode()
  assert grams.to_list() == [[p + b"<zu", p + b"zug", p + b"ug>"], [],
                             [p + b"<ju", p + b"jur", p + b"urg", p + b"rge", p + b"gen",
                              p + b"en>", p + b"<ab", p + b"ab>"]]
  assert ids.to_list()[0] == [int(x) for x in tf.strings.to_hash_bucket_fast(
      [p + b"<zu", p + b"zug", p + b"ug>"], 1 << 20)]


def test_char_trigrams_equal_reference_on_edge_cases_and_invalid_utf8():
  texts = EDGE_CASES + INVALID_UTF8 + ["a", "ab", "x y z", "漢字 カナ", "e\u0301\u0301e"]
  new, old = _trigrams_both_ways(texts)
  assert new == old
  assert sum(len(row) for row in new[0]) > 100


def test_char_trigrams_equal_reference_on_real_lines():
  lines = _real_lines()
  if len(lines) < 1000:
    pytest.skip("../shared/data (otherwiki dumps, AIDA) not found")
  new, old = _trigrams_both_ways(lines)
  assert new == old


def test_char_trigrams_flat_rows_and_counts():
  f = featurizer.TextFeaturizer(1 << 20)
  flat = f.flat_features(tf.constant(["ab cde", "", "xy"]))
  grams = f.char_ngrams_flat(flat.tokens, flat.rowids, tf.constant(4, tf.int64))
  # 'ab' -> <ab ab>; 'cde' -> <cd cde de>; row 1 empty; 'xy' -> <xy xy>; row 3 beyond the texts.
  assert grams.rowids.numpy().tolist() == [0, 0, 0, 0, 0, 2, 2]
  assert grams.counts.numpy().tolist() == [5, 0, 2, 0]
  assert grams.grams.numpy().tolist()[2:5] == [b"\x01<cd", b"\x01cde", b"\x01de>"]
