"""The four mention features of the paper, built from a text and a character span.

Gillick et al. (2019), section 4.1: the span text; the 5 tokens left of the span; the 5 tokens
right of it; the sentence with the span replaced by a special symbol (`schema.MENTION_MASK`).
This one function serves extraction (Beam), evaluation datasets and the `link` command, so a
mention is described the same way wherever it comes from.

Features are raw strings: tokenization for the model happens in the TF graph (featurizer.py).
Here "token" only decides where the 5-token windows start and end; the window keeps the
original characters between those tokens.
"""

import bisect
import ctypes
import functools
import re
import threading
from typing import Dict, List, Optional, Sequence, Tuple

import blingfire

from dense_entity.kb import schema
from dense_entity.kb import script_ranges

# A word (letters, digits, combining marks, ZWJ/ZWNJ) or one other non-space character: the same
# units the in-graph featurizer splits on. As there (featurizer.DELIM_PATTERN), each Han
# ideograph is one token and each run of Hiragana or of Katakana is one (with their combining
# marks), so Japanese text has 5-token windows of a few characters, not of its whole line.
# Combining marks and ZWJ/ZWNJ are part of a word: an Indic word ('খ্রিষ্টাব্দে', 'भरण्यासाठी')
# is one token, never cut after a base letter. Text without CJK, combining marks or ZWJ/ZWNJ
# (English, Cyrillic, precomposed Greek and Latin) gives the same tokens as before.
# '_' is a token of its own here (as in the graph), not part of a word.
_TOKEN = re.compile(script_ranges.py_word_pattern("_") + r"|[^\w\s]|_")
# The same tokens on ASCII text (no CJK, no marks; \w on ASCII is [A-Za-z0-9_]), matched about
# 4x faster: _n_tokens' runs of tokens on windows that are all ASCII (same flags as _TOKEN, so
# '\s' and '[^\w\s]' are the same classes).
_ASCII_TOKEN_PATTERN = r"[A-Za-z0-9]++|[^\w\s]|_"


# The same tokens on text without CJK characters (no Han ideograph, Hiragana or Katakana: every
# word is a run of word characters and marks), as a run of \w less '_' and marks.
_NON_CJK_TOKEN = r"(?:[^\W_]++|" + script_ranges.PY_MARK + r")++|[^\w\s]|_"


@functools.lru_cache(maxsize=64)
def _n_tokens(n: int, exactly: bool, ascii_only: bool) -> "re.Pattern[str]":
  """A pattern matching, from where it is matched, up to n (`exactly`: n) tokens, each after
  any whitespace: on text that is all ASCII (`ascii_only`: _ASCII_TOKEN_PATTERN) or has no CJK
  character (_NON_CJK_TOKEN), the end of its match is where n searches for a _TOKEN would end.
  In such text every character is whitespace or starts a token, so a search skips only
  whitespace; each token is an atomic group with possessive runs, so a word is never split
  into more tokens to reach n, nor matched by another alternative than a search's (Python
  3.11+). One match instead of n searches (issue 17)."""
  token = _ASCII_TOKEN_PATTERN if ascii_only else _NON_CJK_TOKEN
  return re.compile(r"(?:\s*+(?>" + token + "))" + (f"{{{n}}}" if exactly else f"{{0,{n}}}"))


# A character no token goes on over (whitespace, a Han ideograph, or a character that is neither
# a word character nor a mark nor kana): the line's tokens and those of any text starting
# before it are the same from it on (_left_cut).
_TOKEN_BREAK = re.compile(
    r"\s|" + script_ranges.py_class_pattern(script_ranges.CJK_HAN) + "|(?!" + "|".join((
        script_ranges.PY_MARK, script_ranges.py_class_pattern(script_ranges.CJK_HIRAGANA),
        script_ranges.py_class_pattern(script_ranges.CJK_KATAKANA))) + r")[^\w\s]")
_SPACE = re.compile(r"\s+")
# A CJK character (Han, Hiragana, Katakana): a window holding one is tokenized forwards
# (_left_cut).
_CJK = re.compile(script_ranges.py_class_pattern(script_ranges.CJK_ALL))
# blingfire's C sentence splitter (blingfire.text_to_sentences_and_offsets calls it too).
_BLINGFIRE_SENTENCES = blingfire.blingfire.TextToSentencesWithOffsets


# Sentence ends blingfire's model does not know (it splits 'A. B' and '。' already, not these):
# the danda '।' and double danda '॥' (Devanagari, also used in Bengali; Marathi and Hindi
# write '.' too), the ideographic full stop '。' and fullwidth '！' '？', and the Greek question
# mark: U+037E always, and ASCII ';' when the letter before it is Greek (Greek text nearly
# always types the question mark as ';' -- U+037E is canonically equivalent to it -- and uses
# '·' for a semicolon; after Latin or other text ';' stays a semicolon, and a Greek word
# followed by a semicolon inside an English sentence is split there, a documented limit).
# Closing quotes and brackets after the mark stay in its sentence.
_GREEK_LETTER = "\u0370-\u03ff\u1f00-\u1fff"
_CLOSERS = "[\"'\u2019\u201d\u00bb)\\]\uff09\u300d\u300f\u3011]*"
_EXTRA_SENTENCE_END = re.compile(
    f"(?:[\u0964\u0965\u3002\uff01\uff1f\u037e]|(?<=[{_GREEK_LETTER}]);(?={_CLOSERS}(?:\\s|$)))"
    + _CLOSERS)

# The characters a match of _EXTRA_SENTENCE_END starts with: a line without any is not split
# further (one search per line instead of one per sentence).
_EXTRA_SENTENCE_END_START = re.compile("[\u0964\u0965\u3002\uff01\uff1f\u037e;]")


def _split_extra(line: str, start: int, end: int) -> List[Tuple[int, int]]:
  """Splits the blingfire sentence line[start:end] after each _EXTRA_SENTENCE_END. Whitespace
  is trimmed only at these new cuts (the outer ends stay where blingfire put them), and pieces
  that are only whitespace are dropped; with no cut, [(start, end)] as it was."""
  spans = []
  for m in _EXTRA_SENTENCE_END.finditer(line, start, end):
    if line[m.end():end].strip():
      piece_end = m.end()
      spans.append((start, piece_end))
      start = piece_end
      while line[start].isspace():
        start += 1
  spans.append((start, end))
  return spans


# Lines up to this many UTF-8 bytes are split in buffers kept per thread (_SentenceBuffers);
# longer ones get buffers of their own, freed after the call.
_KEPT_BUFFER_LINE_BYTES = 1 << 16


class _SentenceBuffers(threading.local):
  """The output buffers of blingfire's sentence call, made once per thread and reused.

  blingfire's Python wrapper makes three zeroed buffers for every line (the text, the start
  and end offsets; 2 bytes and 2 int32 per input byte); making them took about 40% of the
  sentence split's time on short lines (issue 17). `get` returns buffers whose first
  `count + 1` bytes and `count` offsets are zero, as fresh ones of `count` would be, so the C
  call sees the same memory and `.value` stops where it would (the byte after `count` is zero).
  """

  def __init__(self):
    super().__init__()
    self.count = -1

  def get(self, count: int):
    if count > self.count:
      size = max(count, 1024)
      self.text = ctypes.create_string_buffer(size + 1)
      self.start = (ctypes.c_int32 * size)()
      self.end = (ctypes.c_int32 * size)()
      self.count = size
    else:
      ctypes.memset(self.text, 0, count + 1)
      ctypes.memset(self.start, 0, 4 * count)
      ctypes.memset(self.end, 0, 4 * count)
    return self.text, self.start, self.end


_SENTENCE_BUFFERS = _SentenceBuffers()


def _blingfire_sentence_offsets(line: str) -> List[Tuple[int, int]]:
  """blingfire.text_to_sentences_and_offsets(line)[1], computed faster: the same C call on
  buffers of the same size and content (zeroed; kept per thread for lines up to
  _KEPT_BUFFER_LINE_BYTES, not made anew), and blingfire's Python loop over every UTF-8 byte of
  the line (most of the time of a sentence split) replaced by direct offsets for an ASCII line
  and one decode per sentence boundary otherwise. Offsets the fast mapping cannot take exactly
  as blingfire does (not in order, not on a character boundary) fall back to blingfire's own
  function, so the result is always blingfire's."""
  s_bytes = line.encode("utf-8")
  n_bytes = len(s_bytes)
  o_bytes_count = n_bytes * 2
  if n_bytes <= _KEPT_BUFFER_LINE_BYTES:
    o_bytes, o_start, o_end = _SENTENCE_BUFFERS.get(o_bytes_count)
  else:
    o_bytes = ctypes.create_string_buffer(o_bytes_count)
    o_start = (ctypes.c_int32 * o_bytes_count)()
    o_end = (ctypes.c_int32 * o_bytes_count)()
  o_len = _BLINGFIRE_SENTENCES(ctypes.c_char_p(s_bytes), ctypes.c_int(n_bytes),
                               ctypes.byref(o_bytes), ctypes.byref(o_start),
                               ctypes.byref(o_end), ctypes.c_int(o_bytes_count))
  if o_len == -1 or o_len > o_bytes_count:
    return []
  num = o_bytes.value.count(b"\n") + 1
  starts, ends = o_start[:num], o_end[:num]
  # blingfire's loop maps start s to the character at byte s and end e to the character at
  # byte e + 1 (the last end may be the end of the line), in order.
  wanted = [v for start, end in zip(starts, ends) for v in (start, end + 1)]
  previous = 0
  for i, v in enumerate(wanted):
    if v < previous or v > n_bytes or (v == n_bytes and i != len(wanted) - 1) or (
        v < n_bytes and s_bytes[v] & 0xC0 == 0x80):
      return blingfire.text_to_sentences_and_offsets(line)[1]
    previous = v
  if n_bytes != len(line):
    # Not ASCII: byte offsets -> character offsets, each stretch between two offsets (in order,
    # on character boundaries) decoded once, not the line's prefix up to each (quadratic in a
    # line of many sentences).
    chars, at_byte, at_char = [], 0, 0
    for v in wanted:
      at_char += len(s_bytes[at_byte:v].decode("utf-8"))
      at_byte = v
      chars.append(at_char)
    wanted = chars
  return list(zip(wanted[::2], wanted[1::2]))


def sentence_spans(text: str) -> List[Tuple[int, int]]:
  """Splits `text` into sentences; returns [(start, end)) character offsets.

  blingfire's sentence model, then a split after each sentence end it does not know
  (_EXTRA_SENTENCE_END: '।', '॥', '。', '！', '？', the Greek question mark ';'). Text
  without these characters (English, ...) is split exactly as by blingfire alone. Newlines
  always end a sentence (paragraphs are never joined). Offsets index into `text`.
  """
  spans = []
  pos = 0
  for line in text.split("\n"):
    if line.strip():
      offsets = _blingfire_sentence_offsets(line)
      if line.isascii() or not _EXTRA_SENTENCE_END_START.search(line):
        # None of _EXTRA_SENTENCE_END's marks (ASCII: no Greek letter before a ';' either).
        spans.extend((pos + s, pos + e) for s, e in offsets)
      else:
        for start, end in offsets:
          spans.extend((pos + s, pos + e) for s, e in _split_extra(line, start, end))
    pos += len(line) + 1
  return spans


# Characters looked at first on each side of a span for its token windows; the window is doubled
# until it holds enough whole tokens or reaches its bound, so the result never depends on it.
_WINDOW_CHARS = 64

# At most this many characters of the sentence are kept on each side of the span in the
# sentence feature (cut back to whole whitespace-separated words), so that a mention costs time
# bounded by its neighbourhood, not by its sentence: a run-on "sentence" of thousands of links
# (a navigation list, a list flattened into one line) would otherwise repeat its whole length in
# the feature of each of its mentions, quadratic in the page length. No sentence of the real
# text in ../shared/data (enwiki/, wikitext_en/) reaches the cap: the longest has 2,019
# characters in all.
MAX_SENTENCE_SIDE_CHARS = 2048
# The same bound for the 5-token left and right contexts: in text without spaces or
# punctuation (a line of CJK characters, a long identifier) one "token" can be the whole line,
# and each mention's context would repeat it (quadratic time and memory: a 1.4 MB page of CJK
# text exhausted 23 GB). A token longer than this is cut at the bound.
MAX_CONTEXT_SIDE_CHARS = MAX_SENTENCE_SIDE_CHARS


def _left_cut(text: str, floor: int, pos: int, n: int, stop_at_newline: bool) -> int:
  """Start offset of the n-th token left of `pos` in text[floor:pos].

  When text[floor:pos] (cut after its last newline if `stop_at_newline`) holds fewer than n
  tokens: the start of its first token, or `pos` when it holds none. Only a window near `pos`
  is tokenized: O(n tokens) for text with single spaces, not O(pos - floor).

  Without CJK characters the tokens are symmetric (runs of word characters and marks, and
  single other characters), so the window is read backwards: the n tokens nearest `pos` are
  the first n of the reversed window, found by one or two matches of n tokens (_n_tokens)
  instead of matching every token of the window (a third of the mention features' time on
  the other Wikipedias, issue 17). A window with CJK (a Han ideograph takes the marks after
  it) is tokenized forwards.
  """
  width = _WINDOW_CHARS
  while True:
    lo = max(floor, pos - width)
    if stop_at_newline:
      newline = text.rfind("\n", lo, pos)
      if newline >= 0:
        lo = floor = newline + 1
    window = text[lo:pos]
    ascii_only = window.isascii()
    if ascii_only or _CJK.search(window) is None:
      # Backwards: the n tokens nearest `pos` are the first n of the reversed window, found
      # in one or two matches (_n_tokens); the last one may go on past the window's left edge
      # unless a character after it in the reversed window ends it.
      reverse = window[::-1]
      match = _n_tokens(n, True, ascii_only).match(reverse)
      start = match.end() if match else _n_tokens(n, False, ascii_only).match(reverse).end()
      if lo == floor or (match and start < len(reverse)):
        return pos - start
    else:
      # Forwards. Tokenized from `lo`, the window's tokens are the line's only from the first
      # character no token goes on over (_TOKEN_BREAK) on: before it a token may be cut off,
      # and the rest of it tokenized otherwise (a kana run's voicing mark U+3099 or prolonged
      # sound mark U+30FC after a word or the other kana starts a token of its own at the
      # window's edge, and the word or run after it one more). (A narrower window without CJK
      # that the backward read found too short is too short here as well, so the doubling
      # goes on from this width.)
      starts = [m.start() for m in _TOKEN.finditer(text, lo, pos)]
      if lo == floor:
        return starts[-n] if len(starts) >= n else starts[0] if starts else pos
      first_break = _TOKEN_BREAK.search(text, lo, pos)
      if first_break is not None:
        whole = bisect.bisect_left(starts, first_break.start())
        if len(starts) - whole >= n:
          return starts[-n]
    width *= 2


def _right_cut(text: str, pos: int, ceiling: int, n: int, stop_at_newline: bool) -> int:
  """End offset of the n-th token right of `pos` in text[pos:ceiling].

  When text[pos:ceiling] (cut at its first newline if `stop_at_newline`) holds fewer than n
  tokens: the end of its last token, or `pos` when it holds none. Only the tokens kept are
  matched: one match of n tokens (_n_tokens) where they hold no CJK character, else n
  searches from `pos` (issue 17).
  """
  if stop_at_newline:
    newline = text.find("\n", pos, ceiling)
    if newline >= 0:
      ceiling = newline
  # The n searches below in one match (_n_tokens), kept where the text it took has no CJK.
  if text[pos:ceiling].isascii():
    return _n_tokens(n, False, True).match(text, pos, ceiling).end()
  end = _n_tokens(n, False, False).match(text, pos, ceiling).end()
  if _CJK.search(text, pos, end) is None:
    return end
  search = _TOKEN.search
  end = pos
  for _ in range(n):
    match = search(text, end, ceiling)
    if match is None:
      break
    end = match.end()
  return end


def _sentence_left(text: str, floor: int, pos: int) -> int:
  """Start offset of the sentence part text[floor:pos] kept in the sentence feature: `floor`,
  or, when that part is longer than MAX_SENTENCE_SIDE_CHARS, the start of the first whole
  word within that many characters of `pos` (a word cut by the limit is left out)."""
  cut = pos - MAX_SENTENCE_SIDE_CHARS
  if cut <= floor or text[cut - 1].isspace() or text[cut].isspace():
    return max(cut, floor)
  parts = text[cut:pos].split(None, 1)
  return pos - len(parts[1]) if len(parts) == 2 else cut


def _sentence_right(text: str, pos: int, ceiling: int) -> int:
  """End offset of the sentence part text[pos:ceiling] kept in the sentence feature: `ceiling`,
  or, when that part is longer than MAX_SENTENCE_SIDE_CHARS, the end of the last whole word
  within that many characters of `pos` (a word cut by the limit is left out)."""
  cut = pos + MAX_SENTENCE_SIDE_CHARS
  if cut >= ceiling or text[cut - 1].isspace() or text[cut].isspace():
    return min(cut, ceiling)
  parts = text[pos:cut].rsplit(None, 1)
  return cut - len(parts[1]) if len(parts) == 2 else cut


_AFTER_ANY_END = float("inf")


def _sentence_of(sentences: Sequence[Tuple[int, int]], start: int) -> Optional[Tuple[int, int]]:
  """The sentence span holding offset `start` (sentences in text order, non-overlapping)."""
  try:
    # The last span starting at or before `start`: compared as tuples, in C (a key function
    # is a Python call per step of the search; issue 17).
    i = bisect.bisect_right(sentences, (start, _AFTER_ANY_END)) - 1
  except TypeError:  # spans that are not tuples (lists, say)
    i = bisect.bisect_right(sentences, start, key=lambda span: span[0]) - 1
  if i >= 0 and sentences[i][0] <= start < sentences[i][1]:
    return sentences[i]
  return None


def mention_features(text: str, start: int, end: int,
                     sentences: Optional[Sequence[Tuple[int, int]]] = None,
                     context_tokens: int = schema.CONTEXT_TOKENS) -> Dict[str, str]:
  """Returns the four mention features of the span text[start:end].

  Time is bounded by the span and its neighbourhood (the context windows and at most
  MAX_SENTENCE_SIDE_CHARS characters of its sentence on each side), not by the length of its line
  or text, so the mentions of a page cost time linear in the page's length once `sentences`
  is given.

  Args:
    text: the document (or paragraph) as plain text.
    start: span start, a character offset into `text`.
    end: span end (exclusive), start < end <= len(text).
    sentences: sentence spans of `text` (from `sentence_spans`: in text order, non-overlapping;
      the lines that hold no span may be left out), computed when None (time linear in
      len(text) per call); pass them when several mentions share one text.
    context_tokens: tokens kept left and right of the span.

  Returns:
    {schema.MENTION_SPAN, MENTION_LEFT, MENTION_RIGHT, MENTION_SENTENCE: str}, whitespace
    collapsed to single spaces. The left and right contexts stay within the span's line
    (paragraph) and within MAX_CONTEXT_SIDE_CHARS of the span; the sentence is the one holding the span start, extended to hold the whole
    span (the span's line when no sentence holds it), with the span replaced by
    schema.MENTION_MASK and at most MAX_SENTENCE_SIDE_CHARS characters kept on each side.

  Raises:
    ValueError: if the span is empty or outside `text`.
  """
  if not 0 <= start < end <= len(text):
    raise ValueError(f"mention span [{start}, {end}) is empty or outside a text of "
                     f"{len(text)} characters")
  if sentences is None:
    sentences = sentence_spans(text)
  sentence = _sentence_of(sentences, start)
  if sentence is None:  # the span's line
    # Only the newlines within reach of the cap are looked for: a line starting (ending)
    # further away is cut by the cap anyway.
    newline = text.rfind("\n", max(0, start - MAX_SENTENCE_SIDE_CHARS - 1), start)
    sent_start = newline + 1 if newline >= 0 else 0
    newline = text.find("\n", end, end + MAX_SENTENCE_SIDE_CHARS + 1)
    sent_end = newline if newline >= 0 else len(text)
  else:
    sent_start, sent_end = sentence[0], max(sentence[1], end)
  sent_left = _sentence_left(text, sent_start, start)
  sent_right = _sentence_right(text, end, sent_end)
  left = _left_cut(text, max(0, start - MAX_CONTEXT_SIDE_CHARS), start, context_tokens,
                   stop_at_newline=True)
  right = _right_cut(text, end, min(len(text), end + MAX_CONTEXT_SIDE_CHARS), context_tokens,
                     stop_at_newline=True)
  masked = text[sent_left:start] + schema.MENTION_MASK + text[end:sent_right]
  return {
      schema.MENTION_SPAN: " ".join(text[start:end].split()),
      schema.MENTION_LEFT: " ".join(text[left:start].split()),
      schema.MENTION_RIGHT: " ".join(text[end:right].split()),
      schema.MENTION_SENTENCE: " ".join(masked.split()),
  }
