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
from typing import Mapping, Optional

# Redirect chains longer than this are treated as loops (MediaWiki itself follows one hop;
# dumps and evaluation sets contain chains, so a few hops are followed).
MAX_REDIRECT_HOPS = 8

_WHITESPACE = re.compile(r"[\s_\u00a0\u200e\u200f]+")


def normalize_title(title: str) -> str:
  """Returns `title` normalized as MediaWiki does for main-namespace titles.

  Steps: drop a '#fragment', percent-decode, decode HTML entities, turn '_' and whitespace runs
  (including NBSP) into one space, trim, NFC-normalize, upper-case the first character only.
  Idempotent: normalize_title(normalize_title(t)) == normalize_title(t).

  Args:
    title: a raw title or link target, e.g. 'the_Silver Owls', 'Kestrel%27s_Rock'.

  Returns:
    The normalized title, '' when nothing is left (e.g. '#Section' or '  ').
  """
  t = title.split("#", 1)[0]
  if "%" in t:
    t = urllib.parse.unquote(t)
  if "&" in t:
    t = html.unescape(t)
  t = _WHITESPACE.sub(" ", t).strip()
  t = unicodedata.normalize("NFC", t)
  if not t:
    return ""
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
  t = unicodedata.normalize("NFKC", mention_text).casefold()
  return re.sub(r"\s+", " ", t).strip()
