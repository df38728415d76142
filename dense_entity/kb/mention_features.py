"""The four mention features of the paper, built from a text and a character span.

Gillick et al. (2019), section 4.1: the span text; the 5 tokens left of the span; the 5 tokens
right of it; the sentence with the span replaced by a special symbol (`schema.MENTION_MASK`).
This one function serves extraction (Beam), evaluation datasets and the `link` command, so a
mention is described the same way wherever it comes from.

Features are raw strings: tokenization for the model happens in the TF graph (featurizer.py).
Here "token" only decides where the 5-token windows start and end; the window keeps the
original characters between those tokens.
"""

import re
from typing import Dict, List, Optional, Sequence, Tuple

import blingfire

from dense_entity.kb import schema

# A word (letters, digits, marks) or one other non-space character: the same units the in-graph
# featurizer splits on.
_TOKEN = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)


def sentence_spans(text: str) -> List[Tuple[int, int]]:
  """Splits `text` into sentences with blingfire; returns [(start, end)) character offsets.

  Newlines always end a sentence (paragraphs are never joined). Offsets index into `text`.
  """
  spans = []
  pos = 0
  for line in text.split("\n"):
    if line.strip():
      _, offsets = blingfire.text_to_sentences_and_offsets(line)
      for start, end in offsets:
        spans.append((pos + start, pos + end))
    pos += len(line) + 1
  return spans


def _window_left(text: str, n: int) -> str:
  starts = [m.start() for m in _TOKEN.finditer(text)]
  if not starts:
    return ""
  return text[starts[-n] if len(starts) >= n else starts[0]:].strip()


def _window_right(text: str, n: int) -> str:
  ends = [m.end() for m in _TOKEN.finditer(text)]
  if not ends:
    return ""
  return text[:ends[min(n, len(ends)) - 1]].strip()


def mention_features(text: str, start: int, end: int,
                     sentences: Optional[Sequence[Tuple[int, int]]] = None,
                     context_tokens: int = schema.CONTEXT_TOKENS) -> Dict[str, str]:
  """Returns the four mention features of the span text[start:end].

  Args:
    text: the document (or paragraph) as plain text.
    start: span start, a character offset into `text`.
    end: span end (exclusive), start < end <= len(text).
    sentences: sentence spans of `text` (from `sentence_spans`), computed when None; pass them
      when several mentions share one text.
    context_tokens: tokens kept left and right of the span.

  Returns:
    {schema.MENTION_SPAN, MENTION_LEFT, MENTION_RIGHT, MENTION_SENTENCE: str}. The left and
    right contexts stay within the span's line (paragraph); the sentence is the one holding
    the span start, extended to hold the whole span.

  Raises:
    ValueError: if the span is empty or outside `text`.
  """
  if not 0 <= start < end <= len(text):
    raise ValueError(f"mention span [{start}, {end}) is empty or outside a text of "
                     f"{len(text)} characters")
  line_start = text.rfind("\n", 0, start) + 1
  line_end = text.find("\n", end)
  if line_end < 0:
    line_end = len(text)
  if sentences is None:
    sentences = sentence_spans(text)
  sent_start, sent_end = line_start, line_end
  for s, e in sentences:
    if s <= start < e:
      sent_start, sent_end = s, max(e, end)
      break
  sent_start = min(sent_start, start)
  sentence = (text[sent_start:start] + schema.MENTION_MASK + text[end:sent_end]).strip()
  return {
      schema.MENTION_SPAN: " ".join(text[start:end].split()),
      schema.MENTION_LEFT: " ".join(_window_left(text[line_start:start], context_tokens).split()),
      schema.MENTION_RIGHT: " ".join(_window_right(text[end:line_end], context_tokens).split()),
      schema.MENTION_SENTENCE: " ".join(sentence.split()),
  }
