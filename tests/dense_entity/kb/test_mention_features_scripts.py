"""Sentences and 5-token contexts in Japanese, Bengali, Marathi and Greek (issue 15, item 4).

Real text from ../shared/data/otherwiki/{ja,bn,mr,el}wiki-*.
"""

import random

from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema
from dense_entity.kb.mention_features import mention_features, sentence_spans


def _sentences(text):
  return [text[a:b] for a, b in sentence_spans(text)]


def test_sentences_end_at_ideographic_full_stop_and_danda():
  assert _sentences("これは「本」。次です！終わり？") == ["これは「本」。", "次です！", "終わり？"]
  assert _sentences("বাংলা ভাষা আন্দোলন স্থাপন করেছে। ১৯৫২ খ্রিষ্টাব্দে উপন\u200d্যাস।") == [
      "বাংলা ভাষা আন্দোলন স্থাপন করেছে।", "১৯৫২ খ্রিষ্টাব্দে উপন\u200d্যাস।"]
  # Marathi writes the danda after a space, and '.' too.
  assert _sentences("एक माणूस उडतो त्याची गोष्ट । कथा युगभानाची. ग्लानिर्भवति भारत॥ शेवट") == [
      "एक माणूस उडतो त्याची गोष्ट ।", "कथा युगभानाची.", "ग्लानिर्भवति भारत॥", "शेवट"]


def test_greek_question_mark_ends_a_sentence_ascii_semicolon_only_after_greek():
  assert _sentences("Τι είναι αυτό; Είναι ο Όμηρος\u037e Ναι.") == [
      "Τι είναι αυτό;", "Είναι ο Όμηρος\u037e", "Ναι."]
  # After Latin text ';' is a semicolon: blingfire's split, unchanged.
  assert _sentences("A list; of things. Another one; here") == [
      "A list; of things.", "Another one; here"]
  # A closing quote or bracket stays with its sentence; offsets index the text.
  text = "Τον ρώτησε «ποιος είσαι;» Εκείνος σώπασε."
  assert _sentences(text) == ["Τον ρώτησε «ποιος είσαι;»", "Εκείνος σώπασε."]


def test_japanese_mention_has_five_token_contexts_and_its_sentence():
  text = "日本語の表記体系は中央語を書き表すために発達した。次の文です。"
  start = text.index("中央語")
  f = mention_features(text, start, start + 3)
  assert f[schema.MENTION_LEFT] == "表記体系は"  # 表 記 体 系 は
  assert f[schema.MENTION_RIGHT] == "を書き表すために"  # を 書 き 表 すために
  assert f[schema.MENTION_SENTENCE] == "日本語の表記体系は" + schema.MENTION_MASK + "を書き表すために発達した。"


def test_bengali_and_marathi_contexts_are_whole_words():
  text = ("১৯৪৭ থেকে ১৯৫২ খ্রিষ্টাব্দে পূর্ব বাংলায় সংগঠিত বাংলা ভাষা আন্দোলন এই ভাষার সাথে। "
          "পরের বাক্য।")
  span = "বাংলা ভাষা আন্দোলন"
  start = text.index(span)
  f = mention_features(text, start, start + len(span))
  assert f[schema.MENTION_LEFT] == "১৯৫২ খ্রিষ্টাব্দে পূর্ব বাংলায় সংগঠিত"
  # The danda is a token; contexts run on past the sentence end, as in English.
  assert f[schema.MENTION_RIGHT] == "এই ভাষার সাথে। পরের"
  assert f[schema.MENTION_SENTENCE].endswith(schema.MENTION_MASK + " এই ভাষার সাথে।")
  text = "माहिती भरण्यासाठी जी साधने वापरली जातात त्याना इनपुट डिव्हाइसेस असे म्हणतात."
  start = text.index("इनपुट")
  f = mention_features(text, start, start + len("इनपुट"))
  assert f[schema.MENTION_LEFT] == "जी साधने वापरली जातात त्याना"
  assert f[schema.MENTION_RIGHT] == "डिव्हाइसेस असे म्हणतात."


def test_ascii_token_pattern_gives_the_tokens_of_the_full_pattern_on_ascii_text():
  # Every ASCII character, control characters included ('\x1c'-'\x1f' are \s in str
  # patterns), in random strings and windows: the fast pattern matches exactly the same.
  rng = random.Random(17)
  alphabet = [chr(i) for i in range(128)] + list("ab AZ09_.,") * 8
  for _ in range(3000):
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    lo = rng.randrange(0, len(text) + 1)
    hi = rng.randrange(lo, len(text) + 1)
    fast = [m.span() for m in mention_features_lib._ASCII_TOKEN.finditer(text, lo, hi)]  # pylint: disable=protected-access
    full = [m.span() for m in mention_features_lib._TOKEN.finditer(text, lo, hi)]  # pylint: disable=protected-access
    assert fast == full, (text, lo, hi)
  # A window that is ASCII next to one that is not: the word ends where the window does.
  text = "x Jürgen Klinsmann_scored y"
  features = mention_features(text, text.index("Klinsmann"), text.index("_scored"))
  assert features[schema.MENTION_LEFT] == "x Jürgen"
  assert features[schema.MENTION_RIGHT] == "_scored y"
