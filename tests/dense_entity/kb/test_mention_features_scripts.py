"""Sentences and 5-token contexts in Japanese, Bengali, Marathi and Greek (issue 15, item 4).

Real text from ../shared/data/otherwiki/{ja,bn,mr,el}wiki-*.
"""

import random
import re

from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema
from dense_entity.kb import script_ranges
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
  # The token that _n_tokens repeats on ASCII windows, matched alone.
  ascii_token = re.compile(mention_features_lib._ASCII_TOKEN_PATTERN)  # pylint: disable=protected-access
  rng = random.Random(17)
  alphabet = [chr(i) for i in range(128)] + list("ab AZ09_.,") * 8
  for _ in range(3000):
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    lo = rng.randrange(0, len(text) + 1)
    hi = rng.randrange(lo, len(text) + 1)
    fast = [m.span() for m in ascii_token.finditer(text, lo, hi)]
    full = [m.span() for m in mention_features_lib._TOKEN.finditer(text, lo, hi)]  # pylint: disable=protected-access
    assert fast == full, (text, lo, hi)
  # A window that is ASCII next to one that is not: the word ends where the window does.
  text = "x Jürgen Klinsmann_scored y"
  features = mention_features(text, text.index("Klinsmann"), text.index("_scored"))
  assert features[schema.MENTION_LEFT] == "x Jürgen"
  assert features[schema.MENTION_RIGHT] == "_scored y"


def _reference_cuts(text, floor, pos, end, ceiling, n):
  """The 5-token window ends by the definition: every token of the span's line within
  [floor, pos) and [end, ceiling), from _TOKEN over the whole range (no window)."""
  token = mention_features_lib._TOKEN  # pylint: disable=protected-access
  line_start = text.rfind("\n", floor, pos) + 1 or floor
  line_end = text.find("\n", end, ceiling)
  line_end = ceiling if line_end < 0 else line_end
  starts = [m.start() for m in token.finditer(text, max(floor, line_start), pos)]
  ends = [m.end() for m in token.finditer(text, end, line_end)]
  left = pos if not starts else starts[-n] if len(starts) >= n else starts[0]
  right = end if not ends else ends[min(n, len(ends)) - 1]
  return left, right


def _assert_random_cuts_match_reference(rng, text, n):
  """_left_cut and _right_cut of a random span, floor and ceiling of `text` are the cuts of
  tokenizing the whole line (_reference_cuts)."""
  pos = rng.randrange(0, len(text) + 1)
  end = rng.randrange(pos, len(text) + 1)
  floor = rng.randrange(0, pos + 1)
  ceiling = rng.randrange(end, len(text) + 1)
  want = _reference_cuts(text, floor, pos, end, ceiling, n)
  got = (mention_features_lib._left_cut(text, floor, pos, n, stop_at_newline=True),  # pylint: disable=protected-access
         mention_features_lib._right_cut(text, end, ceiling, n, stop_at_newline=True))  # pylint: disable=protected-access
  assert got == want, (text, floor, pos, end, ceiling, n)


def test_context_cuts_match_tokenizing_the_whole_line_in_every_script():
  """Issue 17: the left cut reads its window backwards (n searches in the reversed window,
  doubled until its n-th token is whole) and the right cut makes n searches; CJK windows
  are tokenized forwards. Both give the cuts of tokenizing the whole line, in texts mixing
  ASCII, Greek, Bengali (marks inside words), ZWJ, '_', Han with marks, Hiragana and
  Katakana runs, newlines, and words longer than the first window."""
  rng = random.Random(23)
  pieces = ["word", "x", "Jürgen", "Αθήνα;", "খ্রিষ্টাব্দে", "भरण्यासाठी", "a\u200db", "_", "__",
            "日本", "漢\u0301字", "かな\u3099", "カタカナ", "(", ".", "—", "\n", " ", "  ",
            "y" * 90, "Ω" * 70, "e\u0301" * 40]
  for _ in range(1500):
    text = "".join(rng.choice(pieces) + rng.choice(["", " ", " ", "\n"])
                   for _ in range(rng.randrange(1, 40)))
    _assert_random_cuts_match_reference(rng, text, rng.choice([1, 2, 5, 7]))


def test_ascii_context_cuts_in_one_match_are_those_of_the_whole_line():
  """The cuts of an ASCII window come from one or two matches of n possessive tokens
  (_n_tokens), not n searches: the same cuts as tokenizing the whole line, with every
  ASCII character ('\\x1c'-'\\x1f' and '\\x0b' are whitespace), words longer than the first
  window, fewer tokens than n, and n from 1 to 8."""
  rng = random.Random(31)
  alphabet = [chr(i) for i in range(128)] + list("ab AZ09_.,  ") * 10
  for _ in range(4000):
    text = "".join(rng.choice(alphabet) if rng.random() < 0.95 else "w" * 80
                   for _ in range(rng.randrange(1, 60)))
    _assert_random_cuts_match_reference(rng, text, rng.randrange(1, 9))


def _all_code_points():
  return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_class_patterns_match_the_characters_of_their_plain_classes():
  """script_ranges.py_class_pattern (the ranges up to U+FFFF in one class, those beyond tried
  only for a character beyond U+FFFF) matches exactly the characters of the one plain class
  it replaces, over every code point: the marks (with ZWJ/ZWNJ), Han, the kana, all of CJK."""
  text = _all_code_points()
  cases = [(script_ranges.MARK_RANGES, script_ranges.ZERO_WIDTH_JOINERS),
           (script_ranges.CJK_HAN, ""), (script_ranges.CJK_HIRAGANA, ""),
           (script_ranges.CJK_KATAKANA, ""), (script_ranges.CJK_ALL, ""), ((), "ab"),
           (((0x10000, 0x10010), (0x1F600, 0x1F64F)), ""), (((0x10000, 0x10010),), "ab")]
  for ranges, extra in cases:
    plain = re.compile(f"[{script_ranges.py_class(ranges)}{extra}]")
    fast = re.compile(script_ranges.py_class_pattern(ranges, extra))
    want = [m.start() for m in plain.finditer(text)]
    assert want, ranges
    assert [m.start() for m in fast.finditer(text)] == want, ranges
  # No range and nothing extra: no character (a class that compiles).
  assert not re.compile(script_ranges.py_class_pattern(())).search(text)
  # A range across U+FFFF is split there, both halves kept.
  fast = re.compile(script_ranges.py_class_pattern([(0xFFF0, 0x10010)]))
  assert [len(fast.findall(c)) for c in ("\ufff0", "\uffff", "\U00010000", "\U00010010",
                                          "\U00010011", "\uffef")] == [1, 1, 1, 1, 0, 0]


def _plain_token_pattern():
  """_TOKEN as it was spelled before issue 17: each class one plain class (its marks' 299
  ranges scanned one by one for every character tested)."""
  sr = script_ranges
  marks = sr.py_class(sr.MARK_RANGES) + sr.ZERO_WIDTH_JOINERS
  hiragana, katakana = sr.py_class(sr.CJK_HIRAGANA), sr.py_class(sr.CJK_KATAKANA)
  return re.compile(f"[{sr.py_class(sr.CJK_HAN)}][{marks}]*"
                    f"|[{hiragana}][{hiragana}{marks}]*"
                    f"|[{katakana}][{katakana}{marks}]*"
                    f"|(?:[^\\W_{sr.py_class(sr.CJK_ALL)}]|[{marks}])+|[^\\w\\s]|_")


def test_token_pattern_splits_as_the_plain_class_spelling_on_every_code_point():
  """_TOKEN with fast classes gives the tokens of its plain spelling: every code point after a
  letter; 30,000 random ones alone, before a letter, after a Han ideograph, a kana and a mark,
  before a mark; and random strings."""
  plain, token = _plain_token_pattern(), mention_features_lib._TOKEN  # pylint: disable=protected-access
  rng = random.Random(41)
  code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
  some = "".join(map(chr, rng.sample(code_points, 30000)))
  for fmt, text in (("a{}", _all_code_points()), ("{}", some), ("{}a", some), ("日{}", some),
                    ("か{}", some), ("カ{}", some), ("a\u0301{}", some), ("{}\u0301", some),
                    ("{}\U0001D165", some)):
    joined = " ".join(fmt.format(c) for c in text)
    assert [m.span() for m in token.finditer(joined)] == [
        m.span() for m in plain.finditer(joined)], fmt
  for _ in range(3000):
    s = "".join(chr(rng.choice(code_points)) if rng.random() < 0.3
                else rng.choice("ab  \u0301\u093f\u200d_.日か\U00020000\U0001B001")
                for _ in range(rng.randrange(1, 30)))
    assert [m.span() for m in token.finditer(s)] == [m.span() for m in plain.finditer(s)], s


def test_non_ascii_context_cuts_in_one_match_are_those_of_the_whole_line():
  """Windows that are not ASCII but hold no CJK character take their cuts from one or two
  matches of n atomic tokens (_n_tokens); the right cut keeps its match only where the text
  it took has no CJK. The same cuts as tokenizing the whole line: random text of words in
  several scripts, marks alone and inside words (a mark before any letter, which a search
  could read as a word or as punctuation), ZWJ, '_', symbols and digits of other scripts,
  characters beyond U+FFFF, CJK next to other words, fewer tokens than n."""
  rng = random.Random(43)
  alphabet = (list("Jürgen Αθήνα; Москва́ — খ্রিষ্টাব্দে भरण्यासाठी") + [
      "\u0301", "\u093f", "\u200d", "\u200c", "_", "²", "٣", "\U0001D400", "\U0001D165",
      "\U00010000", "日", "か", "カ", "\U00020000", "\n", " ", " ", "\u00a0", "\u2003", "w" * 70,
      "Ω" * 70, "(", "،", "¿"])
  for _ in range(4000):
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60)))
    _assert_random_cuts_match_reference(rng, text, rng.randrange(1, 9))


def test_cjk_windows_count_only_tokens_after_a_break_at_their_edge():
  """A window tokenized forwards from inside a token: a voicing mark U+3099 (a mark and
  Hiragana) or a prolonged sound mark U+30FC (Hiragana and Katakana) at its edge starts a
  token there, and the word or kana run after it one more, where the line has one token; the
  window's tokens count only from the first character no token goes on over (found by a
  fresh-clone check: these cuts were 11 before, the line's token starts at 0)."""
  for text, want in (("a" * 10 + "\u3099" + "w" * 63, 0), ("カ" * 10 + "ー" + "カ" * 63, 0),
                     ("カ" * 10 + "\u3099" + "カ" * 63, 0),
                     ("か" * 10 + "ー" + "カ" * 63, 11)):  # a Hiragana run takes U+30FC
    assert mention_features_lib._left_cut(text, 0, len(text), 1, stop_at_newline=True) == want  # pylint: disable=protected-access
    assert _reference_cuts(text, 0, len(text), len(text), len(text), 1)[0] == want
  text = "日本 " + "a" * 10 + "\u3099" + "w" * 63
  assert mention_features_lib._left_cut(text, 0, len(text), 1, stop_at_newline=True) == 3  # pylint: disable=protected-access
  assert mention_features_lib._left_cut(text, 0, len(text), 2, stop_at_newline=True) == 1  # pylint: disable=protected-access
  rng = random.Random(47)
  pieces = ["\u3099", "\u309a", "ー", "\u309b", "\u0301", "カ", "か", "日", "w", "_", " ", "。",
            "w" * 58, "カ" * 58, "か" * 58, "日" * 30, "\U0001B001", "\u3000"]
  for _ in range(3000):
    text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
    pos = rng.randrange(0, len(text) + 1)
    floor = rng.randrange(0, pos + 1)
    n = rng.randrange(1, 7)
    want = _reference_cuts(text, floor, pos, pos, pos, n)[0]
    got = mention_features_lib._left_cut(text, floor, pos, n, stop_at_newline=True)  # pylint: disable=protected-access
    assert got == want, (text, floor, pos, n)
