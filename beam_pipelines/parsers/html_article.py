"""The HTML renderer: an article's rendered HTML -> plain text, links, categories.

The HTML counterpart of beam_pipelines.parsers.wikitext.parse_article, for HTML dumps
(beam_pipelines.dumps.html_dump): it returns the same wikitext.ParsedArticle, so mentions
(parsers.mentions), disambiguation pages (parsers.page_kinds) and every record downstream are
built by the same code as for MediaWiki XML dumps. No Beam here. Gillick et al. (2019),
section 5: training mentions are Wikipedia anchor links; an entity is described by its title,
the first paragraph of its page and its categories.

The HTML is parsed into a tree by lxml.etree (libxml2's HTML parser, which recovers from malformed
markup as browsers do); text and links come from walking that tree, never from regular
expressions over markup. Two dialects are read:
- Parsoid HTML (Wikimedia Enterprise dumps, REST API): links `<a rel="mw:WikiLink"
  href="./Title">`, interwiki `rel="mw:WikiLink/Interwiki"`, categories `<link
  rel="mw:PageProp/Category" href="./Category:X">`, references `sup.mw-ref`, files in
  `<figure>` with a `<figcaption>`, `<meta property="mw:PageProp/disambiguation">`;
- classic rendered HTML (action=render, page views): links `href="/wiki/Title"` or
  `href="//en.wikipedia.org/wiki/Title"`, redlinks `class="new"` with
  `/w/index.php?title=X&action=edit&redlink=1`, interwiki `class="extiw"`, references
  `sup.reference`, thumbnails `div.thumb` with `div.thumbcaption`, categories in
  `#mw-normal-catlinks` (hidden ones in `#mw-hidden-catlinks` are left out).

What becomes a mention, as the XML path decides for wikitext (parse_article):
- prose: paragraphs, headings, lists (ul/ol/dl), blockquotes and other block or inline
  elements, rendered where they stand; every link in it to a main-namespace page of this wiki
  is a mention (Link.source 'prose');
- non-prose containers whose links the XML path also makes mentions are rendered after the
  prose as pieces of their own lines, each kept only when it holds a mention, with their
  source: table cells and captions ('table'; header cells too, as wikitext table cells are),
  infobox value cells ('template': an infobox is a template whose parameters the XML path
  renders as pieces; its label cells are the template's own text, not the article's, and are
  dropped, their links counted 'in_infobox_label'), citations outside reference lists
  (`span.citation`, 'template': {{cite ..}} parameters), thumbnail and figure captions
  ('caption') and gallery texts ('gallery');
- not mentions, dropped with their text, their links to articles counted by reason:
  references (`sup.reference`, reference lists: 'in_ref', as <ref> bodies in wikitext),
  navigation boxes and sidebars (`navbox`, `vertical-navbox`, `navbar`, `sidebar`,
  `NavFrame`: 'in_navbox'; transcluded from templates, they are not in the article's
  wikitext at all), hatnotes ('For other uses, see ...', `hatnote`, `dablink`, `rellink`:
  'in_hatnote'), edit links ('in_edit_link'), the table of contents ('in_toc'), maintenance
  and metadata boxes, persondata, `noprint` and hidden (`display:none`) elements, coordinates,
  category lists ('in_metadata'), <math>, <style>, <script> ('in_other_tag');
- a link is a mention only when its target is a main-namespace page of this wiki
  (parsers.namespaces.classify_title on the percent-decoded title, '_' as space, '#fragment'
  dropped; a link to the page itself with a fragment mentions the page, as '[[Page#Section]]'
  does): links to other namespaces render their text and are counted 'category', 'file',
  'other_namespace'; links to other wikis or languages (another host, `class="extiw"`,
  `mw:WikiLink/Interwiki`) 'interwiki'; redlinks (`class="new"`, `redlink=1`: no such page, so
  no entity) 'redlink'; in-page anchors (`href="#..."`: footnotes, harvard citations, section
  links) 'in_page_anchor'; a link without visible text (an image) 'empty_anchor'; a link
  whose title MediaWiki forbids 'invalid_target'. External links render their text only.
- Whitespace follows HTML (newlines inside a paragraph are spaces; block elements and <br>
  as in parse_article: blocks are lines, <br> a space). The first paragraph is the first prose
  line of the lead (before the first heading) that is not a list item.
"""

import json
import urllib.parse
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import lxml.etree

from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import wikitext
from dense_entity.kb import titles

# Reasons (ParsedArticle.dropped keys) of the non-prose containers, beside wikitext's.
IN_REF = "in_ref"
IN_NAVBOX = "in_navbox"
IN_HATNOTE = "in_hatnote"
IN_EDIT_LINK = "in_edit_link"
IN_TOC = "in_toc"
IN_METADATA = "in_metadata"
IN_INFOBOX_LABEL = "in_infobox_label"
IN_OTHER_TAG = "in_other_tag"
REDLINK = "redlink"
IN_PAGE_ANCHOR = "in_page_anchor"

# Containers dropped with their text, by class (any of the element's classes).
_DROP_CLASSES = {
    # references: classic, Parsoid
    "reference": IN_REF, "references": IN_REF, "reflist": IN_REF, "mw-ref": IN_REF,
    "mw-references": IN_REF, "mw-references-wrap": IN_REF, "mw-cite-backlink": IN_REF,
    # navigation boxes and sidebars
    "navbox": IN_NAVBOX, "vertical-navbox": IN_NAVBOX, "navbox-inner": IN_NAVBOX,
    "navbar": IN_NAVBOX, "sidebar": IN_NAVBOX, "navbox-styles": IN_NAVBOX,
    "NavFrame": IN_NAVBOX, "navigation-box": IN_NAVBOX,
    # hatnotes
    "hatnote": IN_HATNOTE, "dablink": IN_HATNOTE, "rellink": IN_HATNOTE,
    "seealso": IN_HATNOTE, "mainarticle": IN_HATNOTE,
    # edit links, table of contents
    "mw-editsection": IN_EDIT_LINK, "editsection": IN_EDIT_LINK,
    "toc": IN_TOC, "toclimit-2": IN_TOC, "toclimit-3": IN_TOC, "toclimit-4": IN_TOC,
    # maintenance boxes, metadata, print-less and hidden chrome
    "metadata": IN_METADATA, "ambox": IN_METADATA, "mbox-small": IN_METADATA,
    "mbox-small-left": IN_METADATA, "tmbox": IN_METADATA, "ombox": IN_METADATA,
    "cmbox": IN_METADATA, "fmbox": IN_METADATA, "imbox": IN_METADATA, "dmbox": IN_METADATA,
    "persondata": IN_METADATA, "noprint": IN_METADATA, "sistersitebox": IN_METADATA,
    "portal": IN_METADATA, "catlinks": IN_METADATA, "printfooter": IN_METADATA,
    "Z3988": IN_METADATA, "geo-nondefault": IN_METADATA, "mw-empty-elt": IN_METADATA,
    "stub": IN_METADATA, "magnify": IN_METADATA, "mwe-math-element": IN_OTHER_TAG,
}
_DROP_IDS = {"toc": IN_TOC, "coordinates": IN_METADATA, "catlinks": IN_METADATA,
             "disambigbox": IN_METADATA, "persondata": IN_METADATA,
             "mw-normal-catlinks": IN_METADATA, "mw-hidden-catlinks": IN_METADATA}
_DROP_TAGS = {"style": IN_OTHER_TAG, "script": IN_OTHER_TAG, "noscript": IN_OTHER_TAG,
              "math": IN_OTHER_TAG, "head": IN_OTHER_TAG, "title": IN_OTHER_TAG,
              "link": IN_OTHER_TAG, "meta": IN_OTHER_TAG, "img": IN_OTHER_TAG,
              "audio": IN_OTHER_TAG, "video": IN_OTHER_TAG, "map": IN_OTHER_TAG,
              "svg": IN_OTHER_TAG, "object": IN_OTHER_TAG, "iframe": IN_OTHER_TAG,
              "button": IN_OTHER_TAG, "input": IN_OTHER_TAG, "select": IN_OTHER_TAG,
              "textarea": IN_OTHER_TAG, "template": IN_OTHER_TAG}
# Elements that start and end a line (as wikitext's block tags); list items are marked so.
_BLOCK_TAGS = frozenset([
    "p", "div", "blockquote", "center", "li", "ul", "ol", "dl", "dd", "dt", "h1", "h2", "h3",
    "h4", "h5", "h6", "pre", "hr", "section", "article", "aside", "header", "footer", "figure",
    "figcaption", "table", "tr", "td", "th", "caption", "tbody", "thead", "tfoot", "body",
    "main", "nav", "address", "details", "summary", "form", "fieldset",
])
_LIST_ITEM_TAGS = frozenset(["li", "dd", "dt"])
_HEADING_TAGS = frozenset(["h1", "h2", "h3", "h4", "h5", "h6"])
_CELL_TAGS = frozenset(["td", "th", "caption"])
# Hrefs' fragments of footnotes, harvard citations and {{ref}}/{{note}} anchors.
_SOURCE_TABLE = wikitext.SOURCE_TABLE
_SOURCE_TEMPLATE = wikitext.SOURCE_TEMPLATE
_SOURCE_CAPTION = wikitext.SOURCE_CAPTION
_SOURCE_GALLERY = wikitext.SOURCE_GALLERY
# Hosts of Wikimedia's wikis: a link to one of them that is not the page's own wiki is an
# interwiki or interlanguage link, a link to any other host an external link.
_WIKIMEDIA_HOSTS = (".wikipedia.org", ".wiktionary.org", ".wikimedia.org", ".wikisource.org",
                    ".wikiquote.org", ".wikibooks.org", ".wikinews.org", ".wikiversity.org",
                    ".wikivoyage.org", ".wikidata.org", ".mediawiki.org", "wikidata.org",
                    "mediawiki.org", "wikisource.org")
_NEWLINES = str.maketrans({"\n": " ", "\r": " ", "\t": " "})


def _classes(element) -> List[str]:
  value = element.get("class")
  return value.split() if value else []


def _hidden(element) -> bool:
  style = element.get("style")
  if not style or "none" not in style:
    return False
  compact = style.replace(" ", "").lower()
  return "display:none" in compact


def home_host(url: str) -> str:
  """The host of a page's URL ('https://en.wikipedia.org/wiki/X' -> 'en.wikipedia.org'),
  lower case; '' when `url` has none."""
  return (urllib.parse.urlsplit(url).hostname or "") if url else ""


def link_title(href: str, host: str = "", rel: Sequence[str] = (),
               classes: Sequence[str] = ()) -> Tuple[str, str]:
  """Where an <a href> points: the kind of link and its percent-decoded title.

  Args:
    href: the href as written ('./Ore_River', '/wiki/Ore_River#Course',
      '//en.wikipedia.org/wiki/Ore%20River', '/w/index.php?title=X&action=edit&redlink=1',
      '#cite_note-1', 'https://example.org/').
    host: the page's own wiki host (home_host); '' when unknown: then relative links ('./X',
      '/wiki/X') and links to '/wiki/' of any '*.wikipedia.org' host not marked `extiw` or
      `external` count as this wiki's. Links to other Wikimedia hosts are interwiki links,
      to any other host external ones.
    rel: the link's rel values (Parsoid: 'mw:WikiLink', 'mw:WikiLink/Interwiki', ...).
    classes: the link's classes ('new', 'extiw', 'external', 'image', ...).

  Returns:
    (kind, title): kind 'wiki' (a link to a page of this wiki; title as written in the URL,
    percent-decoded, '_' kept, '#fragment' kept), 'redlink' (to a page that does not exist;
    its title), 'interwiki' (another wiki or language; title ''), 'anchor' (an in-page
    '#fragment'; title ''), 'external' (anything else; title '').
  """
  if "mw:WikiLink/Interwiki" in rel or "extiw" in classes:
    return "interwiki", ""
  if not href:
    return "external", ""
  if href.startswith("#"):
    return "anchor", ""
  if "?" not in href:  # the common forms, without urlsplit
    for prefix in ("./", "/wiki/", f"//{host}/wiki/" if host else None,
                   f"https://{host}/wiki/" if host else None):
      if prefix and href.startswith(prefix):
        path, _, fragment = href[len(prefix):].partition("#")
        title = urllib.parse.unquote(path)
        if fragment:
          title += "#" + urllib.parse.unquote(fragment)
        return ("redlink" if "new" in classes else "wiki"), title
  parts = urllib.parse.urlsplit(href)
  if parts.netloc:
    link_host = (parts.hostname or "").lower()
    if host and link_host == host.lower():
      pass
    elif "external" in classes or not link_host.endswith(_WIKIMEDIA_HOSTS):
      return "external", ""
    elif host or not link_host.endswith(".wikipedia.org") or not parts.path.startswith("/wiki/"):
      return ("interwiki" if parts.path.startswith("/wiki/") else "external"), ""
    # else: no home host known; a link to a Wikipedia is taken for this wiki's
  elif parts.scheme:  # mailto:, ftp:, ...
    return "external", ""
  path = parts.path
  query = urllib.parse.parse_qs(parts.query)
  redlink = "new" in classes or query.get("redlink") == ["1"]
  if path.startswith("./"):  # Parsoid
    raw = path[2:]
  elif path.startswith("/wiki/"):
    raw = path[len("/wiki/"):]
  elif path.endswith("/index.php") and "title" in query:
    if not redlink:
      return "external", ""  # edit, history and diff links
    raw = query["title"][0]
    return "redlink", urllib.parse.unquote(raw)
  else:
    return "external", ""
  title = urllib.parse.unquote(raw)
  if parts.fragment:
    title += "#" + urllib.parse.unquote(parts.fragment)
  return ("redlink" if redlink else "wiki"), title


class _Renderer:
  """Walks an lxml tree and renders plain text, links and categories (see module docstring).

  Prose is rendered where it stands; non-prose containers that hold mentions (tables,
  infobox cells, citations, captions, gallery texts) are queued as pieces (`pending`) and
  rendered after the prose by `render_pieces`, each on its own line(s); a piece that yields
  no mention is removed again (wikitext.TextEmitter.begin_piece / rollback).
  """

  def __init__(self, page_title: str, host: str):
    self.page_title = titles.normalize_title(page_title)
    self.host = host
    self.links: List[wikitext.Link] = []
    self.dropped: Dict[str, int] = {}
    self.lead_end: Optional[int] = None
    self.source = wikitext.SOURCE_PROSE
    self.pending: List[Tuple[str, List]] = []  # (source, elements) of queued pieces
    self.pre = 0  # depth of <pre> elements being walked (newlines kept)
    self.resolved: Dict[Tuple, Tuple[str, str]] = {}  # resolve()'s results by href, rel, class

  def count(self, reason: str, n: int = 1) -> None:
    if n:
      self.dropped[reason] = self.dropped.get(reason, 0) + n

  # -- links -------------------------------------------------------------------------------

  def resolve(self, anchor_element) -> Tuple[str, str]:
    """(kind, target) of an <a>: kind 'main' with the normalized target title, or the
    ParsedArticle.dropped reason of a link that is no mention ('external': not counted)."""
    key = (anchor_element.get("href"), anchor_element.get("rel"), anchor_element.get("class"))
    result = self.resolved.get(key)
    if result is None:
      result = self.resolved[key] = self._resolve(*key)
    return result

  def _resolve(self, href: Optional[str], rel: Optional[str],
               classes: Optional[str]) -> Tuple[str, str]:
    kind, raw = link_title(href or "", self.host, (rel or "").split(), (classes or "").split())
    if kind in ("external", "interwiki"):
      return kind, ""
    if kind == "anchor":
      return IN_PAGE_ANCHOR, ""
    if kind == "redlink":
      return REDLINK, ""
    title_kind, rest, _ = namespaces.classify_title(raw.replace("_", " "))
    if title_kind == namespaces.MAIN:
      target = namespaces.normalize_target(rest)
      if rest.startswith("#"):
        target = self.page_title
      return ("main", target) if target else ("invalid_target", "")
    return {namespaces.CATEGORY: "category", namespaces.FILE: "file",
            namespaces.INTERLANGUAGE: "interwiki", namespaces.INTERWIKI: "interwiki",
            namespaces.EMPTY: "empty"}.get(title_kind, "other_namespace"), ""

  def count_links_in(self, element, reason: str) -> None:
    """Counts the links to articles inside a dropped element (they never become mentions)."""
    n = 0
    for anchor in element.iter("a"):
      kind, _ = self.resolve(anchor)
      if kind == "main":
        n += 1
    self.count(reason, n)

  def link(self, element, out: wikitext.TextEmitter, mentions: bool) -> None:
    kind, target = self.resolve(element)
    anchor = self.render_inline(element)
    if kind != "main":
      if kind != "external":
        self.count(kind)
      if anchor:
        out.atom(anchor)
      else:
        out.dropped()
      return
    if not anchor:
      self.count("empty_anchor")
      out.dropped()
      return
    start, end = out.atom(anchor)
    if mentions:
      self.links.append(wikitext.Link(start=start, end=end, target=target, anchor=anchor,
                                      source=self.source))
    else:
      self.count("nested_link")

  def render_inline(self, element) -> str:
    """Renders an element's contents as one clean line (link text); its links are no
    mentions."""
    if len(element) == 0:  # text only (most links)
      return " ".join(wikitext.visible(element.text or "").split())
    sub = _Renderer(self.page_title, self.host)
    sub.pending = self.pending  # pieces inside link text still count
    sub.source = self.source
    sub.pre = self.pre
    sub.resolved = self.resolved
    out = wikitext.TextEmitter()
    sub.walk_children(element, out, mentions=False)
    for reason, n in sub.dropped.items():
      self.count(reason, n)
    return " ".join(out.value().split())

  # -- tree walk ---------------------------------------------------------------------------

  def text(self, value: Optional[str], out: wikitext.TextEmitter) -> None:
    if not value:
      return
    value = wikitext.visible(value)
    if self.pre:
      out.text(value)
    else:
      out.text(value.translate(_NEWLINES))

  def walk_children(self, element, out: wikitext.TextEmitter, mentions: bool) -> None:
    self.text(element.text, out)
    for child in element:
      self.element(child, out, mentions)
      self.text(child.tail, out)

  def drop_reason(self, element, tag: str, classes: Sequence[str]) -> Optional[str]:
    reason = _DROP_TAGS.get(tag)
    if reason:
      return reason
    for name in classes:
      reason = _DROP_CLASSES.get(name)
      if reason:
        return reason
    element_id = element.get("id")
    if element_id:
      reason = _DROP_IDS.get(element_id)
      if reason:
        return reason
    if element.get("typeof", "").startswith("mw:Extension/ref"):
      return IN_REF
    if _hidden(element):
      return IN_METADATA
    return None

  def defer(self, source: str, elements: Iterable) -> None:
    """Queues `elements` as a piece; inside a piece, the outermost source is kept."""
    elements = list(elements)
    if any(True for e in elements for _ in e.iter("a")):
      self.pending.append(
          (source if self.source == wikitext.SOURCE_PROSE else self.source, elements))

  def defer_table(self, table, source: str) -> None:
    """Queues each cell and caption of a table as a piece (infobox label cells dropped)."""
    infobox = "infobox" in _classes(table)
    for row_or_cell in _table_cells(table):
      tag = row_or_cell.tag
      if infobox and tag == "th":
        self.count_links_in(row_or_cell, IN_INFOBOX_LABEL)
        continue
      self.defer(_SOURCE_TEMPLATE if infobox else source, [row_or_cell])

  def element(self, element, out: wikitext.TextEmitter, mentions: bool) -> None:
    tag = element.tag
    if not isinstance(tag, str):  # comments, processing instructions
      return
    tag = tag.lower()
    classes = _classes(element)
    reason = self.drop_reason(element, tag, classes)
    if reason:
      self.count_links_in(element, reason)
      out.dropped()
      return
    if tag == "a":
      self.link(element, out, mentions)
      return
    if tag == "br":
      out.space()
      return
    if tag == "table":
      self.defer_table(element, _SOURCE_TABLE)
      out.dropped()
      return
    if tag in _CELL_TAGS:  # a cell outside a table (malformed): a piece of its own
      self.defer(_SOURCE_TABLE, [element])
      out.dropped()
      return
    if "citation" in classes and tag in ("span", "cite"):
      self.defer(_SOURCE_TEMPLATE, [element])
      out.dropped()
      return
    if tag in ("figcaption",) or "thumbcaption" in classes:
      self.defer(_SOURCE_CAPTION, [element])
      out.dropped()
      return
    if "gallerytext" in classes:
      self.defer(_SOURCE_GALLERY, [element])
      out.dropped()
      return
    if "gallery" in classes or "gallerybox" in classes or "thumb" in classes or tag == "figure":
      # Images with captions: only the captions are text (pieces); the image links render
      # nothing, as '[[File:..]]' does.
      self.image_container(element)
      out.dropped()
      return
    block = tag in _BLOCK_TAGS
    heading = tag in _HEADING_TAGS
    if heading and self.lead_end is None and self.source == wikitext.SOURCE_PROSE:
      self.lead_end = out.length
    if block:
      out.line_break(list_item=tag in _LIST_ITEM_TAGS)
    if tag == "pre":
      self.pre += 1
    self.walk_children(element, out, mentions)
    if tag == "pre":
      self.pre -= 1
    if block:
      out.line_break()

  def image_container(self, container) -> None:
    """A thumbnail, figure or gallery: queues its captions and gallery texts as pieces and
    counts its other links: to files 'file', to articles (an image's link= target)
    'in_file_option', as '[[File:..|link=..]]'; magnify icons are not counted."""
    stack = list(reversed(list(container)))
    while stack:
      child = stack.pop()
      if not isinstance(child.tag, str):
        continue
      child_classes = _classes(child)
      if child.tag == "figcaption" or "thumbcaption" in child_classes:
        self.defer(_SOURCE_CAPTION, [child])
      elif "gallerytext" in child_classes:
        self.defer(_SOURCE_GALLERY, [child])
      elif "magnify" in child_classes:
        continue
      elif child.tag == "a":
        kind, _ = self.resolve(child)
        if kind != "external":
          self.count("in_file_option" if kind == "main" else kind)
      else:
        stack.extend(reversed(list(child)))

  def render_pieces(self, out: wikitext.TextEmitter) -> None:
    """Renders the queued pieces (and the pieces queued meanwhile) after the text so far."""
    i = 0
    while i < len(self.pending):
      self.source, elements = self.pending[i]
      i += 1
      state = out.begin_piece()
      n_links = len(self.links)
      for element in elements:
        out.line_break()
        self.walk_children(element, out, mentions=True)
      if len(self.links) == n_links:
        out.rollback(state)
    self.pending = []
    self.source = wikitext.SOURCE_PROSE


def _table_cells(table) -> Iterable:
  """The cells (td, th) and captions of a table, not those of tables nested in them."""
  stack = list(reversed(list(table)))
  while stack:
    element = stack.pop()
    if not isinstance(element.tag, str):
      continue
    tag = element.tag.lower()
    if tag in _CELL_TAGS:
      yield element
    elif tag in ("tbody", "thead", "tfoot", "tr"):
      stack.extend(reversed(list(element)))


def _page_categories(root, host: str) -> List[str]:
  """Category names the HTML itself carries: Parsoid's <link rel="mw:PageProp/Category">,
  classic pages' visible category list (#mw-normal-catlinks; hidden ones are left out)."""
  names: List[str] = []
  for element in root.xpath("//link[@rel]"):
    if "mw:PageProp/Category" in element.get("rel").split():
      kind, raw = link_title(element.get("href") or "", host, ("mw:WikiLink",))
      if kind == "wiki":
        names.append(raw.split("#", 1)[0])
  for anchor in root.xpath("//*[@id='mw-normal-catlinks']//a"):
    kind, raw = link_title(anchor.get("href") or "", host, (), _classes(anchor))
    if kind in ("wiki", "redlink"):
      names.append(raw)
  categories = []
  for raw in names:
    kind, rest, _ = namespaces.classify_title(raw.replace("_", " "))
    if kind == namespaces.CATEGORY:
      name = namespaces.normalize_target(rest)
      if name and name not in categories:
        categories.append(name)
  return categories


def _transclusions(root) -> Tuple[List[str], bool]:
  """(template names, disambiguation): the templates Parsoid records in `data-mw` of
  transclusions ('./Template:Disambiguation' -> 'disambiguation', as
  wikitext.ParsedArticle.templates), and whether a disambiguation marker is present
  (Parsoid's <meta property="mw:PageProp/disambiguation">, classic HTML's #disambigbox)."""
  disambiguation = bool(root.xpath("//meta[@property='mw:PageProp/disambiguation']")
                        or root.xpath("//*[@id='disambigbox']"))
  templates: List[str] = []
  for element in root.xpath("//*[contains(@typeof, 'mw:Transclusion')]"):
    try:
      data = json.loads(element.get("data-mw") or "{}")
    except ValueError:
      continue
    for part in data.get("parts", []) if isinstance(data, dict) else []:
      template = part.get("template") if isinstance(part, dict) else None
      target = template.get("target", {}) if isinstance(template, dict) else {}
      name = target.get("wt") if isinstance(target, dict) else None
      if isinstance(name, str):
        name = template_name(name)
        if name and name not in templates:
          templates.append(name)
  return templates, disambiguation


def template_name(raw: str) -> str:
  """A template's name as wikitext.ParsedArticle.templates holds it: '_' as space, single
  spaces, lower case, 'Template:' dropped ('Template:Birth_date' -> 'birth date')."""
  name = " ".join(raw.replace("_", " ").split()).lower()
  return name[len("template:"):].strip() if name.startswith("template:") else name


def parse_html_article(html: str, page_title: str, url: str = "",
                       categories: Sequence[str] = (),
                       templates: Sequence[str] = ()) -> wikitext.ParsedArticle:
  """Renders an article's HTML to plain text with its links, categories, first paragraph.

  The rules are the module docstring's; the result is the one parse_article gives for
  wikitext, so parsers.mentions.article_mentions and parsers.page_kinds take it unchanged.

  Args:
    html: the article's HTML: a fragment (action=render) or a whole document (Parsoid).
    page_title: the page's title (target of '#section' links to the page itself).
    url: the page's URL; its host tells this wiki's links from other wikis' ('' when
      unknown, see link_title).
    categories: category names the dump record lists beside the HTML (Enterprise
      `categories`, 'Category:X' or 'X'); merged with those the HTML carries.
    templates: template names the dump record lists ('Template:X'); merged with those of
      Parsoid's data-mw.

  Returns:
    wikitext.ParsedArticle; for every link, text[link.start:link.end] == link.anchor.
    `switches` holds '__DISAMBIG__' when the HTML marks a disambiguation page.

  Raises:
    ValueError: HTML that is not blank but holds no element.
  """
  host = home_host(url)
  renderer = _Renderer(page_title, host)
  out = wikitext.TextEmitter()
  root = _parse_html(html)
  if root is not None:
    body = root.find("body")
    renderer.walk_children(body if body is not None else root, out, mentions=True)
  prose_end = out.length
  first = wikitext.first_paragraph(out.value(), renderer.lead_end, out.list_lines)
  list_links = wikitext.count_list_item_links(out.value(), renderer.links, out.list_lines)
  renderer.render_pieces(out)
  names = []
  for raw in categories:
    kind, rest, _ = namespaces.classify_title(raw)
    name = namespaces.normalize_target(rest if kind == namespaces.CATEGORY else raw)
    if name and name not in names:
      names.append(name)
  found, disambiguation = [], False
  if root is not None:
    if "mw:PageProp/Category" in html or "mw-normal-catlinks" in html:
      for name in _page_categories(root, host):
        if name not in names:
          names.append(name)
    if "mw:Transclusion" in html or "disambig" in html:
      found, disambiguation = _transclusions(root)
  template_names = []
  for name in [template_name(t) for t in templates] + found:
    if name and name not in template_names:
      template_names.append(name)
  switches = ("__DISAMBIG__",) if disambiguation else ()
  return wikitext.ParsedArticle(text=out.value(), links=renderer.links, categories=names,
                                first_paragraph=first, dropped=renderer.dropped,
                                prose_end=prose_end, switches=switches,
                                templates=tuple(template_names), list_item_links=list_links)


def _parse_html(html: str):
  """The lxml tree of a document or fragment (<html> root); None for HTML without any element
  (empty or blank: an empty article, as an empty wikitext page is)."""
  if not html.strip():
    return None
  try:
    root = lxml.etree.HTML(html)
  except ValueError as e:
    if "encoding declaration" not in str(e):
      raise
    # A document with '<?xml ... encoding=..?>': lxml parses it from its bytes.
    root = lxml.etree.HTML(html.encode("utf-8"), parser=lxml.etree.HTMLParser(encoding="utf-8"))
  if root is None:
    raise ValueError("the HTML holds no element")
  return root

