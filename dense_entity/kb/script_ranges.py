"""Code point ranges of the scripts that tokenization treats specially, for RE2 and Python `re`.

The in-graph tokenizer (modeling/featurizer.py, RE2 through tf.strings.regex_replace) and the
Python 5-token windows of mention contexts (kb/mention_features.py, Python `re`, which has no
\\p{Han}) must split the same units. Both build their character classes from these ranges, so
the two agree by construction instead of by two spellings of "Han".

Ranges are inclusive (first, last) code points, from Unicode's Scripts.txt (15.1):
  - CJK_HAN: script Han (CJK radicals, Kangxi radicals, the iteration mark U+3005, U+3007,
    Hangzhou numerals, unified ideographs and extensions A-I, compatibility ideographs). Each is
    one token.
  - CJK_HIRAGANA / CJK_KATAKANA: the two kana scripts (with halfwidth and small forms, and the
    voicing marks U+3099-U+309C), plus the prolonged sound mark U+30FC (script Common, but
    part of kana words: 'コーヒー', 'らーめん') in both. A run of one of them is one token. The
    katakana middle dot U+30FB and double hyphen U+30A0 are punctuation, not kana.
"""

import sys
import unicodedata
from typing import List, Sequence, Tuple

Ranges = Sequence[Tuple[int, int]]

CJK_HAN: Ranges = (
    (0x2E80, 0x2FDF), (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF))
CJK_HIRAGANA: Ranges = ((0x3041, 0x309F), (0x30FC, 0x30FC), (0x1B001, 0x1B11F))
CJK_KATAKANA: Ranges = (
    (0x30A1, 0x30FA), (0x30FC, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0xFF66, 0xFF9F),
    (0x1B000, 0x1B000))
CJK_ALL: Ranges = tuple(CJK_HAN) + tuple(CJK_HIRAGANA) + tuple(CJK_KATAKANA)

# Zero-width (non-)joiner: inside an Indic word they choose a glyph form (Bengali 'র‍্যাব'),
# they never separate words.
ZERO_WIDTH_JOINERS = "\u200c\u200d"


def re2_class(ranges: Ranges) -> str:
  """The body of an RE2 character class ('[' + it + ']') holding `ranges`."""
  return "".join(f"\\x{{{a:04X}}}" if a == b else f"\\x{{{a:04X}}}-\\x{{{b:04X}}}"
                 for a, b in ranges)


def py_class(ranges: Ranges) -> str:
  """The body of a Python `re` character class holding `ranges` (none of them holds a character
  special inside a class)."""
  return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


def _mark_ranges() -> List[Tuple[int, int]]:
  """Ranges of the combining marks (general category M*) of Python's Unicode database: planes
  0, 1 and 14 (no other plane has any)."""
  ranges: List[Tuple[int, int]] = []
  for plane in (0, 1, 14):
    for cp in range(plane << 16, min((plane + 1) << 16, sys.maxunicode + 1)):
      if unicodedata.category(chr(cp))[0] == "M":
        if ranges and ranges[-1][1] == cp - 1:
          ranges[-1] = (ranges[-1][0], cp)
        else:
          ranges.append((cp, cp))
  return ranges


# Python `re` has no \pM: the combining marks, as ranges (about 50 ms at import).
MARK_RANGES: Ranges = tuple(_mark_ranges())

_ASTRAL = "\U00010000-\U0010FFFF"


def py_class_pattern(ranges: Ranges, extra: str = "") -> str:
  """A Python `re` pattern for one character of `ranges` or of `extra` (a class body of
  characters up to U+FFFF), the same characters as '[' + py_class(ranges) + extra + ']' and
  faster to match.

  Python's `re` looks a character up in a bitmap for a class whose characters are all up to
  U+FFFF, but tests the ranges of a class holding any beyond it one by one: the combining
  marks' class (299 ranges, 110 of them beyond U+FFFF) took 11 us to search 64 characters of
  Russian text, the class of its 189 ranges up to U+FFFF 0.43 us (issue 17). Here the ranges
  up to U+FFFF form one class and those beyond are tried only for a character beyond U+FFFF.
  """
  low, high = _split_at_ffff(ranges)
  low_class = f"[{py_class(low)}{extra}]" if low or extra else ""
  high_class = f"(?=[{_ASTRAL}])[{py_class(high)}]" if high else ""
  if not (low_class and high_class):
    return low_class or high_class or "[^\\s\\S]"  # nothing: a class no character is in
  return f"(?:{low_class}|{high_class})"


def _split_at_ffff(ranges: Ranges) -> Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]:
  """`ranges` as (those up to U+FFFF, those beyond), a range across U+FFFF cut there."""
  low, high = [], []
  for first, last in ranges:
    if first <= 0xFFFF:
      low.append((first, min(last, 0xFFFF)))
    if last > 0xFFFF:
      high.append((max(first, 0x10000), last))
  return low, high


# One combining mark or ZWJ/ZWNJ (the characters that go on inside a word of any script), as a
# Python `re` pattern (py_class_pattern).
PY_MARK = py_class_pattern(MARK_RANGES, ZERO_WIDTH_JOINERS)


def py_word_pattern(not_in_words: str = "") -> str:
  """Python `re` alternatives for one word token in any script: a Han ideograph, a run of
  Hiragana, a run of Katakana (each with their combining marks), or a run of other word
  characters (\\w, less `not_in_words` and CJK) with combining marks and ZWJ/ZWNJ inside it, so
  an Indic word is never cut after a base letter. Text without CJK or marks: the runs of \\w+
  (less `not_in_words`). Shared by the mention contexts and BM25 (the featurizer's units)."""
  mark = PY_MARK
  hiragana, katakana = py_class_pattern(CJK_HIRAGANA), py_class_pattern(CJK_KATAKANA)
  cjk_low, cjk_high = map(py_class, _split_at_ffff(CJK_ALL))
  # \w less not_in_words and CJK: up to U+FFFF one class; beyond, \w not in CJK's ranges.
  not_cjk_high = f"(?![{cjk_high}])" if cjk_high else ""
  word = (f"(?:[^\\W{not_in_words}{cjk_low}{_ASTRAL}]"
          f"|(?=[{_ASTRAL}]){not_cjk_high}\\w)")
  return (f"{py_class_pattern(CJK_HAN)}{mark}*"
          f"|{hiragana}(?:{hiragana}|{mark})*"
          f"|{katakana}(?:{katakana}|{mark})*"
          f"|(?:{word}|{mark})+")
