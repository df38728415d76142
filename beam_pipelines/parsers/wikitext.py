"""The wikitext renderer: an article's wikitext -> plain text, links, categories.

No Beam here: the extraction pipeline (beam_pipelines.pipelines.extraction) calls parse_article,
and tests call it on 3-10 line inputs. Gillick et al. (2019), section 5: training mentions are
Wikipedia anchor links (anchor text in the source page, link target resolved through
redirects); an entity is described by its title, the first paragraph of its page and its
categories.

Plain text and link offsets come from walking mwparserfromhell's tree (DESIGN.md: a maintained
parser, no home-made regexes over markup), from its tokenizer, in the light form of
parsers.mw_tree (text as str, parts as lists). The only regexes below work on plain text
(apostrophe runs, behaviour switches); the redirect magic word is matched in
beam_pipelines.parsers.namespaces.
"""

import dataclasses
import re
import urllib.parse
import xml.sax.saxutils
from typing import Dict, List, Optional, Sequence, Tuple

from beam_pipelines.parsers import mw_tree
from beam_pipelines.parsers import namespaces

# Where a mention was found (Link.source): the article's prose, or the outermost non-prose
# container holding it, rendered as lines of its own after the prose.
SOURCE_PROSE = "prose"
SOURCE_TABLE = "table"
SOURCE_TEMPLATE = "template"
SOURCE_CAPTION = "caption"
SOURCE_GALLERY = "gallery"


@dataclasses.dataclass(frozen=True)
class Link:
  """A wikilink to a main-namespace page, as a mention in the plain text.

  Attributes:
    start: character offset of the anchor in ParsedArticle.text.
    end: end offset (exclusive); text[start:end] == anchor.
    target: normalized target title ('#fragment' dropped; the page itself for '[[#Section]]').
    anchor: the rendered link text.
    source: where the link was written: SOURCE_PROSE (running text, headings, lists), or the
      outermost container around it: SOURCE_TABLE (a table cell), SOURCE_TEMPLATE (a template
      parameter), SOURCE_CAPTION (a File:/Image: caption) or SOURCE_GALLERY (a <gallery>
      line). A non-prose link lies after ParsedArticle.prose_end. Links in <ref> bodies
      (citations) are never mentions (counted 'in_ref').
  """
  start: int
  end: int
  target: str
  anchor: str
  source: str = SOURCE_PROSE


@dataclasses.dataclass
class ParsedArticle:
  """An article rendered to plain text.

  Attributes:
    text: plain text; one line per paragraph, heading or list item; single spaces. The prose
      comes first (text[:prose_end]); after it, each non-prose piece holding a mention (a table
      cell, a template parameter, a caption, a gallery line) on its own line(s).
    links: main-namespace links in text order (prose links first).
    categories: normalized category names (no prefix), unique, in page order.
    first_paragraph: first prose paragraph of the lead section ('' when none); never taken
      from a non-prose piece.
    dropped: links that are not mentions, counted by reason: 'category', 'file',
      'interlanguage', 'interwiki', 'other_namespace', 'empty', 'invalid_target',
      'empty_anchor', 'nested_link' (a link inside a link's or an external link's text),
      'in_file_option' (a link in an image option MediaWiki does not show, e.g. alt=),
      'in_ref' (in a <ref> body or <references>: citations are not training mentions),
      'in_param_name' (a link in a template or parameter name), 'in_attribute' (in a tag's
      attribute, e.g. '<ref name="[[X]]">'), 'in_other_tag' (inside
      <math>, <timeline>, <imagemap>, <includeonly> and the like).
    prose_end: length of the prose part of `text` (characters); == len(text) when no
      non-prose piece holds a mention.
    switches: behaviour switches written in the page ('__DISAMBIG__', '__HIDDENCAT__',
      '__NOTOC__', ...), in page order, each once.
    templates: names of the templates and parser functions the page calls (lower case,
      single spaces, no 'Template:' prefix; 'formatnum' for '{{formatnum:..}}'), in page
      order, each once; read by beam_pipelines.parsers.page_kinds.
    list_item_links: how many of the prose links lie in list items (lines of '*', '#', ':',
      ';' markup, <li>, <dd>, <dt>); the others lie in paragraphs and headings.
  """
  text: str
  links: List[Link]
  categories: List[str]
  first_paragraph: str
  dropped: Dict[str, int]
  prose_end: int
  switches: Tuple[str, ...] = ()
  templates: Tuple[str, ...] = ()
  list_item_links: int = 0


# Tags whose contents are not prose. Tables, captions and galleries become pieces of their own
# after the prose (_Renderer.tag); refs (citations) and the others are dropped, their links
# counted.
_DROP_TAGS = frozenset([
    "ref", "references", "math", "chem", "ce", "gallery", "timeline", "syntaxhighlight",
    "source", "score", "imagemap", "graph", "mapframe", "maplink", "templatedata", "hiero",
    "categorytree", "inputbox", "includeonly", "templatestyles", "indicator", "section",
    "charinsert", "table", "style", "script", "noscript", "caption",
])
_PIECE_TAGS = {"table": SOURCE_TABLE, "caption": SOURCE_TABLE, "gallery": SOURCE_GALLERY}
_REF_TAGS = frozenset(["ref", "references"])
_CELL_TAGS = frozenset(["td", "th", "caption"])
_ROW_TAGS = frozenset(["tr", "tbody", "thead", "tfoot"])
# Image options of '[[File:..|..]]' and <gallery> lines (MediaWiki's img_* magic words, en);
# the caption is the last part that is none of these.
_IMAGE_KEYWORDS = frozenset([
    "thumb", "thumbnail", "frame", "framed", "frameless", "border", "left", "right", "center",
    "centre", "none", "upright", "baseline", "middle", "sub", "super", "sup", "top",
    "text-top", "bottom", "text-bottom",
])
_IMAGE_KEYS = frozenset([
    "alt", "link", "page", "upright", "lang", "class", "thumb", "thumbnail", "thumbtime",
    "start", "end", "loop", "muted", "lossy", "disablecontrols", "border",
])
_IMAGE_SIZE = re.compile(r"^\d*(?:x\d*)?\s*px$")
# Tags that start and end a line (block elements).
_BLOCK_TAGS = frozenset([
    "p", "div", "blockquote", "center", "li", "ul", "ol", "dl", "dd", "dt", "h1", "h2", "h3",
    "h4", "h5", "h6", "pre", "poem", "hr",
])
# Wiki list markup: '*', '#' (li), ':' (dd), ';' (dt).
_LIST_MARKUP = frozenset("*#:;")

# Inline templates rendered as text (which positional parameter is the visible text); every
# other template is dropped.
_TEXT_TEMPLATES = {
    "nowrap": "first", "nobr": "first", "small": "first", "smaller": "first", "big": "first",
    "sic": "first", "not a typo": "first", "nihongo": "first", "ill": "first", "lang": "second",
    "transl": "last", "convert": "convert", "cvt": "convert", "keypress": "first",
    "em": "first", "strong": "first", "var": "first", "abbr": "first", "visible anchor": "first",
}
_CONSTANT_TEMPLATES = {
    "ndash": "\u2013", "mdash": "\u2014", "snd": " \u2013 ", "spaced ndash": " \u2013 ",
    "nbsp": " ", "\u00b7": " \u00b7 ", "middot": "\u00b7", "'": "'", "=": "=",
}
# Magic words that render visible text (MediaWiki core parser functions and variables); every
# other parser function ({{#if:..}}, {{#invoke:..}}, {{#tag:ref|..}}, ...) renders nothing here.
_CASE_FUNCTIONS = {"lc": str.lower, "uc": str.upper,
                   "lcfirst": lambda t: t[:1].lower() + t[1:],
                   "ucfirst": lambda t: t[:1].upper() + t[1:]}
_TEXT_FUNCTIONS = frozenset(["formatnum"]) | frozenset(_CASE_FUNCTIONS)
# Other core parser functions, rendered as nothing (as every '{{#...:..}}' one); any other
# 'X:' before a template's first ':' is a namespace ('{{Template:Birth date|..}}').
_OTHER_FUNCTIONS = frozenset([
    "urlencode", "anchorencode", "fullurl", "fullurle", "localurl", "localurle",
    "canonicalurl", "canonicalurle", "filepath", "int", "ns", "nse", "plural", "grammar",
    "gender", "padleft", "padright", "formatdate", "dateformat", "displaytitle", "defaultsort",
    "defaultsortkey", "defaultcategorysort", "subst", "safesubst", "msg", "msgnw", "raw",
    "language", "bidi", "pagesincategory", "pagesize", "protectionlevel", "special",
    "speciale", "tag", "noexternallanglinks",
])
# Variables (no argument, case-sensitive) that render the page's own title.
_TITLE_VARIABLES = frozenset(["PAGENAME", "FULLPAGENAME", "BASEPAGENAME", "ROOTPAGENAME",
                              "SUBPAGENAME", "ARTICLEPAGENAME"])
# Templates whose visible text is computed from their parameters (_Renderer.computed_template).
_DATE_TEMPLATES = frozenset([
    "birth date", "death date", "start date", "end date", "birth date and age",
    "death date and age", "start date and age", "end date and age", "birth-date", "dob",
    "bda", "dda",
])
_CIRCA_TEMPLATES = frozenset(["circa", "c.", "ca.", "ca"])
_FRACTION_TEMPLATES = frozenset(["frac", "fraction", "sfrac"])
_AS_OF_TEMPLATES = frozenset(["as of"])
_COMPUTED_TEMPLATES = _DATE_TEMPLATES | _CIRCA_TEMPLATES | _FRACTION_TEMPLATES | _AS_OF_TEMPLATES
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_NUMBER = re.compile(r"^([-+\u2212]?)(\d+)(\.\d+)?$")
_YES = frozenset(["y", "yes", "1", "true"])
_BEHAVIOR_SWITCH = re.compile(r"__[A-Z]+__")
_APOSTROPHES = re.compile(r"'{2,}")
_WS = re.compile(r"(\s+)")
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"
assert not any(ord(c) < 0x80 for c in _INVISIBLE)  # so an ASCII string holds none
_INVISIBLE_CHARS = re.compile(f"[{_INVISIBLE}]")
_CLOSING_PUNCT = frozenset(".,;:!?)]")
_ESCAPED_TAG = re.compile(r"&lt;/?(?:ref|br|references|small|sup|sub|div|span|nowiki)\b")
# An HTML tag MediaWiki accepts, left as text by mwparserfromhell when it is not closed.
_STRAY_TAG = re.compile(
    r"</?(?:small|big|center|span|div|font|b|i|u|s|sup|sub|br|p|tt|code|em|strong|abbr|cite|"
    r"del|ins|mark|q|blockquote|poem|ref|references|onlyinclude|noinclude)\b[^<>]*>",
    re.IGNORECASE)
_INDENTED_TABLE = re.compile(r"(?m)^:+[ \t]*(?=\{\|)")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


def _apostrophes(match: "re.Match[str]") -> str:
  # '' italic, ''' bold, ''''' both; '''' is an apostrophe + bold; longer runs keep extras.
  n = len(match.group(0))
  return "'" if n == 4 else "'" * max(0, n - 5)


def _stray_tag(match: "re.Match[str]") -> str:
  return " " if match.group(0)[1:3].lower() == "br" else ""


def pipe_trick(title: str, site: Optional[namespaces.Site] = None) -> str:
  """The text MediaWiki shows for '[[title|]]': the title without its namespace prefix (of
  `site`, default English) and trailing '(qualifier)', or else without ', qualifier'.
  'Pine Hill (Ohio)' -> 'Pine Hill'."""
  t = title.strip().lstrip(":")
  kind, rest, _ = namespaces.classify_title(t, site)
  if kind not in (namespaces.MAIN, namespaces.EMPTY):
    t = rest
  stripped = _PARENTHETICAL.sub("", t)
  if stripped != t:
    return stripped.strip()
  return t.split(",", 1)[0].strip()


def format_number(text: str, raw: bool = False) -> str:
  """{{formatnum:..}} as English MediaWiki renders it: '1200' -> '1,200', '-1234567.25' ->
  '-1,234,567.25'; with `raw` (the 'R' option) separators are removed instead ('1,200' ->
  '1200'). Text that is not a plain number comes back unchanged."""
  t = text.strip()
  if raw:
    stripped = t.replace(",", "")
    return stripped if _NUMBER.match(stripped) else t
  match = _NUMBER.match(t)
  if not match:
    return t
  sign, digits, fraction = match.group(1), match.group(2), match.group(3) or ""
  head = len(digits) % 3 or 3
  groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
  return sign + ",".join(groups) + fraction


def format_date(year: str, month: str = "", day: str = "", day_first: bool = False) -> str:
  """A date of {{birth date|Y|M|D}} and the like, as English Wikipedia renders it:
  'January 2, 1950' ('2 January 1950' when `day_first`, df=y), 'January 1950', '1950'.

  Raises:
    ValueError: a part that is not a number, or out of range.
  """
  y = int(year.strip())
  if not month.strip():
    return str(y)
  m = int(month.strip())
  if not 1 <= m <= 12:
    raise ValueError(f"month {m}")
  if not day.strip():
    return f"{_MONTHS[m - 1]} {y}"
  d = int(day.strip())
  if not 1 <= d <= 31:
    raise ValueError(f"day {d}")
  return f"{d} {_MONTHS[m - 1]} {y}" if day_first else f"{_MONTHS[m - 1]} {d}, {y}"


def _template_name(node, site: Optional[namespaces.Site] = None) -> str:
  """A template's name as MediaWiki matches it: '_' as space, single spaces, lower case,
  'Template:' (or the wiki's localized name of namespace 10, 'Шаблон:') dropped
  ('{{Template:Birth_date|..}}' -> 'birth date')."""
  name = " ".join(_source(node.name).replace("_", " ").split()).lower()
  if site is not None:
    return site.template_name(name)
  return name[len("template:"):].strip() if name.startswith("template:") else name


def _parser_function(node) -> Optional[Tuple[str, List]]:
  """('formatnum', argument nodes) for '{{formatnum:1200}}' (the argument is the part of the
  name after the first ':'); None when the template is not a call of a known parser function
  (a '#' function, _TEXT_FUNCTIONS, _OTHER_FUNCTIONS, a title variable)."""
  nodes = node.name
  if not nodes or type(nodes[0]) is not str or ":" not in nodes[0]:
    return None
  function, rest = nodes[0].split(":", 1)
  function = function.strip().lower()
  if not (function.startswith("#") or function in _TEXT_FUNCTIONS
          or function in _OTHER_FUNCTIONS or function.upper() in _TITLE_VARIABLES):
    return None
  argument = ([rest] if rest else []) + nodes[1:]
  return function, argument


class _Emitter:
  """Builds plain text while collapsing whitespace, so link offsets stay exact.

  Whitespace is held back until the next visible character: runs of spaces become one space,
  any newline becomes a line break, no line starts or ends with a space, no empty lines.
  """

  def __init__(self):
    self._parts: List[str] = []
    self.length = 0
    self._last = ""  # last character emitted
    self._space = False
    self._newline = False
    self._dropped = False  # something (template, ref, ...) was dropped since the last emit
    self._protected = 0  # end of the last link: text before it is never changed
    self._mark_line = False
    self.list_lines: List[int] = []  # start offsets of list-item lines

  def _emit(self, s: str) -> None:
    self._parts.append(s)
    self.length += len(s)
    self._last = s[-1]

  def _flush(self, first: str) -> None:
    if self.length:
      if self._newline:
        if self._last != "\n":
          self._emit("\n")
      elif self._space and self._last != "\n":
        if not (self._dropped and first in _CLOSING_PUNCT):
          self._emit(" ")
    if self._mark_line:
      self.list_lines.append(self.length)
      self._mark_line = False
    self._space = self._newline = self._dropped = False

  def _pop_open_paren(self) -> bool:
    """Removes a '(' left open by dropped markup, e.g. 'Paris ({{IPA|..}})' -> 'Paris'."""
    if self._last != "(" or self.length - 1 < self._protected:
      return False
    last = self._parts[-1]
    self._parts[-1] = last[:-1]
    self.length -= 1
    while self._parts and not self._parts[-1]:
      self._parts.pop()
    if self._parts and self._parts[-1].endswith(" ") and self.length - 1 >= self._protected:
      self._parts[-1] = self._parts[-1][:-1]
      self.length -= 1
      self._space = True
      while self._parts and not self._parts[-1]:
        self._parts.pop()
    self._last = self._parts[-1][-1] if self._parts else ""
    return True

  def text(self, s: str) -> None:
    """Appends raw text (whitespace collapsed)."""
    if self._dropped and self._last == "(":
      self._text_after_paren(s)
      return
    # Fast path, the same result as _text_after_paren without its '(' rules: the text is
    # emitted in one part instead of word by word.
    body = s.lstrip()
    if len(body) != len(s):
      if "\n" in s[:len(s) - len(body)]:
        self._newline = True
      else:
        self._space = True
    if not body:
      return
    core = body.rstrip()
    trail = body[len(core):]
    if "\n" in core:
      core = "\n".join([" ".join(line.split()) for line in core.split("\n")
                        if line and not line.isspace()])
    else:
      core = " ".join(core.split())
    self._flush(core[0])
    self._emit(core)
    if trail:
      if "\n" in trail:
        self._newline = True
      else:
        self._space = True

  def _text_after_paren(self, s: str) -> None:
    """text() word by word, after a '(' followed by dropped markup."""
    for piece in _WS.split(s):
      if not piece:
        continue
      if piece[0].isspace():
        if self._dropped and self._last == "(" and "\n" not in piece:
          continue
        if "\n" in piece:
          self._newline = True
        else:
          self._space = True
        continue
      if self._dropped and self._last == "(" and self.length > self._protected:
        # '(' + dropped markup, then ')' or ', ' / '; ': 'Paris ({{IPA|..}}; born ..)' ->
        # 'Paris (born ..)', 'Toronto ({{IPAc-en|..}})' -> 'Toronto'.
        if piece[0] in ",;":
          piece = piece.lstrip(",;")
          self._space = False
          if not piece:
            continue
        if piece[0] == ")" and self._pop_open_paren():
          self._dropped = False
          piece = piece[1:]
          if not piece:
            continue
        self._space = False
      self._flush(piece[0])
      self._emit(piece)

  def atom(self, s: str) -> Tuple[int, int]:
    """Appends `s` (already clean: single spaces, no surrounding space) as one unit."""
    self._flush(s[0])
    start = self.length
    self._emit(s)
    self._protected = self.length
    return start, self.length

  def space(self) -> None:
    self._space = True

  def line_break(self, list_item: bool = False) -> None:
    self._newline = True
    if list_item:
      self._mark_line = True

  def dropped(self) -> None:
    self._dropped = True

  def begin_piece(self) -> Tuple[int, int, str, int]:
    """Starts a piece on a new line that never changes the text before it.

    Returns:
      The state to pass to `rollback` to remove the piece again.
    """
    state = (len(self._parts), self.length, self._last, len(self.list_lines))
    self._newline = True
    self._space = self._dropped = self._mark_line = False
    self._protected = self.length
    return state

  def rollback(self, state: Tuple[int, int, str, int]) -> None:
    """Removes everything emitted since `begin_piece` returned `state`."""
    n_parts, length, last, n_lines = state
    del self._parts[n_parts:]
    del self.list_lines[n_lines:]
    self.length = length
    self._last = last
    self._protected = length
    self._space = self._newline = self._dropped = self._mark_line = False

  def value(self) -> str:
    return "".join(self._parts)


def _visible(value: str) -> str:
  """value without the _INVISIBLE characters; an ASCII string (most text nodes) holds none and
  is not searched (isascii: 0.04 us). They are removed by a regex (a character class scanned
  in C), not str.translate with a dict, which looks up every character: 15x the time on the
  other Wikipedias' text (9.5M characters of text lines: 0.55-0.59 s -> 0.036 s, issue 17)."""
  return value if value.isascii() else _INVISIBLE_CHARS.sub("", value)


def _clean_inline(s: str) -> str:
  return " ".join(s.split())


def _one_text(nodes: mw_tree.Nodes) -> Optional[str]:
  """The text of a node list that is one run of text (most link titles and texts, template
  names), else None."""
  if len(nodes) == 1 and type(nodes[0]) is str:  # pylint: disable=unidiomatic-typecheck
    return nodes[0]
  return None


def _source(nodes: mw_tree.Nodes) -> str:
  """The wikitext of a node list (mw_tree.source), read directly when it is one run of
  text."""
  if len(nodes) == 1 and type(nodes[0]) is str:  # pylint: disable=unidiomatic-typecheck
    return nodes[0]
  return mw_tree.source(nodes)


# Nodes that never hold a wikilink: a piece of only these is skipped without rendering.
_PLAIN_NODES = (str, mw_tree.HTMLEntity, mw_tree.Comment)


def _may_hold_links(nodes: Sequence) -> bool:
  for node in nodes:
    if not isinstance(node, _PLAIN_NODES):
      return True
  return False


def _split_pipes(nodes: Sequence) -> List[List]:
  """Splits a node list at the '|' of its top-level text (not inside links, templates).

  Returns:
    The parts, each a list of nodes (possibly empty); len >= 1.
  """
  parts: List[List] = [[]]
  for node in nodes:
    if type(node) is str and "|" in node:  # pylint: disable=unidiomatic-typecheck
      pieces = node.split("|")
      if pieces[0]:
        parts[-1].append(pieces[0])
      for piece in pieces[1:]:
        parts.append([piece] if piece else [])
    else:
      parts[-1].append(node)
  return parts


def _is_image_option(part: Sequence) -> bool:
  """True for a part of '[[File:..|..]]' that MediaWiki reads as an image option."""
  if len(part) != 1 or type(part[0]) is not str:  # pylint: disable=unidiomatic-typecheck
    # An option is plain text, except 'alt=' / 'link=' values, which may hold markup.
    if part and type(part[0]) is str and "=" in part[0]:  # pylint: disable=unidiomatic-typecheck
      key = part[0].split("=", 1)[0].strip().lower()
      return key in _IMAGE_KEYS
    return False
  value = part[0].strip()
  if "=" in value:
    return value.split("=", 1)[0].strip().lower() in _IMAGE_KEYS
  lowered = value.lower()
  return lowered in _IMAGE_KEYWORDS or bool(_IMAGE_SIZE.match(lowered))


class _Renderer:
  """Walks a page's tree (mw_tree.parse_nodes) and renders plain text, links and categories.

  Prose is rendered where it stands. Non-prose containers met on the way (tables, template
  parameters, captions, gallery lines) are queued as pieces (`pending`) and
  rendered after the prose by `render_pieces`, each on its own line(s); a piece that yields no
  mention is removed again.
  """

  def __init__(self, page_title: str, site: Optional[namespaces.Site] = None):
    self.site = site or namespaces.DEFAULT_SITE
    self.page_title = self.site.normalize_page_title(page_title)
    self.links: List[Link] = []
    self.categories: List[str] = []
    self.dropped: Dict[str, int] = {}
    self.lead_end: Optional[int] = None
    self.source = SOURCE_PROSE  # where the nodes being walked come from
    self.pending: List[Tuple[str, Sequence]] = []  # (source, nodes) of queued pieces
    self.switches: Dict[str, None] = {}  # behaviour switches met ('__DISAMBIG__'), in order
    self.templates: Dict[str, None] = {}  # names of the templates met (_template_name)

  def count(self, reason: str, n: int = 1) -> None:
    if n:
      self.dropped[reason] = self.dropped.get(reason, 0) + n

  def count_links_in(self, nodes: mw_tree.Nodes, reason: str) -> None:
    """Counts the wikilinks inside dropped nodes (they never become mentions)."""
    self.count(reason, _source(nodes).count("[["))

  def count_attribute_links(self, node) -> None:
    """Counts the wikilinks in a tag's attributes ('<ref name="[[X]]">'); never shown."""
    for attribute in node.attributes:
      if attribute.value is not None and _may_hold_links(attribute.value):
        self.count("in_attribute", _count_links(attribute.value))

  def defer(self, source: str, nodes: Sequence) -> None:
    """Queues `nodes` as a piece; inside a piece, the outermost source is kept."""
    if _may_hold_links(nodes):
      self.pending.append((source if self.source == SOURCE_PROSE else self.source, nodes))

  def render_pieces(self, out: _Emitter) -> None:
    """Renders the queued pieces (and the pieces queued meanwhile) after the text so far."""
    i = 0
    while i < len(self.pending):
      self.source, nodes = self.pending[i]
      i += 1
      state = out.begin_piece()
      n_links = len(self.links)
      self.walk(nodes, out, mentions=True)
      if len(self.links) == n_links:
        out.rollback(state)
    self.pending = []
    self.source = SOURCE_PROSE

  def render_inline(self, nodes: Optional[mw_tree.Nodes]) -> str:
    """Renders a sub-tree (link text, heading) as one clean line; its links are not mentions."""
    if nodes is None:
      return ""
    value = _one_text(nodes)
    if value is not None and "''" not in value and "__" not in value and "<" not in value:
      # Most link texts and titles: what walk and _Emitter.text make of one run of text without
      # markup, cleaned, without a renderer and emitter of its own (issue 17).
      return _clean_inline(_visible(value))
    sub = _Renderer(self.page_title, self.site)
    sub.categories = self.categories  # a category inside link text still counts
    sub.pending = self.pending  # so do refs, tables, templates inside link text
    sub.source = self.source
    sub.switches, sub.templates = self.switches, self.templates
    out = _Emitter()
    sub.walk(nodes, out, mentions=False)
    for reason, n in sub.dropped.items():
      self.count(reason, n)
    return _clean_inline(out.value())

  def walk(self, node_list: mw_tree.Nodes, out: _Emitter, mentions: bool) -> None:
    skip = 0  # characters of the next text consumed as a link trail
    for i, node in enumerate(node_list):
      kind = type(node)
      if kind is str:
        value = node[skip:] if skip else node
        skip = 0
        if "''" in value:
          value = _APOSTROPHES.sub(_apostrophes, value)
        if "__" in value:
          for switch in _BEHAVIOR_SWITCH.findall(value):
            self.switches.setdefault(switch)
          value = _BEHAVIOR_SWITCH.sub("", value)
        if "<" in value:  # an unclosed '<small>' or a stray '</span>' stays text in the tree
          value = _STRAY_TAG.sub(_stray_tag, value)
        out.text(_visible(value))
        continue
      skip = 0
      if kind is mw_tree.Wikilink:
        trail = ""
        following = node_list[i + 1] if i + 1 < len(node_list) else None
        if type(following) is str:  # pylint: disable=unidiomatic-typecheck
          link_trail = self.site.link_trail
          match = link_trail.match(following) if link_trail else None
          if match:
            trail = match.group(0)
        if self.wikilink(node, out, mentions, trail):
          skip = len(trail)
      elif kind is mw_tree.HTMLEntity:
        try:
          value = node.normalize()
        except (ValueError, OverflowError):
          value = str(node)
        out.text(_visible(value))
      elif kind is mw_tree.Tag:
        self.tag(node, out, mentions)
      elif kind is mw_tree.Heading:
        if self.lead_end is None and self.source == SOURCE_PROSE:
          self.lead_end = out.length
        out.line_break()
        self.walk(node.title, out, mentions)
        out.line_break()
      elif kind is mw_tree.ExternalLink:
        if node.title is not None:
          self.walk(node.title, out, mentions=False)
        elif not node.brackets:
          out.text(_source(node.url))
        else:
          out.dropped()
      elif kind is mw_tree.Template:
        inline = self.text_template(node, out, mentions)
        if inline is None:
          out.dropped()
        self.defer_template(node, inline or ())
      elif kind is mw_tree.Argument:
        if node.default is not None:
          self.defer(SOURCE_TEMPLATE, node.default)
        out.dropped()
      else:  # Comment, and anything unknown
        out.dropped()

  def text_template(self, node, out: _Emitter, mentions: bool) -> Optional[List[int]]:
    """Renders the few inline templates whose output is plain prose.

    Returns:
      The indices (into node.params) of the parameters rendered here ([] for a constant
      template); None for every other template (nothing rendered).
    """
    name = _template_name(node, self.site)
    function = _parser_function(node)
    self.templates.setdefault(function[0] if function else name)
    if function is not None:
      return self.magic_word(node, function[0], function[1], out)
    if name in _CONSTANT_TEMPLATES:
      out.text(_CONSTANT_TEMPLATES[name])
      return []
    if _source(node.name).strip() in _TITLE_VARIABLES and not node.params:
      out.text(self.page_title)
      return []
    rule = _TEXT_TEMPLATES.get(name)
    if rule is None:
      return self.computed_template(node, name, out, mentions)
    positional = [i for i, p in enumerate(node.params) if not p.showkey]
    if rule == "first":
      chosen = positional[:1]
    elif rule == "second":
      chosen = positional[1:2]
    elif rule == "last":
      chosen = positional[-1:]
    else:  # 'convert': value and unit
      chosen = positional[:2]
    if not chosen:
      return None
    for n, index in enumerate(chosen):
      if n:
        out.space()
      self.walk(node.params[index].value, out, mentions)
    return chosen

  def magic_word(self, node, function: str, argument: Sequence,
                 out: _Emitter) -> Optional[List[int]]:
    """Renders a parser function that shows text: {{formatnum:..}} (English digit groups;
    options R and NOSEP), {{lc:..}}, {{uc:..}}, {{lcfirst:..}}, {{ucfirst:..}}, and
    {{PAGENAME:..}} and the like (their argument). Others ({{#if:..}}, {{#invoke:..}}, ...)
    render nothing (None). Links in the argument are rendered as text, not mentions."""
    if function.upper() in _TITLE_VARIABLES:
      text = self.render_inline(argument)
    elif function in _TEXT_FUNCTIONS:
      text = self.render_inline(argument)
      options = {_source(p.value).strip().upper() for p in node.params if not p.showkey}
      if function == "formatnum":
        if "NOSEP" not in options:
          text = format_number(text, raw="R" in options)
      else:
        text = _CASE_FUNCTIONS[function](text)
    else:
      return None
    if not text:
      return None
    out.text(text)
    return list(range(len(node.params)))

  def computed_template(self, node, name: str, out: _Emitter,
                        mentions: bool) -> Optional[List[int]]:
    """Renders templates whose text is computed from plain parameters: dates ({{birth
    date|1950|1|2}} -> 'January 2, 1950', df=y -> '2 January 1950'; the '... and age'
    variants show the first date only, never an age that depends on the day of the run),
    {{circa|1900}} -> 'c. 1900', {{frac|1|2}} -> '1/2', {{as of|2010|3}} -> 'As of March
    2010'; an alt= text replaces the computed one and is rendered like prose, links
    included. None (nothing rendered) for other templates and for parameters that do not
    parse."""
    if name not in _COMPUTED_TEMPLATES:
      return None
    for index, param in enumerate(node.params):
      if param.showkey and _source(param.name).strip().lower() == "alt":
        self.walk(param.value, out, mentions)
        return [index]
    positional = [i for i, p in enumerate(node.params) if not p.showkey]
    named = {_source(p.name).strip().lower(): _source(p.value).strip()
             for p in node.params if p.showkey}
    values = [_clean_inline(self.render_inline(node.params[i].value)) for i in positional]
    day_first = named.get("df", "").lower() in _YES
    try:
      if name in _DATE_TEMPLATES:
        if not values:
          return None
        text = format_date(*(values[:3] + [""] * (3 - len(values[:3]))), day_first=day_first)
      elif name in _CIRCA_TEMPLATES:
        text = f"c. {values[0]}" if values and values[0] else "c."
      elif name in _FRACTION_TEMPLATES:
        parts = values[:3]
        if not parts or not all(parts):
          return None
        if len(parts) == 1:
          text = f"1/{parts[0]}"
        elif len(parts) == 2:
          text = f"{parts[0]}/{parts[1]}"
        else:
          text = f"{parts[0]} {parts[1]}/{parts[2]}"
      elif name in _AS_OF_TEMPLATES:
        if not values:
          return None
        when = format_date(*(values[:3] + [""] * (3 - len(values[:3]))), day_first=day_first)
        text = ("as of " if named.get("lc", "").lower() in _YES else "As of ") + when
      else:
        return None
    except ValueError:
      return None
    out.text(text)
    return list(range(len(node.params)))

  def defer_template(self, node, rendered: Sequence[int]) -> None:
    """Queues every parameter value of a template (but `rendered` ones) as a piece."""
    if _may_hold_links(node.name):
      self.count("in_param_name", _count_links(node.name))
    for index, param in enumerate(node.params):
      if param.showkey and _may_hold_links(param.name):
        self.count("in_param_name", _count_links(param.name))
      if index not in rendered:
        self.defer(SOURCE_TEMPLATE, param.value)

  def defer_table(self, node, source: str) -> None:
    """Queues each cell (and caption) of a table as a piece; text outside cells as one more."""
    stray: List = []

    def visit(nodes: Sequence, top: bool) -> None:
      for child in nodes:
        if type(child) is mw_tree.Tag:  # pylint: disable=unidiomatic-typecheck
          name = _source(child.tag).strip().lower()
          if name in _CELL_TAGS or name in _ROW_TAGS:
            if stray:
              self.defer(source, list(stray))
              stray.clear()
            contents = child.contents
            if child.attributes:
              self.count_attribute_links(child)
            if name in _ROW_TAGS:
              visit(contents, False)
              continue
            if (top and child.wiki_markup == "|" and contents
                and type(contents[0]) is str  # pylint: disable=unidiomatic-typecheck
                and contents[0].startswith("+")):  # '|+ caption' read as a cell
              contents = [contents[0][1:]] + contents[1:]
            self.defer(source, contents)
            continue
        stray.append(child)

    visit(node.contents, True)
    if stray:
      self.defer(source, stray)

  def defer_gallery(self, node) -> None:
    """Queues the caption of each '<gallery>' line ('File|options|caption') as a piece."""
    for line in _source(node.contents).split("\n"):
      if "[[" not in line:
        continue
      parts = _split_pipes(mw_tree.parse_nodes(line, skip_style_tags=True))
      self.defer_caption(parts[1:], SOURCE_GALLERY)

  def defer_caption(self, parts: Sequence[Sequence], source: str) -> None:
    """Queues the caption (the last part that is not an image option) as a piece."""
    caption = None
    for index in range(len(parts) - 1, -1, -1):
      if not _is_image_option(parts[index]):
        caption = index
        break
    for index, part in enumerate(parts):
      if index == caption:
        self.defer(source, part)
      elif _may_hold_links(part):  # alt= text, or an earlier part MediaWiki ignores
        self.count("in_file_option", _count_links(part))

  def tag(self, node, out: _Emitter, mentions: bool) -> None:
    markup = node.wiki_markup
    if markup and markup in _LIST_MARKUP:
      out.line_break(list_item=True)
      return
    name = _source(node.tag).strip().lower()
    if node.attributes:
      self.count_attribute_links(node)
    if name in _DROP_TAGS:
      if not node.self_closing:
        source = _PIECE_TAGS.get(name)
        if source == SOURCE_TABLE:
          if name == "table":
            self.defer_table(node, source)
          else:
            self.defer(source, node.contents)
        elif source == SOURCE_GALLERY:
          self.defer_gallery(node)
        elif name in _REF_TAGS:
          # Citations are not training mentions (bug bank wp-11): counted, never rendered.
          self.count_links_in(node.contents, "in_ref")
        else:
          self.count_links_in([node], "in_other_tag")
      out.dropped()
      return
    if name == "br":
      out.space()
      return
    block = name in _BLOCK_TAGS
    if block:
      out.line_break(list_item=name in ("li", "dd", "dt"))
    if not node.self_closing:
      self.walk(node.contents, out, mentions)
    if block:
      out.line_break()

  def wikilink(self, node, out: _Emitter, mentions: bool, trail: str) -> bool:
    """Renders one wikilink; returns True when `trail` was used."""
    raw_title = _source(node.title)
    kind, rest, leading_colon = self.site.classify_title(raw_title)
    if kind == namespaces.CATEGORY and not leading_colon:
      name = self.site.normalize_target(rest, namespaces.CATEGORY_NAMESPACE)
      if name and name not in self.categories:
        self.categories.append(name)
      self.count("category")
      return False
    if kind == namespaces.FILE and not leading_colon:
      self.count("file")
      if node.text is not None:
        self.defer_caption(_split_pipes(node.text), SOURCE_CAPTION)
      out.dropped()
      return False
    if kind == namespaces.INTERLANGUAGE and not leading_colon:
      self.count("interlanguage")
      out.dropped()
      return False
    if kind == namespaces.EMPTY:
      self.count("empty")
      out.dropped()
      return False
    # Visible text: the piped text, the pipe trick, or the title as written.
    if node.text is not None:
      anchor = self.render_inline(node.text)
      if not anchor and not _source(node.text).strip():
        if _source(node.text):  # '[[Foo| ]]'
          anchor = ""
        else:
          anchor = pipe_trick(_clean_inline(self.render_inline(node.title)), self.site)
    else:
      anchor = self.render_inline(node.title)
      if anchor.startswith(":"):
        anchor = anchor[1:].lstrip()
      if "%" in anchor:  # MediaWiki shows a percent-encoded title decoded
        decoded = _clean_inline(urllib.parse.unquote(anchor))
        if decoded.isprintable():
          anchor = decoded
    if anchor and trail:
      anchor += trail
    if kind != namespaces.MAIN:
      self.count({namespaces.INTERLANGUAGE: namespaces.INTERWIKI,
                  namespaces.INTERWIKI: namespaces.INTERWIKI}.get(
                      kind, namespaces.OTHER_NAMESPACE))
      if anchor:
        out.atom(anchor)
      return bool(anchor)
    if rest.startswith("#"):
      target = self.page_title  # same-page section link
    else:
      target = self.site.normalize_target(rest)
    if not target:
      self.count("invalid_target" if rest.split("#", 1)[0].strip() else "empty")
      if anchor:
        out.atom(anchor)
      return bool(anchor)
    if not anchor:
      self.count("empty_anchor")
      out.dropped()
      return False
    start, end = out.atom(anchor)
    if mentions:
      self.links.append(Link(start=start, end=end, target=target, anchor=anchor,
                             source=self.source))
    else:
      self.count("nested_link")
    return True


def _count_links(nodes: Sequence) -> int:
  """Number of wikilinks written in `nodes` (any depth): '[[' in their wikitext."""
  return sum(str(node).count("[[") for node in nodes if not isinstance(node, _PLAIN_NODES))


def _is_prose(line: str) -> bool:
  return any(c.isalpha() for c in line) and not any(
      bad in line for bad in ("{{", "}}", "[[", "]]", "<ref", "||", "{|", "|}"))


def _first_paragraph(text: str, lead_end: Optional[int], list_lines: Sequence[int]) -> str:
  """First prose line of the lead section; else the first prose line anywhere."""
  list_starts = set(list_lines)
  fallback = ""
  pos = 0
  for line in text.split("\n"):
    start = pos
    pos += len(line) + 1
    if start in list_starts or not _is_prose(line):
      continue
    if lead_end is None or start < lead_end:
      return line
    if not fallback:
      fallback = line
  return fallback


def parse_article(wikitext: str, page_title: str,
                  site: Optional[namespaces.Site] = None) -> ParsedArticle:
  """Renders an article's wikitext to plain text with its links, categories, first paragraph.

  Rules (MediaWiki rendering, reduced to what mention and entity features need):
  - prose (paragraphs, headings, lists, formatting) is rendered where it stands: formatting
    ('' ''', <b>, <span>, ...) keeps its contents; <br> becomes a space; headings and list
    items are lines of their own; HTML entities are decoded exactly once (a malformed one like
    '&000nbsp;' stays as written) and NBSP becomes a plain space; a few inline templates
    ({{nowrap|..}}, {{lang|..}}, {{convert|..}}, ...) render their visible parameter;
  - magic words and templates whose text MediaWiki computes are rendered, so that numbers and
    dates do not vanish from sentences and first paragraphs: {{formatnum:1200}} -> '1,200'
    (R, NOSEP), {{lc:}}, {{uc:}}, {{lcfirst:}}, {{ucfirst:}}, {{PAGENAME}} and its kin (the
    page title); {{birth date|1950|1|2}} -> 'January 2, 1950' (df=y: '2 January 1950'; also
    death/start/end date and their '... and age' forms, date only), {{circa|1900}} -> 'c.
    1900', {{frac|3|1|2}} -> '3 1/2', {{as of|2010|3}} -> 'As of March 2010' (alt= text and
    its links instead when given). Other parser functions ({{#if:}}, {{#invoke:}},
    {{#expr:}}, ...) and {{lang-xx|..}} glosses render nothing;
  - behaviour switches ('__DISAMBIG__', '__NOTOC__') render nothing and are recorded in
    `switches`, the names of the templates called in `templates` (parsers.page_kinds reads
    both to tell disambiguation pages);
  - templates (any nesting), tables, <ref> bodies, File:/Image: captions and <gallery> lines
    leave no trace in the prose (no name, parameter name, attribute or option, no '{{', '|');
    instead, each template parameter value, table cell (header cells and '|+' captions too,
    attributes left out), caption (the last part of '[[File:..|..]]' that is not an image
    option like thumb, 220px, alt=) and gallery caption is rendered like prose as a piece of
    its own, on its own line(s) after the prose, and kept only when it holds a mention;
    pieces nested in pieces (a template in a cell) are pieces of their own too. So every
    link outside <ref> becomes a mention once, and a mention's sentence and context (which
    never cross a line) come only from its own piece;
  - <ref> bodies (citations) are dropped with their contents and their links counted as
    'in_ref': not training mentions (bug bank wp-11);
  - comments, <math>, <timeline>, <imagemap>, <syntaxhighlight>, <score>, <includeonly> and
    similar are dropped with their contents; links inside them are counted in `dropped`;
  - '[[Category:X|key]]' (any case, anywhere) adds 'X' to categories; '[[File:...]]' / Image:
    / Media: render nothing in place; '[[fr:X]]' renders nothing; leading-colon, interwiki
    and other-namespace links render their text only;
  - a main-namespace link is a mention: anchor = piped text, or the title as written, or the
    pipe trick ('[[Pine Hill (Ohio)|]]' -> 'Pine Hill'); a link trail extends it
    ('[[bus]]es' -> 'buses'); '[[#Section|x]]' links to the page itself; '[[]]', '[[|x]]',
    '[[ ]]' are not links; a link inside another link's text is not a mention.

  - wikitext that is still XML-escaped as a whole (no '<' anywhere, but an escaped tag like
    '&lt;ref&gt;') is unescaped once first, so its refs are refs and not visible text.

  Args:
    wikitext: the page's wikitext (XML entities already decoded by the XML parser).
    page_title: the page's title (target of same-page section links).
    site: the wiki's title rules (namespaces.site_for of the dump's <siteinfo>): which link
      prefixes are categories, files, other namespaces, interlanguage or interwiki links, the
      link trail, the title case. None: English Wikipedia's (namespaces.DEFAULT_SITE).

  Returns:
    ParsedArticle; for every link, text[link.start:link.end] == link.anchor. The first
    paragraph comes from the prose only (text[:prose_end]).

  Raises:
    mw_tree.UnclosedMarkupError: so many unclosed openers ('{{a|', '<span>', '[http://...')
      that mwparserfromhell's tokenizer would take minutes or more (mw_tree.check_unclosed;
      its time is quadratic in them); the extraction skips such a page and reports why.
  """
  if "&lt;" in wikitext and "<" not in wikitext and _ESCAPED_TAG.search(wikitext):
    # Wikitext saved still XML-escaped ('&lt;ref&gt;', '&quot;' for '<ref>', '"'): without a
    # single real tag, an escaped <ref> or <br> is markup, not text meant to be shown.
    wikitext = xml.sax.saxutils.unescape(wikitext, {"&quot;": '"', "&apos;": "'"})
  if ":{|" in wikitext:
    # MediaWiki accepts an indented table (':{|'); mwparserfromhell only sees '{|' at a line
    # start, so the indentation is removed before parsing.
    wikitext = _INDENTED_TABLE.sub("", wikitext)
  mw_tree.check_unclosed(wikitext)
  # The renderer reads a <ref>'s contents only as wikitext (count_links_in): not built.
  nodes = mw_tree.parse_nodes(wikitext, skip_style_tags=True, opaque_tags=_REF_TAGS)
  renderer = _Renderer(page_title, site)
  out = _Emitter()
  renderer.walk(nodes, out, mentions=True)
  prose_end = out.length
  first = _first_paragraph(out.value(), renderer.lead_end, out.list_lines)
  list_links = count_list_item_links(out.value(), renderer.links, out.list_lines)
  renderer.render_pieces(out)
  return ParsedArticle(text=out.value(), links=renderer.links,
                       categories=renderer.categories, first_paragraph=first,
                       dropped=renderer.dropped, prose_end=prose_end,
                       switches=tuple(renderer.switches), templates=tuple(renderer.templates),
                       list_item_links=list_links)


def count_list_item_links(text: str, links: Sequence[Link], list_lines: Sequence[int]) -> int:
  """How many of `links` (in text order) lie on a list-item line of `text` (lines starting at
  an offset in `list_lines`, the TextEmitter's)."""
  starts = set(list_lines)
  n = 0
  for link in links:
    if text.rfind("\n", 0, link.start) + 1 in starts:
      n += 1
  return n


# The text builder and first-paragraph rule, shared with beam_pipelines.parsers.html_article
# (the HTML renderer builds its plain text exactly as this one does).
TextEmitter = _Emitter
visible = _visible
first_paragraph = _first_paragraph
