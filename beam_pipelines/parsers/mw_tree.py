"""mwparserfromhell's tokenizer, and a light node tree built from its tokens.

mwparserfromhell parses in two steps: its C tokenizer turns wikitext into tokens (fast), and a
Python Builder turns the tokens into its node tree (Wikicode, Text, Wikilink, Template, Tag,
...). Profiling the extraction (issue 17) showed that tree taking a quarter of a page's parse,
most of it in making objects: a Text node per run of text, a Wikicode and a SmartList around
every part (a link's title, a parameter's value, a tag's contents). The renderer
(parsers.wikitext) reads the tree once and changes nothing, so `parse_nodes` builds the same
tree in a lighter form (LightBuilder): a run of text is its str, a part is a plain list of
nodes, and links, templates and their parameters, arguments, external links, headings, tags
and their attributes are small classes of this module with mwparserfromhell's attribute names
(Wikilink.title, Template.params, Parameter.showkey, Tag.contents, Tag.attributes, ...) whose
str() is their wikitext as mwparserfromhell prints it; HTML entities and comments are
mwparserfromhell's own nodes. Building it takes less than half the time of mwparserfromhell's
tree (the 7 English dumps' articles: 0.43 s against 0.97 s with the builder before it, one
core).

The light tree holds what mwparserfromhell's holds, node for node: `same_as_mwparserfromhell`
checks it against mwparserfromhell.parse (converted by `from_mwparserfromhell`), once per
process on a sample that holds every kind of node and tag form (_self_check); when the check
fails (another version of the library, whose builder does something else), parse_nodes
converts mwparserfromhell.parse's own tree instead, so a library upgrade can make parsing
slower, never different. The token loops follow mwparserfromhell/parser/builder.py (0.7, MIT
licence).

One deliberate difference, on request only (`parse_nodes(..., opaque_tags=...)`): the
contents of the named tags (the renderer's <ref>: a third of the tokens of English articles,
of which it only counts the links) come as one str of their wikitext, joined from the tokens
without building their nodes (_opaque_source); the wikitext of every node stays the same.
"""

import collections
import logging
import re
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

import mwparserfromhell
from mwparserfromhell import nodes as mw_nodes
from mwparserfromhell.parser import builder as mw_builder
from mwparserfromhell.parser import tokens
from mwparserfromhell.wikicode import Wikicode

try:  # the C tokenizer, as mwparserfromhell.parser.Parser picks it
  from mwparserfromhell.parser import CTokenizer as _Tokenizer
  if _Tokenizer is None:
    raise ImportError
except ImportError:  # pragma: no cover (pure-Python install)
  from mwparserfromhell.parser.tokenizer import Tokenizer as _Tokenizer

_new = object.__new__
HTMLEntity, Comment = mw_nodes.HTMLEntity, mw_nodes.Comment

# A node of the light tree: str (text), or one of the classes below, or mwparserfromhell's
# HTMLEntity or Comment.
Node = Any
Nodes = List[Node]


def source(nodes: Sequence[Node]) -> str:
  """The wikitext of a node list (mwparserfromhell's str of its Wikicode)."""
  return "".join([n if type(n) is str else str(n) for n in nodes])


class Wikilink:
  """'[[title]]' or '[[title|text]]': title (Nodes), text (Nodes, or None without a pipe)."""
  __slots__ = ("title", "text")

  def __str__(self):
    if self.text is not None:
      return "[[" + source(self.title) + "|" + source(self.text) + "]]"
    return "[[" + source(self.title) + "]]"


class Argument:
  """'{{{name}}}' or '{{{name|default}}}': name (Nodes), default (Nodes or None)."""
  __slots__ = ("name", "default")

  def __str__(self):
    if self.default is not None:
      return "{{{" + source(self.name) + "|" + source(self.default) + "}}}"
    return "{{{" + source(self.name) + "}}}"


class Parameter:
  """A template parameter: name (Nodes; the position as a str when not shown), value
  (Nodes), showkey (bool: written 'name=value')."""
  __slots__ = ("name", "value", "showkey")

  def __str__(self):
    if self.showkey:
      return source(self.name) + "=" + source(self.value)
    return source(self.value)


class Template:
  """'{{name|params}}': name (Nodes), params (List[Parameter])."""
  __slots__ = ("name", "params")

  def __str__(self):
    if self.params:
      return "{{" + source(self.name) + "|" + "|".join([str(p) for p in self.params]) + "}}"
    return "{{" + source(self.name) + "}}"


class ExternalLink:
  """'[url title]', '[url]' or a free url: url (Nodes), title (Nodes or None), brackets
  (bool), suppress_space (bool: no space between url and title)."""
  __slots__ = ("url", "title", "brackets", "suppress_space")

  def __str__(self):
    if self.brackets:
      if self.title is not None:
        return ("[" + source(self.url) + ("" if self.suppress_space else " ")
                + source(self.title) + "]")
      return "[" + source(self.url) + "]"
    return source(self.url)


class Heading:
  """'== title ==': title (Nodes), level (int, 1 to 6)."""
  __slots__ = ("title", "level")

  def __str__(self):
    return "=" * self.level + source(self.title) + "=" * self.level


class Attribute:
  """A tag attribute: name (Nodes), value (Nodes or None), quotes ('"', "'" or None),
  pad_first, pad_before_eq, pad_after_eq (whitespace str)."""
  __slots__ = ("name", "value", "quotes", "pad_first", "pad_before_eq", "pad_after_eq")

  def __str__(self):
    result = self.pad_first + source(self.name) + self.pad_before_eq
    if self.value is not None:
      result += "=" + self.pad_after_eq
      if self.quotes:
        return result + self.quotes + source(self.value) + self.quotes
      return result + source(self.value)
    return result


class Tag:
  """An HTML tag or wiki markup read as one ('*', '{|', '|-', ...): tag, closing_tag,
  contents (Nodes), attributes (List[Attribute]), and mwparserfromhell's Tag's flags and
  markup strings (wiki_markup, closing_wiki_markup, wiki_style_separator: str or None;
  self_closing, invalid, implicit: bool; padding: str)."""
  __slots__ = ("tag", "contents", "attributes", "wiki_markup", "self_closing", "invalid",
               "implicit", "padding", "closing_tag", "wiki_style_separator",
               "closing_wiki_markup")

  def __str__(self):
    attrs = "".join([str(a) for a in self.attributes]) if self.attributes else ""
    if self.wiki_markup:
      head = self.wiki_markup + attrs + (self.padding or "") + (self.wiki_style_separator or "")
      if self.self_closing:
        return head
      return head + source(self.contents) + (self.closing_wiki_markup or "")
    result = ("</" if self.invalid else "<") + source(self.tag) + attrs
    if self.self_closing:
      return result + self.padding + (">" if self.implicit else "/>")
    return (result + self.padding + ">" + source(self.contents) + "</"
            + source(self.closing_tag) + ">")


def _code(nodes: Sequence[Node]) -> Wikicode:
  """A mwparserfromhell Wikicode of the top-level text of `nodes` (other nodes left out), for
  its constructors' checks of an attribute's quotes, a tag's padding and a heading's level,
  which read no more of the nodes (rare: the builder's odd cases)."""
  return mwparserfromhell.utils.parse_anything([mw_nodes.Text(n) for n in nodes
                                                if type(n) is str])


def _needs_quotes(value: Optional[Sequence[Node]]) -> bool:
  """Whether an attribute value needs quotes, as mwparserfromhell's Attribute decides
  (_value_needs_quotes): whitespace in its top-level text."""
  if not value:
    return False
  return any(c.isspace() for part in value if type(part) is str for c in part)


def _text(value: Any) -> str:
  return value if type(value) is str else str(value)


# pylint: disable=protected-access
class LightBuilder(mw_builder.Builder):
  """Builds the light tree (parse_nodes) from the tokenizer's tokens.

  Each construct's handler reads its tokens from the shared reversed token list (`_tokens`,
  the next token last) and collects the nodes of each of its parts in a list (_collect: a
  text token becomes its str in place, other tokens go to their handler). HTML entities are
  built by mwparserfromhell's own handler; odd paddings and quotes, unquoted attribute values
  holding whitespace and heading levels outside 1-6 go through mwparserfromhell's
  constructors, for their checks and errors.

  Args:
    opaque_tags: lower-case names of tags whose contents the caller only reads as wikitext
      (str): each such tag's contents become one str of their wikitext, made from the tokens
      (_opaque_source) without building their nodes, when every token inside is of a kind
      whose wikitext is fixed (text, templates, arguments, wikilinks, external links, HTML
      entities, comments); contents holding a tag or a heading are built as usual. The
      wikitext of the tree is the same either way, its nodes are not.
  """

  def __init__(self, opaque_tags: FrozenSet[str] = frozenset()):
    super().__init__()
    self._opaque_tags = opaque_tags

  def _handle_token(self, token):
    handler = _LIGHT_HANDLERS.get(type(token))
    if handler is not None:
      return handler(self, token)
    return super()._handle_token(token)

  def _collect(self, stops: Tuple[type, ...], handler: str) -> Tuple[Nodes, Any]:
    """The nodes of the tokens up to the next token of a kind in `stops` (taken off the
    list), and that token; ([nodes], None) at the end of the tokens when `handler` is
    'build'. Raises ParserError ("`handler`() missed a close token") when the tokens end
    first."""
    nodes = []
    append = nodes.append
    stack = self._tokens
    pop = stack.pop
    handlers = _LIGHT_HANDLERS
    while stack:
      token = pop()
      kind = type(token)
      if kind is _Text_token:
        value = token.get("text")
        append(value if type(value) is str else str(value))
      elif kind in stops:
        return nodes, token
      else:
        fast = handlers.get(kind)
        append(fast(self, token) if fast is not None else self._handle_token(token))
    if handler == "build":
      return nodes, None
    raise mw_builder.ParserError(f"{handler}() missed a close token")

  def _handle_template(self, token):
    collect = self._collect
    name, token = collect(_TEMPLATE_STOPS, "_handle_template")
    params = []
    default = 1
    while type(token) is tokens.TemplateParamSeparator:
      key = None
      nodes, token = collect(_PARAMETER_STOPS, "_handle_parameter")
      while type(token) is tokens.TemplateParamEquals:
        key = nodes
        nodes, token = collect(_PARAMETER_STOPS, "_handle_parameter")
      param = _new(Parameter)
      if key is None:
        param.name, param.value, param.showkey = [str(default)], nodes, False
        default += 1
      else:
        param.name, param.value, param.showkey = key, nodes, True
      params.append(param)
    node = _new(Template)
    node.name, node.params = name, params
    return node

  def _two_parts(self, stops: Tuple[type, type], handler: str) -> Tuple[Nodes, Optional[Nodes]]:
    """The nodes before and after the last separator (stops[0]) up to the close (stops[1]),
    the second None when there is no separator, as mwparserfromhell's
    _handle_argument/_handle_wikilink (where a later separator replaces the first part)."""
    nodes, token = self._collect(stops, handler)
    if type(token) is not stops[0]:
      return nodes, None
    while True:
      first = nodes
      nodes, token = self._collect(stops, handler)
      if type(token) is not stops[0]:
        return first, nodes

  def _handle_argument(self, token):
    node = _new(Argument)
    node.name, node.default = self._two_parts(_ARGUMENT_STOPS, "_handle_argument")
    return node

  def _handle_wikilink(self, token):
    node = _new(Wikilink)
    node.title, node.text = self._two_parts(_WIKILINK_STOPS, "_handle_wikilink")
    return node

  def _handle_external_link(self, token):
    brackets, url, suppress_space = token.get("brackets"), None, None
    nodes, token = self._collect(_EXTERNAL_LINK_STOPS, "_handle_external_link")
    while type(token) is tokens.ExternalLinkSeparator:
      url = nodes
      suppress_space = token.get("suppress_space")
      nodes, token = self._collect(_EXTERNAL_LINK_STOPS, "_handle_external_link")
    node = _new(ExternalLink)
    if url is not None:
      node.url, node.title = url, nodes
    else:
      node.url, node.title = nodes, None
    node.brackets = bool(brackets)
    node.suppress_space = suppress_space is True
    return node

  def _handle_heading(self, token):
    level = token.get("level")
    title, _ = self._collect(_HEADING_STOPS, "_handle_heading")
    if type(level) is not int or not 1 <= level <= 6:
      level = mw_nodes.Heading(_code(title), level).level  # its checks and errors
    node = _new(Heading)
    node.title, node.level = title, level
    return node

  def _handle_comment(self, token):
    nodes, _ = self._collect(_COMMENT_STOPS, "_handle_comment")
    return mw_nodes.Comment(source(nodes))

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
        name = nodes
        nodes = []
      elif kind is tokens.TagAttrQuote:
        quotes = token.get("char")
      elif (kind is tokens.TagAttrStart or kind is tokens.TagCloseOpen
            or kind is tokens.TagCloseSelfclose):
        stack.append(token)
        if name is not None and source(name):
          value = nodes
        else:
          name, value = nodes, None
        pads = (start.get("pad_first"), start.get("pad_before_eq"), start.get("pad_after_eq"))
        node = _new(Attribute)
        node.name, node.value = name, value
        if (quotes not in ('"', "'") and (quotes or _needs_quotes(value))) or any(
            pad and (type(pad) is not str or not pad.isspace()) for pad in pads):
          # Odd quotes, unquoted values with a space and odd paddings: the constructor's
          # checks (and errors).
          checked = mw_nodes.extras.Attribute(
              _code(name), None if value is None else _code(value), quotes, *pads)
          node.quotes = checked.quotes
          node.pad_first, node.pad_before_eq, node.pad_after_eq = (
              checked.pad_first, checked.pad_before_eq, checked.pad_after_eq)
          return node
        # What Attribute.__init__ leaves: its quotes setter overrides what its value setter
        # chose, and refuses no quoted value, nor an unquoted one without whitespace in its
        # top-level text (_needs_quotes).
        node.quotes = quotes if quotes else None
        node.pad_first, node.pad_before_eq, node.pad_after_eq = (
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
        tag = nodes
        nodes = []
        if self._opaque_tags:
          if (len(tag) == 1 and type(tag[0]) is str
              and tag[0].strip().lower() in self._opaque_tags):
            found = _opaque_source(stack)
            if found is not None:
              text, close_at = found
              del stack[close_at + 1:]
              if text:
                nodes.append(text)
      elif kind is tokens.TagOpenClose:
        closing_wiki_markup = token.get("wiki_markup")
        contents = nodes
        nodes = []
      elif kind is tokens.TagCloseSelfclose or kind is tokens.TagCloseClose:
        if kind is tokens.TagCloseSelfclose:
          closing_wiki_markup = token.get("wiki_markup")
          tag = nodes
          self_closing = True
          padding = token.get("padding") or ""
          implicit = token.get("implicit") or False
        else:
          self_closing = False
          closing_tag = nodes
        if padding and (type(padding) is not str or not padding.isspace()):
          padding = mw_nodes.Tag(_code(tag), padding=padding).padding  # its check and error
        node = _new(Tag)
        # What mwparserfromhell's Tag.__init__ sets.
        node.tag = node.closing_tag = tag
        node.contents = contents if contents is not None else []
        node.attributes = attrs
        node.wiki_markup = str(wiki_markup) if wiki_markup else None
        node.closing_wiki_markup = node.wiki_markup
        node.self_closing = bool(self_closing)
        node.invalid = bool(invalid)
        node.implicit = bool(implicit)
        node.padding = padding
        if closing_tag is not None:
          node.closing_tag = closing_tag
        node.wiki_style_separator = str(wiki_style_separator) if wiki_style_separator else None
        if closing_wiki_markup is not None:
          node.closing_wiki_markup = str(closing_wiki_markup) if closing_wiki_markup else None
        return node
      else:
        nodes.append(self._handle_token(token))
    raise mw_builder.ParserError("_handle_tag() missed a close token")

  def build(self, tokenlist: List) -> Nodes:
    tokenlist.reverse()
    self._tokens = tokenlist
    nodes, _ = self._collect((), "build")
    return nodes

# pylint: enable=protected-access

_Text_token = tokens.Text
# The tokens that end each part of a construct (LightBuilder._collect).
_TEMPLATE_STOPS = (tokens.TemplateParamSeparator, tokens.TemplateClose)
_PARAMETER_STOPS = (tokens.TemplateParamEquals, tokens.TemplateParamSeparator,
                    tokens.TemplateClose)
_ARGUMENT_STOPS = (tokens.ArgumentSeparator, tokens.ArgumentClose)
_WIKILINK_STOPS = (tokens.WikilinkSeparator, tokens.WikilinkClose)
_EXTERNAL_LINK_STOPS = (tokens.ExternalLinkSeparator, tokens.ExternalLinkClose)
_HEADING_STOPS = (tokens.HeadingEnd,)
_COMMENT_STOPS = (tokens.CommentEnd,)


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
# The tokens that end each part of a construct (LightBuilder._collect).
_TEMPLATE_STOPS = (tokens.TemplateParamSeparator, tokens.TemplateClose)
_PARAMETER_STOPS = (tokens.TemplateParamEquals, tokens.TemplateParamSeparator,
                    tokens.TemplateClose)
_ARGUMENT_STOPS = (tokens.ArgumentSeparator, tokens.ArgumentClose)
_WIKILINK_STOPS = (tokens.WikilinkSeparator, tokens.WikilinkClose)
_EXTERNAL_LINK_STOPS = (tokens.ExternalLinkSeparator, tokens.ExternalLinkClose)
_HEADING_STOPS = (tokens.HeadingEnd,)


def _opaque_source(stack: List) -> Optional[Tuple[str, int]]:
  """The wikitext of a tag's contents from its tokens, without nodes (LightBuilder's
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


_LIGHT_HANDLERS = {
    tokens.TemplateOpen: LightBuilder._handle_template,
    tokens.ArgumentOpen: LightBuilder._handle_argument,
    tokens.WikilinkOpen: LightBuilder._handle_wikilink,
    tokens.ExternalLinkOpen: LightBuilder._handle_external_link,
    tokens.HeadingStart: LightBuilder._handle_heading,
    tokens.TagOpenOpen: LightBuilder._handle_tag,
    tokens.CommentStart: LightBuilder._handle_comment,
}


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



def from_mwparserfromhell(code: Union[Wikicode, Sequence]) -> Nodes:
  """The light tree of a mwparserfromhell tree (a Wikicode or a node list): the same nodes,
  in parse_nodes' form."""
  return [_from_mw_node(node) for node in (code.nodes if isinstance(code, Wikicode) else code)]


def _from_mw_node(node: Any) -> Node:
  def part(code):
    return None if code is None else from_mwparserfromhell(code)
  kind = type(node)
  if kind is mw_nodes.Text:
    return node.value
  if kind is mw_nodes.Wikilink:
    light = _new(Wikilink)
    light.title, light.text = part(node.title), part(node.text)
  elif kind is mw_nodes.Template:
    light = _new(Template)
    light.name, light.params = part(node.name), []
    for param in node.params:
      p = _new(Parameter)
      p.name, p.value, p.showkey = part(param.name), part(param.value), param.showkey
      light.params.append(p)
  elif kind is mw_nodes.Argument:
    light = _new(Argument)
    light.name, light.default = part(node.name), part(node.default)
  elif kind is mw_nodes.ExternalLink:
    light = _new(ExternalLink)
    light.url, light.title, light.brackets = part(node.url), part(node.title), node.brackets
    light.suppress_space = node.suppress_space is True
  elif kind is mw_nodes.Heading:
    light = _new(Heading)
    light.title, light.level = part(node.title), node.level
  elif kind is mw_nodes.Tag:
    light = _new(Tag)
    light.tag, light.closing_tag = part(node.tag), part(node.closing_tag)
    light.contents = part(node.contents) if node.contents is not None else []
    light.attributes = []
    for attribute in node.attributes:
      a = _new(Attribute)
      a.name, a.value, a.quotes = part(attribute.name), part(attribute.value), attribute.quotes
      a.pad_first, a.pad_before_eq = attribute.pad_first, attribute.pad_before_eq
      a.pad_after_eq = attribute.pad_after_eq
      light.attributes.append(a)
    for name in ("wiki_markup", "closing_wiki_markup", "wiki_style_separator", "self_closing",
                 "invalid", "implicit", "padding"):
      setattr(light, name, getattr(node, name))
  else:  # HTMLEntity, Comment
    return node
  return light


def same_as_mwparserfromhell(nodes: Sequence[Node], code: Wikicode) -> bool:
  """Whether a light tree holds what mwparserfromhell's tree `code` holds, node for node and
  attribute for attribute (str for Text, lists for Wikicode; HTML entities and comments
  compared by their attributes)."""
  return _same(list(nodes), from_mwparserfromhell(code))


def _same(a: Any, b: Any, depth: int = 0) -> bool:
  if type(a) is not type(b) or depth > 400:
    return False
  if type(a) is list:
    return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
  if hasattr(type(a), "__slots__") and type(a).__module__ == __name__:
    return all(_same(getattr(a, s), getattr(b, s), depth + 1) for s in type(a).__slots__)
  if isinstance(a, (mw_nodes.HTMLEntity, mw_nodes.Comment)):
    return vars(a) == vars(b)
  return a == b


def _self_check() -> bool:
  for skip_style_tags in (True, False):
    expected = mwparserfromhell.parse(_SAMPLE, skip_style_tags=skip_style_tags)
    got = LightBuilder().build(_Tokenizer().tokenize(_SAMPLE, 0, skip_style_tags))
    if not same_as_mwparserfromhell(got, expected) or source(got) != _SAMPLE:
      return False
    # Opaque tags: the same wikitext, and the ref's contents one str of it.
    opaque = LightBuilder(frozenset(["ref"])).build(
        _Tokenizer().tokenize(_SAMPLE, 0, skip_style_tags))
    refs = [n for n in opaque if type(n) is Tag and source(n.tag) == "ref"]
    if source(opaque) != _SAMPLE or not refs or refs[0].contents != ["cite [[In ref]]"]:
      return False
  return True


LIGHT = _self_check()
if not LIGHT:  # pragma: no cover (another mwparserfromhell version)
  logging.warning("mwparserfromhell %s builds nodes differently than LightBuilder expects; "
                  "converting its own (slower) tree.", mwparserfromhell.__version__)


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




def parse_nodes(wikitext: str, skip_style_tags: bool = False,
                opaque_tags: FrozenSet[str] = frozenset()) -> Nodes:
  """mwparserfromhell.parse(wikitext, skip_style_tags=...)'s tree as light nodes (the module
  docstring): source(nodes) == wikitext, up to a NUL character: mwparserfromhell's C tokenizer
  reads one as the end of the text, so the text after it is in neither tree ('a\\x00b' gives
  'a'; an XML dump cannot hold a NUL).

  Args:
    wikitext: the text to parse.
    skip_style_tags: as mwparserfromhell.parse's ("''" and "'''" stay text).
    opaque_tags: lower-case tag names whose contents the caller reads only as wikitext (str):
      they may come as one str of their wikitext instead of their nodes (LightBuilder). The
      tree's wikitext, and that of every node, is the same.

  Raises:
    mwparserfromhell.parser.ParserError: as mwparserfromhell.parse.
    ValueError: as mwparserfromhell.parse (a node's constructor refuses a value).
  """
  if not LIGHT:
    return from_mwparserfromhell(mwparserfromhell.parse(wikitext, skip_style_tags=skip_style_tags))
  return LightBuilder(opaque_tags).build(_Tokenizer().tokenize(wikitext, 0, skip_style_tags))
