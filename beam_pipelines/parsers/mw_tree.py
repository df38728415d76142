"""mwparserfromhell's parse, with a faster tree builder: the same tree, built in less time.

mwparserfromhell parses in two steps: its C tokenizer turns wikitext into tokens (fast), and a
Python Builder turns the tokens into the node tree (Wikicode, Text, Wikilink, Template, Tag,
...). Profiling the extraction (issue 17) showed the builder taking about half of the time of
a page, most of it in the nodes' property setters, each of which calls
mwparserfromhell.utils.parse_anything (four imports, then type checks) on values that are
already Wikicode. `FastBuilder` builds the same nodes without those setters: it creates each
node and sets the attributes its constructor would set, for the nodes the tokenizer produces
most (text, links, templates, parameters, tags and their quoted attributes, headings, external
links, arguments); comments, HTML entities and unquoted attributes are built by
mwparserfromhell's own handlers and constructors.

The tree is the one mwparserfromhell.parse gives, attribute for attribute: `parse` checks
this once per process on a sample that holds every kind of node (`_self_check`, comparing the
attributes of every node of both trees) and uses mwparserfromhell.parse itself when the check
fails (another version of the library whose nodes keep other attributes), so a library upgrade
can make parsing slower, never different. The token loops below follow
mwparserfromhell/parser/builder.py (0.7, MIT licence).

One deliberate difference, on request only (`parse(..., opaque_tags=...)`): the contents of
the named tags (the renderer's <ref>: a third of the tokens of English articles, of which it
only counts the links) come as one Text node of their wikitext, joined from the tokens
without building their nodes (_opaque_source); the wikitext of every node stays the same.
"""

import collections
import logging
import re
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import mwparserfromhell
from mwparserfromhell import nodes as mw_nodes
from mwparserfromhell.parser import builder as mw_builder
from mwparserfromhell.parser import tokens
from mwparserfromhell.smart_list import SmartList
from mwparserfromhell.wikicode import Wikicode

try:  # the C tokenizer, as mwparserfromhell.parser.Parser picks it
  from mwparserfromhell.parser import CTokenizer as _Tokenizer
  if _Tokenizer is None:
    raise ImportError
except ImportError:  # pragma: no cover (pure-Python install)
  from mwparserfromhell.parser.tokenizer import Tokenizer as _Tokenizer

_new = object.__new__
_Text, _Wikilink, _Template, _Tag = (mw_nodes.Text, mw_nodes.Wikilink, mw_nodes.Template,
                                     mw_nodes.Tag)
_Heading, _ExternalLink, _Argument = mw_nodes.Heading, mw_nodes.ExternalLink, mw_nodes.Argument
_Parameter, _Attribute = mw_nodes.extras.Parameter, mw_nodes.extras.Attribute


_new_list = list.__new__
_extend = list.extend


def _code(nodes: List) -> Wikicode:
  """Wikicode(SmartList(nodes)) without their Python-level __init__ and __new__ (the same
  attributes: the SmartList's nodes and an empty `_children`, the Wikicode's `_nodes`)."""
  smart = _new_list(SmartList)
  _extend(smart, nodes)
  smart._children = {}  # pylint: disable=protected-access
  code = _new(Wikicode)
  code._nodes = smart  # pylint: disable=protected-access
  return code


def _text(value: Any) -> mw_nodes.Text:
  node = _new(_Text)
  node._value = value if type(value) is str else str(value)  # pylint: disable=protected-access
  return node


# pylint: disable=protected-access
class FastBuilder(mw_builder.Builder):
  """mwparserfromhell's Builder, creating the frequent nodes without their property setters.

  Each construct's handler reads its tokens from the shared reversed token list (`_tokens`,
  the next token last) and collects the nodes of each of its parts in a list of its own
  (_collect: text tokens become Text nodes in place, other tokens go to their handler), where
  mwparserfromhell's Builder pushes and pops a stack per part and dispatches every token,
  text included, through _handle_token (issue 17: the builder was a quarter of a page's
  parse). Comments, HTML entities and unquoted attributes are built by mwparserfromhell's own
  handlers and constructors.

  Args:
    opaque_tags: lower-case names of tags whose contents the caller only reads as wikitext
      (str): each such tag's contents become one Text node holding their wikitext, made from
      the tokens (_opaque_source) without building their nodes, when every token inside is of
      a kind whose wikitext is fixed (text, templates, arguments, wikilinks, external links,
      HTML entities, comments); contents holding a tag or a heading are built as usual. The
      wikitext of the tree is the same either way, its nodes are not.
  """

  def __init__(self, opaque_tags: FrozenSet[str] = frozenset()):
    super().__init__()
    self._opaque_tags = opaque_tags

  def _handle_token(self, token):
    handler = _FAST_HANDLERS.get(type(token))
    if handler is not None:
      return handler(self, token)
    return super()._handle_token(token)

  def _pop(self):
    return _code(self._stacks.pop())

  def _handle_text(self, token):
    return _text(token.get("text"))

  def _collect(self, stops: Tuple[type, ...], handler: str) -> Tuple[List, Any]:
    """The nodes of the tokens up to the next token of a kind in `stops` (taken off the
    list), and that token. Raises ParserError ("`handler`() missed a close token") when the
    tokens end first."""
    nodes = []
    append = nodes.append
    stack = self._tokens
    pop = stack.pop
    handlers = _FAST_HANDLERS
    while stack:
      token = pop()
      kind = type(token)
      if kind is _Text_token:
        node = _new(_Text)
        value = token.get("text")
        node._value = value if type(value) is str else str(value)
        append(node)
      elif kind in stops:
        return nodes, token
      else:
        fast = handlers.get(kind)
        append(fast(self, token) if fast is not None else self._handle_token(token))
    if handler == "build":  # the whole text: its tokens end it
      return nodes, None
    raise mw_builder.ParserError(f"{handler}() missed a close token")

  def _handle_template(self, token):
    nodes, token = self._collect(_TEMPLATE_STOPS, "_handle_template")
    name = _code(nodes)
    params = []
    default = 1
    collect = self._collect
    while type(token) is tokens.TemplateParamSeparator:
      # One parameter: [key '='] value, up to the next separator or the close.
      key = None
      nodes, token = collect(_PARAMETER_STOPS, "_handle_parameter")
      while type(token) is tokens.TemplateParamEquals:
        key = _code(nodes)
        nodes, token = collect(_PARAMETER_STOPS, "_handle_parameter")
      param = _new(_Parameter)
      if key is None:
        param._name, param._value, param._showkey = _code([_text(str(default))]), _code(
            nodes), False
        default += 1
      else:
        param._name, param._value, param._showkey = key, _code(nodes), True
      params.append(param)
    node = _new(_Template)
    node._name, node._params = name, params
    return node

  def _two_parts(self, stops, handler: str):
    """The code before and after the last separator (stops[0]) up to the close (stops[1]),
    the second None when there is no separator, as mwparserfromhell's
    _handle_argument/_handle_wikilink (where a later separator replaces the first part)."""
    nodes, token = self._collect(stops, handler)
    if type(token) is not stops[0]:
      return _code(nodes), None
    while True:
      first = _code(nodes)
      nodes, token = self._collect(stops, handler)
      if type(token) is not stops[0]:
        return first, _code(nodes)

  def _handle_argument(self, token):
    node = _new(_Argument)
    node._name, node._default = self._two_parts(_ARGUMENT_STOPS, "_handle_argument")
    return node

  def _handle_wikilink(self, token):
    node = _new(_Wikilink)
    node._title, node._text = self._two_parts(_WIKILINK_STOPS, "_handle_wikilink")
    return node

  def _handle_external_link(self, token):
    brackets, url, suppress_space = token.get("brackets"), None, None
    nodes, token = self._collect(_EXTERNAL_LINK_STOPS, "_handle_external_link")
    while type(token) is tokens.ExternalLinkSeparator:
      url = _code(nodes)
      suppress_space = token.get("suppress_space")
      nodes, token = self._collect(_EXTERNAL_LINK_STOPS, "_handle_external_link")
    node = _new(_ExternalLink)
    if url is not None:
      node._url, node._title = url, _code(nodes)
    else:
      node._url, node._title = _code(nodes), None
    node._brackets = bool(brackets)
    node.suppress_space = suppress_space is True  # a plain attribute
    return node

  def _handle_heading(self, token):
    level = token.get("level")
    nodes, _ = self._collect(_HEADING_STOPS, "_handle_heading")
    title = _code(nodes)
    if type(level) is not int or not 1 <= level <= 6:
      return _Heading(title, level)  # its setter's checks and errors
    node = _new(_Heading)
    node._title, node._level = title, level
    return node

  def _handle_attribute(self, start):
    name = quotes = None
    nodes = []
    stack = self._tokens
    while stack:
      token = stack.pop()
      kind = type(token)
      if kind is _Text_token:
        nodes.append(_text(token.get("text")))
      elif kind is tokens.TagAttrEquals:
        name = _code(nodes)
        nodes = []
      elif kind is tokens.TagAttrQuote:
        quotes = token.get("char")
      elif (kind is tokens.TagAttrStart or kind is tokens.TagCloseOpen
            or kind is tokens.TagCloseSelfclose):
        stack.append(token)
        if name:
          value = _code(nodes)
        else:
          name, value = _code(nodes), None
        pads = (start.get("pad_first"), start.get("pad_before_eq"), start.get("pad_after_eq"))
        if (quotes not in ('"', "'") and (quotes or value is not None)) or any(
            pad and (type(pad) is not str or not pad.isspace()) for pad in pads):
          # Unquoted values and odd paddings: the constructor's checks (and errors).
          return _Attribute(name, value, quotes, *pads)
        # What Attribute.__init__ leaves: its quotes setter overrides what its value setter
        # chose, and checks only what a quoted value never fails.
        node = _new(_Attribute)
        node._name, node._value, node._quotes = name, value, quotes if quotes else None
        node._pad_first, node._pad_before_eq, node._pad_after_eq = (
            pad if pad else "" for pad in pads)
        return node
      else:
        nodes.append(self._handle_token(token))
    raise mw_builder.ParserError("_handle_attribute() missed a close token")

  def _handle_tag(self, token):
    tag = None
    padding = None
    implicit, attrs, contents, closing_tag = False, [], None, None
    wiki_markup, invalid = token.get("wiki_markup"), token.get("invalid") or False
    wiki_style_separator, closing_wiki_markup = None, wiki_markup
    nodes = []  # of the part being read: the tag's name, its contents, its closing name
    stack = self._tokens
    while stack:
      token = stack.pop()
      kind = type(token)
      if kind is _Text_token:
        nodes.append(_text(token.get("text")))
      elif kind is tokens.TagAttrStart:
        attrs.append(self._handle_attribute(token))
      elif kind is tokens.TagCloseOpen:
        wiki_style_separator = token.get("wiki_markup")
        padding = token.get("padding") or ""
        tag = _code(nodes)
        nodes = []
        if self._opaque_tags:
          name = tag._nodes
          if (len(name) == 1 and type(name[0]) is _Text
              and name[0]._value.strip().lower() in self._opaque_tags):
            found = _opaque_source(stack)
            if found is not None:
              source, close_at = found
              del stack[close_at + 1:]
              if source:
                nodes.append(_text(source))
      elif kind is tokens.TagOpenClose:
        closing_wiki_markup = token.get("wiki_markup")
        contents = _code(nodes)
        nodes = []
      elif kind is tokens.TagCloseSelfclose or kind is tokens.TagCloseClose:
        if kind is tokens.TagCloseSelfclose:
          closing_wiki_markup = token.get("wiki_markup")
          tag = _code(nodes)
          self_closing = True
          padding = token.get("padding") or ""
          implicit = token.get("implicit") or False
        else:
          self_closing = False
          closing_tag = _code(nodes)
        assert tag is not None
        assert padding is not None
        if padding and (type(padding) is not str or not padding.isspace()):
          # The constructor's padding check (and its error).
          return _Tag(tag, contents, attrs, wiki_markup, self_closing, invalid, implicit,
                      padding, closing_tag, wiki_style_separator, closing_wiki_markup)
        node = _new(_Tag)
        # What Tag.__init__ sets, in its order (tag, contents, attrs, wiki_markup, ...).
        node._tag = node._closing_tag = tag
        node._contents = contents if contents is not None else _code([])
        node._attrs = attrs if attrs else []
        node._wiki_markup = str(wiki_markup) if wiki_markup else None
        node._closing_wiki_markup = node._wiki_markup
        node._self_closing = bool(self_closing)
        node._invalid = bool(invalid)
        node._implicit = bool(implicit)
        node._padding = padding
        if closing_tag is not None:
          node._closing_tag = closing_tag
        node._wiki_style_separator = str(wiki_style_separator) if wiki_style_separator else None
        if closing_wiki_markup is not None:
          node._closing_wiki_markup = str(closing_wiki_markup) if closing_wiki_markup else None
        return node
      else:
        nodes.append(self._handle_token(token))
    raise mw_builder.ParserError("_handle_tag() missed a close token")

  def build(self, tokenlist):
    tokenlist.reverse()
    self._tokens = tokenlist
    nodes, _ = self._collect((), "build")
    return _code(nodes)
# pylint: enable=protected-access


# The wikitext of the tokens that always stand for the same characters (_opaque_source).
_FIXED_SOURCE = {
    tokens.TemplateOpen: "{{", tokens.TemplateParamSeparator: "|",
    tokens.TemplateParamEquals: "=", tokens.TemplateClose: "}}", tokens.ArgumentOpen: "{{{",
    tokens.ArgumentSeparator: "|", tokens.ArgumentClose: "}}}", tokens.WikilinkOpen: "[[",
    tokens.WikilinkSeparator: "|", tokens.WikilinkClose: "]]", tokens.HTMLEntityStart: "&",
    tokens.HTMLEntityNumeric: "#", tokens.HTMLEntityEnd: ";", tokens.CommentStart: "<!--",
    tokens.CommentEnd: "-->"}
# How each construct's tokens move its state (_opaque_source): token kind -> {state before:
# state after}; None after: the construct closes. States: template name 'tn', parameter
# before '=' 't', after it 'T'; argument name 'a', default 'A'; wikilink title 'w', text 'W';
# external link with brackets 'eb', its title 'EB', free link 'ef'. A token met in another
# state (a second separator, which the builder would let replace what came before it; a free
# link's title, which is not printed) makes the contents built, not joined.
_MOVES = {
    tokens.TemplateParamSeparator: {"tn": "t", "t": "t", "T": "t"},
    tokens.TemplateParamEquals: {"t": "T"},
    tokens.TemplateClose: {"tn": None, "t": None, "T": None},
    tokens.ArgumentSeparator: {"a": "A"},
    tokens.ArgumentClose: {"a": None, "A": None},
    tokens.WikilinkSeparator: {"w": "W"},
    tokens.WikilinkClose: {"w": None, "W": None},
    tokens.ExternalLinkSeparator: {"eb": "EB"},
    tokens.ExternalLinkClose: {"eb": None, "EB": None, "ef": None},
}
_OPENS = {tokens.TemplateOpen: "tn", tokens.ArgumentOpen: "a", tokens.WikilinkOpen: "w"}
_Text_token = tokens.Text
# The tokens that end each part of a construct (FastBuilder._collect).
_TEMPLATE_STOPS = (tokens.TemplateParamSeparator, tokens.TemplateClose)
_PARAMETER_STOPS = (tokens.TemplateParamEquals, tokens.TemplateParamSeparator,
                    tokens.TemplateClose)
_ARGUMENT_STOPS = (tokens.ArgumentSeparator, tokens.ArgumentClose)
_WIKILINK_STOPS = (tokens.WikilinkSeparator, tokens.WikilinkClose)
_EXTERNAL_LINK_STOPS = (tokens.ExternalLinkSeparator, tokens.ExternalLinkClose)
_HEADING_STOPS = (tokens.HeadingEnd,)


def _opaque_source(stack: List) -> Optional[Tuple[str, int]]:
  """The wikitext of a tag's contents from its tokens, without nodes (FastBuilder's
  opaque_tags): `stack` is the builder's reversed token list, its last token the first of the
  contents. Returns (wikitext, index in `stack` of the TagOpenClose that ends the contents),
  or None when a token inside is not one whose wikitext is fixed or plain (a tag, a heading,
  a token out of its place: _MOVES) or no TagOpenClose follows: the caller builds the nodes.

  Each token stands for what the node mwparserfromhell builds of it prints (str): Template
  '{{' name ('|' [key '='] value)* '}}', Argument '{{{' name ['|' default] '}}}', Wikilink
  '[[' title ['|' text] ']]', ExternalLink '[' url [' ' (or '' with suppress_space) title]
  ']' with brackets, else its url, HTMLEntity '&' ['#' ['x' or 'X']] value ';', Comment
  '<!--' text '-->'.
  """
  parts = []
  append = parts.append
  fixed, moves, opens = _FIXED_SOURCE, _MOVES, _OPENS
  states = []  # of the constructs open, innermost last
  i = len(stack) - 1
  while i >= 0:
    token = stack[i]
    i -= 1
    kind = type(token)
    if kind is _Text_token:
      text = token.get("text")
      append(text if type(text) is str else str(text))
      continue
    if kind is tokens.TagOpenClose:
      return ("".join(parts), i + 1) if not states else None
    move = moves.get(kind)
    before = None
    if move is not None:
      if not states or states[-1] not in move:
        return None
      before = states[-1]
      after = move[before]
      if after is None:
        states.pop()
      else:
        states[-1] = after
    if kind is tokens.ExternalLinkOpen:
      brackets = bool(token.get("brackets"))
      states.append("eb" if brackets else "ef")
      append("[" if brackets else "")
    elif kind is tokens.ExternalLinkSeparator:
      append("" if token.get("suppress_space") is True else " ")
    elif kind is tokens.ExternalLinkClose:
      append("" if before == "ef" else "]")
    else:
      value = fixed.get(kind)
      if value is None:
        if kind is tokens.HTMLEntityHex and token.get("char") in ("x", "X"):
          value = token.get("char")
        else:
          return None
      append(value)
      if kind in opens:
        states.append(opens[kind])
  return None


_FAST_HANDLERS = {
    tokens.Text: FastBuilder._handle_text,
    tokens.TemplateOpen: FastBuilder._handle_template,
    tokens.ArgumentOpen: FastBuilder._handle_argument,
    tokens.WikilinkOpen: FastBuilder._handle_wikilink,
    tokens.ExternalLinkOpen: FastBuilder._handle_external_link,
    tokens.HeadingStart: FastBuilder._handle_heading,
    tokens.TagOpenOpen: FastBuilder._handle_tag,
}

# Wikitext holding every kind of node and tag form the builder makes (for _self_check).
_SAMPLE = """== Head ==
Text '''bold''' ''it'' [[Link]] [[Link|text [[nested]]]]s {{Tpl|a|b=c|{{inner|x}}|d}}
{{{arg}}} {{{arg|default [[x]]}}} [http://e.com title] [http://e.com] http://bare.org
&amp; &#123; &#x1F; <!-- comment --> <ref name="n" group = 'g'>cite [[In ref]]</ref>
<br/> <br> <references /> <span style="x">s</span> <b>unclosed <div class=x id = "a b" hidden>z</div>
* item
# item
; term : def
{| class="wikitable"
|+ caption
! h1 !! h2
|-
| cell || [[Cell link]]
|}
<gallery>
File:X.jpg|caption [[G]]
</gallery>
[[File:X.jpg|thumb|alt=a [[b]]|cap [[c]]]]
=== Level 3 ===
----
"""


def _same_tree(a: Any, b: Any, depth: int = 0) -> bool:
  """Whether two mwparserfromhell values are equal attribute for attribute (any depth)."""
  if type(a) is not type(b) or depth > 200:
    return False
  if isinstance(a, Wikicode):
    return vars(a).keys() == vars(b).keys() and _same_tree(a.nodes, b.nodes, depth + 1)
  if isinstance(a, list):
    if isinstance(a, SmartList) and a._children != b._children:  # pylint: disable=protected-access
      return False
    return len(a) == len(b) and all(_same_tree(x, y, depth + 1) for x, y in zip(a, b))
  if isinstance(a, (mw_nodes.Node, mw_nodes.extras.Attribute, _Parameter)):
    va, vb = vars(a), vars(b)
    return va.keys() == vb.keys() and all(_same_tree(va[k], vb[k], depth + 1) for k in va)
  return a == b


def _self_check() -> bool:
  for skip_style_tags in (True, False):
    expected = mwparserfromhell.parse(_SAMPLE, skip_style_tags=skip_style_tags)
    got = FastBuilder().build(_Tokenizer().tokenize(_SAMPLE, 0, skip_style_tags))
    if not _same_tree(expected, got) or str(got) != _SAMPLE:
      return False
    # Opaque tags: the same wikitext, and the ref's contents one Text node of it.
    opaque = FastBuilder(frozenset(["ref"])).build(
        _Tokenizer().tokenize(_SAMPLE, 0, skip_style_tags))
    refs = [n for n in opaque.filter_tags(recursive=False) if str(n.tag) == "ref"]
    if (str(opaque) != _SAMPLE or not refs or len(refs[0].contents.nodes) != 1
        or str(refs[0].contents) != "cite [[In ref]]"):
      return False
  return True


FAST = _self_check()
if not FAST:  # pragma: no cover (another mwparserfromhell version)
  logging.warning("mwparserfromhell %s builds nodes differently than FastBuilder expects; "
                  "using its own (slower) builder.", mwparserfromhell.__version__)


# -------------------------------------------------------------------------------------------
# Unclosed markup: the tokenizer's quadratic case
# -------------------------------------------------------------------------------------------

# The C tokenizer tries each opener ('{{a|', '[[a|', '[http://...', '<span>', '<!--', '{|')
# as the start of its construct and, when no closer follows, reads on to the end of the text
# before it gives up and keeps the opener as plain text: a page with many unclosed openers
# takes time quadratic in its length (mwparserfromhell issue #364, open in 0.7.2). The check
# (check_unclosed) estimates that work as (unclosed openers) x (length of the text). Measured
# on one core here (issue 17): 11 to 53 ns per character of that estimate (4,000 x 'x {{a|',
# 24 KB: 5.1 s; 50,000 x '{|' on its own line, 150 KB: 82 s), so a page at the limit takes
# 5 to 27 s; the 6,267 pages of ../shared/data/enwiki and otherwiki reach at most 2.0e7 (1.0
# s, their longest parse), 1/25 of it.
MAX_UNCLOSED_WORK = 500_000_000

# Tags that need no closing tag (mwparserfromhell.definitions.SINGLE): never searched for one.
_SINGLE_TAGS = frozenset(("br", "wbr", "hr", "meta", "link", "img", "li", "dt", "dd", "th",
                          "td", "tr"))
_OPEN_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9]*)\b[^<>]*?(/?)>")
_CLOSE_TAG = re.compile(r"</([A-Za-z][A-Za-z0-9]*)")
_PAIRS = (("{{", "}}"), ("[", "]"), ("<!--", "-->"), ("{|", "|}"))


class UnclosedMarkupError(ValueError):
  """Wikitext with so many unclosed openers that tokenizing it would take minutes or hours
  (check_unclosed)."""


def unclosed_openers(wikitext: str) -> Dict[str, int]:
  """Openers without a closer, by kind: '{{' minus '}}', '[' minus ']', '<!--' minus '-->',
  '{|' minus '|}', and per tag name '<name ...>' (not self-closing, not a tag that needs no
  closing tag) minus '</name'; kinds with none left out. Counts, not a parse: an upper
  estimate of the openers the tokenizer reads to the end of the text for. O(len(wikitext))."""
  surplus = {}
  for opener, closer in _PAIRS:
    n = wikitext.count(opener) - wikitext.count(closer)
    if n > 0:
      surplus[opener] = n
  if "<" in wikitext:
    opened = collections.Counter(m.group(1).lower() for m in _OPEN_TAG.finditer(wikitext)
                                 if not m.group(2))
    if opened:
      closed = collections.Counter(name.lower() for name in _CLOSE_TAG.findall(wikitext))
      for name, n in opened.items():
        if n > closed[name] and name not in _SINGLE_TAGS:
          surplus[f"<{name}>"] = n - closed[name]
  return surplus


def check_unclosed(wikitext: str, max_work: int = MAX_UNCLOSED_WORK) -> None:
  """Raises UnclosedMarkupError when the tokenizer's estimated work on unclosed openers, their
  number (unclosed_openers, all kinds) times the length of the text, exceeds `max_work`; the
  message names the openers by kind (most first), the length and the estimate. The openers
  are counted only when the text could exceed it (each '[' or '<' one opener at most, each '{'
  two: '{{' and '{|' share one in '{{|'): for most pages the check is three str.count calls.

  Raises:
    UnclosedMarkupError: as above.
  """
  n = len(wikitext)
  if n * (2 * wikitext.count("{") + wikitext.count("[") + wikitext.count("<")) <= max_work:
    return
  surplus = unclosed_openers(wikitext)
  work = n * sum(surplus.values())
  if work > max_work:
    kinds = ", ".join(f"{count} {kind!r}" for kind, count in
                      sorted(surplus.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    raise UnclosedMarkupError(
        f"{sum(surplus.values())} unclosed openers ({kinds}) in {n} characters: tokenizing "
        f"would read about {work:.2g} characters (quadratic in the length; limit {max_work:.2g})")


def parse(wikitext: str, skip_style_tags: bool = False,
          opaque_tags: FrozenSet[str] = frozenset()) -> Wikicode:
  """mwparserfromhell.parse(wikitext, skip_style_tags=...), the same tree, built faster.

  Args:
    wikitext: the text to parse.
    skip_style_tags: as mwparserfromhell.parse's ("''" and "'''" stay text).
    opaque_tags: lower-case tag names whose contents the caller reads only as wikitext (str):
      they may come as one Text node of their wikitext instead of their nodes (FastBuilder).
      The tree's wikitext, and that of every node, is the same.

  Raises:
    mwparserfromhell.parser.ParserError: as mwparserfromhell.parse.
  """
  if not FAST:
    return mwparserfromhell.parse(wikitext, skip_style_tags=skip_style_tags)
  return FastBuilder(opaque_tags).build(_Tokenizer().tokenize(wikitext, 0, skip_style_tags))
