"""Wikipedia title normalization and redirect resolution, shared by extraction and evaluation.

An entity's id is its normalized title (DESIGN.md, "Ids"). Normalization follows MediaWiki's
title rules for the main namespace ("first-letter" case): percent-decoding, HTML entities,
underscores as spaces, runs of whitespace collapsed, surrounding whitespace trimmed, and only the
first character upper-cased (Unicode-aware), so 'SILVER OWLS' and 'Silver Owls' stay distinct.
"""

import html
import re
import unicodedata
import urllib.parse
from typing import Dict, Iterable, Mapping, Optional

from anyascii import anyascii

# Redirect chains longer than this are treated as loops (MediaWiki itself follows one hop;
# dumps and evaluation sets contain chains, so a few hops are followed).
MAX_REDIRECT_HOPS = 8

_WHITESPACE = re.compile(r"[\s_\u00a0\u200e\u200f]+")
_SPACES = re.compile(r"\s+")


def normalize_title(title: str, first_letter: bool = True) -> str:
  """Returns `title` normalized as MediaWiki does for main-namespace titles.

  Steps: drop a '#fragment', percent-decode, decode HTML entities, turn '_' and whitespace runs
  (including NBSP) into one space, trim, NFC-normalize, upper-case the first character only.
  Idempotent: normalize_title(normalize_title(t)) == normalize_title(t).

  Args:
    title: a raw title or link target, e.g. 'the_Silver Owls', 'Kestrel%27s_Rock'.
    first_letter: upper-case the first character (MediaWiki's 'first-letter' case, the
      default of every Wikipedia); False for a 'case-sensitive' wiki (Wiktionary), whose
      titles keep their first letter as written.

  Returns:
    The normalized title, '' when nothing is left (e.g. '#Section' or '  ').
  """
  t = title.split("#", 1)[0]
  if t.isascii() and "%" not in t and "&" not in t:
    # Most titles: what _normalize_steps makes of ASCII (nothing to decode; NFC leaves ASCII
    # as it is; '_' and whitespace runs to one space, trimmed), without its regular expression.
    t = " ".join(t.replace("_", " ").split())
    if not t or not first_letter:
      return t
    return t[0].upper() + t[1:]
  return _normalize_steps(t, first_letter)


def _normalize_steps(t: str, first_letter: bool) -> str:
  """normalize_title's steps after the fragment is cut, for any text."""
  if "%" in t:
    t = urllib.parse.unquote(t)
  if "&" in t:
    t = html.unescape(t)
  t = _WHITESPACE.sub(" ", t).strip()
  t = unicodedata.normalize("NFC", t)
  if not t:
    return ""
  if not first_letter:
    return t
  first = t[0].upper()
  # Some characters upper-case to several (e.g. 'ß' -> 'SS'); MediaWiki keeps those as they are.
  if len(first) != 1:
    first = t[0]
  return first + t[1:]


def resolve_redirect(title: str, redirects: Mapping[str, str],
                     max_hops: int = MAX_REDIRECT_HOPS) -> Optional[str]:
  """Follows redirects from a normalized title to the page they end at.

  Args:
    title: a normalized title.
    redirects: normalized redirect title -> normalized target title (one hop each).
    max_hops: chains longer than this are reported as unresolvable.

  Returns:
    The final title (the title itself when it is not a redirect), or None when the chain loops
    or exceeds `max_hops`.
  """
  seen = {title}
  for _ in range(max_hops):
    target = redirects.get(title)
    if target is None:
      return title
    if target in seen:
      return None
    seen.add(target)
    title = target
  return None if title in redirects else title


def alias_key(mention_text: str) -> str:
  """Returns the key of a mention text in the alias table (AT-Prior, paper section 5.1).

  NFKC-normalized, case-folded, whitespace runs (including NBSP) collapsed and trimmed:
  'Lake\u00a0Ore' and ' lake  ore' both give 'lake ore'.
  """
  if mention_text.isascii():  # NFKC leaves ASCII as it is; ASCII case-folds as it lowers
    return " ".join(mention_text.lower().split())
  t = unicodedata.normalize("NFKC", mention_text).casefold()
  return _SPACES.sub(" ", t).strip()


def _fold_char(ch: str) -> str:
  """A Latin letter, punctuation mark, space or symbol as ASCII ('ü' -> 'u', 'ø' -> 'o',
  'ß' -> 'ss', '–' -> '-', '’' -> "'"); characters of other scripts stay as they are
  ('й' keeps its breve: dropping it would merge two Cyrillic letters)."""
  if unicodedata.name(ch, "").startswith("LATIN") or unicodedata.category(ch)[0] in "PZS":
    return anyascii(ch)
  return ch


class _FoldTable(dict):
  """Code point -> _fold_char of its character, filled on first use: the table fold_text
  translates with (str.translate looks each character up in C, calling Python only for one
  not seen before; the join of _fold_char per character took twice as long, issue 17)."""

  def __missing__(self, code: int) -> str:
    folded = self[code] = _fold_char(chr(code))
    return folded


_FOLD_TABLE = _FoldTable()


def match_key(title: str) -> str:
  """The key that identifies one entity across KB sources that spell titles differently.

  Wikipedia titles reach the KB from dump pages and link targets ('Jürgen Klinsmann'), entity
  descriptions, and title / redirect lists that are lower-cased and accent-folded
  ('jurgen_klinsmann', as DBpedia's and Wikimedia's title lists are). The key is the title
  normalized as `normalize_title` does, with Latin letters, punctuation and symbols folded to
  ASCII (anyascii: 'ø' -> 'o', 'ß' -> 'ss', en dash -> '-') and everything case-folded;
  letters of other scripts are only case-folded. Two titles that differ only in case or
  accents share a key ('AIDS' and 'Aids' do: a KB keyed this way keeps one of them, and the
  extraction counts such collisions).

  Args:
    title: a raw or normalized title, e.g. 'Jürgen_Klinsmann', 'jurgen klinsmann'.

  Returns:
    The key ('jurgen klinsmann'); '' when the title normalizes to nothing.
  """
  if title.isascii() and "%" not in title and "&" not in title and "#" not in title:
    # What normalize_title and fold_text make of an ASCII title that nothing decodes or cuts:
    # '_' and whitespace runs to one space, trimmed, lower-cased (the first letter's
    # upper-casing undone by the folding).
    return " ".join(title.replace("_", " ").lower().split())
  return fold_text(normalize_title(title))


def fold_text(text: str) -> str:
  """Text folded as `match_key` folds titles, without title normalization (for mention
  spans: 'Jürgen  KLINSMANN' -> 'jurgen klinsmann'; a '#' or '%' is kept as it is)."""
  if text.isascii():
    return " ".join(text.replace("_", " ").lower().split())
  return _WHITESPACE.sub(" ", text.translate(_FOLD_TABLE)).strip().casefold()


class TitleResolver:
  """Maps any spelling of a title to the KB entity it names, as scoring and linking need.

  Resolution of a raw title: `normalize_title`, then the KB's redirects (`resolve_redirect`);
  the result when it is a KB entity; else the KB entity or redirect with the same
  `match_key` (so 'Jürgen Klinsmann' finds the entity 'Jurgen klinsmann' of a KB built from a
  folded title list, and 'The Netherlands' the target of the redirect 'The netherlands');
  else the normalized, redirect-resolved title itself, which is not in the KB. Entities win
  over redirects with the same key, and among colliding entities the first in sorted order.

  Args:
    kb_titles: the KB's entity titles (normalized).
    redirects: normalized redirect title -> normalized target title (one hop each).
  """

  def __init__(self, kb_titles: Iterable[str], redirects: Mapping[str, str]):
    self.kb_titles = kb_titles if isinstance(kb_titles, (set, frozenset)) else set(kb_titles)
    self.redirects = redirects
    by_key: Dict[str, str] = {}
    for redirect in sorted(redirects):
      target = resolve_redirect(redirect, redirects)
      if target in self.kb_titles:
        by_key.setdefault(match_key(redirect), target)
    for title in sorted(self.kb_titles):  # entities override redirects with the same key
      key = match_key(title)
      if by_key.get(key) not in self.kb_titles:
        by_key[key] = title
    self._by_key = by_key

  def __call__(self, raw_title: str) -> Optional[str]:
    """The KB title `raw_title` names, else its normalized, redirect-resolved form (not in the
    KB); None when it normalizes to '' or its redirect chain loops."""
    title = normalize_title(raw_title)
    if not title:
      return None
    resolved = resolve_redirect(title, self.redirects)
    if resolved is None or resolved in self.kb_titles:
      return resolved
    return self._by_key.get(match_key(resolved)) or self._by_key.get(match_key(title), resolved)
