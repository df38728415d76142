"""One page of a dump -> what the extraction makes of it; no Beam here.

PageParser.parse turns an xml_dump.Page or html_dump.HtmlPage into a PageResult: the tagged
outputs of the extraction's parse step (pipelines.extraction.ParsePageFn routes them), the
mentions with their record features already encoded, the counters to add and the reason a
page was skipped. Nothing here touches Beam, so the same call runs inline in the parse step or
in its worker processes (parse_pages, after init_worker: issue 17), where Beam's counters and
outputs do not reach; the step adds the counts and emits the outputs in page order, so that
both ways give the same outputs byte for byte.
"""

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from beam_pipelines.dumps import html_dump
from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import html_article
from beam_pipelines.parsers import mentions as mentions_lib
from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import page_kinds
from beam_pipelines.parsers import records
from beam_pipelines.parsers import wikitext

AnyPage = Union[xml_dump.Page, html_dump.HtmlPage]

# Output tags (the parse step's tagged outputs; mentions are the main output).
REDIRECT = "redirect"
ARTICLE = "article"
DISAMBIGUATION = "disambiguation"
CATEGORY = "category"


class PageResult(NamedTuple):
  """What one page gives.

  outputs: (tag, value) in the order the step emits them: (REDIRECT, (title, target)),
    (ARTICLE, (title, records.ArticleTuple)), (DISAMBIGUATION, title), (CATEGORY, (name,
    hidden)).
  mentions: (raw link target, records.MentionPayload: the mention's own features encoded) of
    an article's mentions, in text order.
  counts: counter name -> increment (the extract_wikipedia counters of stats.json).
  skipped: for a page skipped on an error, 'file F[ line L], page id N ('Title'): reason';
    else None.
  """
  outputs: List[Tuple[str, Any]]
  mentions: List[Tuple[str, records.MentionPayload]]
  counts: Dict[str, int]
  skipped: Optional[str]


def page_size(page: AnyPage) -> int:
  """Characters of a page's wikitext or HTML."""
  return len(page.html if isinstance(page, html_dump.HtmlPage) else page.text)


class PageParser:
  """Page -> PageResult, with the title rules of each page's wiki.

  Namespace-0 pages (from the <ns> tag) are articles, redirects or disambiguation pages. Each
  XML page is read with the title rules of its wiki (namespaces.site_for of the SiteInfo of
  its file in `sites`; English rules for a file not there, and for HTML dumps): localized
  namespaces, redirect words, link trail, title case. A redirect whose target lies in another
  namespace ('#REDIRECT [[Категорія:X]]') is counted 'redirects_to_other_namespace' and passed
  on with its prefix in English form (namespaces.Site.english_form: 'Category:X'), so that the
  KB merge, which knows no wiki, drops it and the mentions of its title as other-namespace
  links.
  An article is rendered by parsers.wikitext.parse_article, an HTML dump's page
  (html_dump.HtmlPage: never a redirect page; the redirects its record lists come out as
  (redirect, page title), counted 'redirects_from_html_records') by
  parsers.html_article.parse_html_article, to the same ParsedArticle; its mentions and their
  features come from parsers.mentions.article_mentions (dense_entity.kb.mention_features over
  the article's plain text, sentence spans computed once), each encoded once here
  (records.mention_payload). A disambiguation page (parsers.page_kinds.disambiguation_reason:
  '__DISAMBIG__', a disambiguation template or category, a '(disambiguation)' title) gives no
  article and no mention: its title goes to the KB merge as a non-entity, its links are counted
  ('links_dropped_disambiguation_page'). Category pages (namespace 14) give (name, True) when
  they hide their category (page_kinds.hidden_category_page) and (name, False) when a visible
  category has a maintenance-like name. A page longer than `max_page_chars`, or whose parse
  raises, is skipped: counted 'pages_failed', with its reason in PageResult.skipped ('Type:
  message' for an exception); what it gave before (an HTML record's redirects) stays.

  Args:
    sites: xml_dump.SiteInfo by dump path (Page.source).
    max_page_chars: longer pages (characters of wikitext or HTML) are skipped.
  """

  def __init__(self, sites: Optional[Dict[str, xml_dump.SiteInfo]] = None,
               max_page_chars: int = 20_000_000):
    self._sites = dict(sites or {})
    self._max_page_chars = max_page_chars

  def parse(self, page: AnyPage) -> PageResult:
    result = PageResult([], [], {}, None)
    try:
      self._parse(page, result)
    except _Skip as e:
      where = page.source or "?"
      if isinstance(page, html_dump.HtmlPage) and page.line:
        where += f" line {page.line}"
      # What the page gave before the error stays (an HTML record's redirects, counts).
      result.counts["pages_failed"] = result.counts.get("pages_failed", 0) + 1
      result = result._replace(
          skipped=f"file {where}, page id {page.page_id} ({page.title!r}): {e.reason}")
    return result

  def _parse(self, page: AnyPage, result: PageResult) -> None:
    outputs, counts = result.outputs, result.counts

    def count(name: str, n: int = 1) -> None:
      if n:
        counts[name] = counts.get(name, 0) + n

    html = isinstance(page, html_dump.HtmlPage)
    site = namespaces.site_for(None if html else self._sites.get(page.source))
    if page.ns != 0:
      count("pages_other_namespace")
      if page.ns == namespaces.CATEGORY_NAMESPACE and not html:
        self._category(page, site, outputs, count)
      return
    title = site.normalize_page_title(page.title)
    if not title:
      count("pages_empty_title")
      return
    if html:
      self._html_redirects(page, title, outputs, count)
      target = None
    else:
      try:
        target = site.redirect_target(page)
      except Exception as e:  # pylint: disable=broad-except
        raise _Skip(e) from e
    if target is not None:
      if target and not site.is_main_namespace_title(target):
        # Kept as a redirect (mentions of its title are then dropped as links to another
        # namespace, not kept as links to a missing article), its prefix in English form.
        count("redirects_to_other_namespace")
        target = site.english_form(target)
      if target and target != title:
        count("redirects")
        outputs.append((REDIRECT, (title, target)))
      else:
        count("redirects_invalid")
      return
    size = page_size(page)
    if size > self._max_page_chars:
      raise _Skip(f"page of {size} characters exceeds {self._max_page_chars}")
    try:
      if html:
        parsed = html_article.parse_html_article(page.html, page.title, page.url,
                                                 page.categories, page.templates)
      else:
        parsed = wikitext.parse_article(page.text, page.title, site)
      disambiguation = page_kinds.disambiguation_reason(parsed, title)
      mentions = [] if disambiguation else mentions_lib.article_mentions(
          parsed, page.page_id, title)
      payload = records.mention_payload
      encoded = [(target, payload(mention)) for target, mention in mentions]
    except Exception as e:  # pylint: disable=broad-except
      raise _Skip(e) from e
    if disambiguation:
      count("pages_disambiguation")
      count(f"pages_disambiguation_by_{disambiguation}")
      count("links_dropped_disambiguation_page", len(parsed.links))
      outputs.append((DISAMBIGUATION, title))
      return
    count("articles")
    for reason, n in sorted(parsed.dropped.items()):
      count(f"links_dropped_{reason}", n)
    count("links_kept", len(mentions))
    by_source = {}
    for link in parsed.links:
      by_source[link.source] = by_source.get(link.source, 0) + 1
    for source, n in sorted(by_source.items()):
      count(f"links_kept_{source}", n)  # where the mentions were written (prose, table, ...)
    count("links_kept_prose_in_list_items", parsed.list_item_links)
    outputs.append(
        (ARTICLE, (title, (page.page_id, parsed.first_paragraph, tuple(parsed.categories)))))
    result.mentions.extend(encoded)

  @staticmethod
  def _category(page: xml_dump.Page, site: namespaces.Site, outputs, count) -> None:
    """(category name, hidden) of a category page that hides its category or whose name
    looks like a maintenance category's (page_kinds.is_maintenance_category)."""
    kind, rest, _ = site.classify_title(page.title)
    if kind != namespaces.CATEGORY:  # a prefix that is not a category namespace name
      rest = page.title.split(":", 1)[-1]
    name = site.normalize_target(rest, namespaces.CATEGORY_NAMESPACE)
    if not name:
      return
    try:
      hidden = page_kinds.hidden_category_page(page.text)
    except Exception as e:  # pylint: disable=broad-except
      raise _Skip(e) from e
    if hidden:
      count("category_pages_hidden")
      outputs.append((CATEGORY, (name, True)))
    elif page_kinds.is_maintenance_category(name):
      count("category_pages_maintenance_named_visible")
      outputs.append((CATEGORY, (name, False)))

  @staticmethod
  def _html_redirects(page: html_dump.HtmlPage, title: str, outputs, count) -> None:
    """The redirects an HTML dump record lists for its page (Enterprise `redirects`): each
    (redirect title, page title), counted 'redirects' ('redirects_invalid' for an empty or
    invalid title, or one that is the page's own)."""
    for raw in page.redirects:
      redirect = namespaces.normalize_target(raw)
      if redirect and redirect != title and namespaces.is_main_namespace_title(redirect):
        count("redirects")
        count("redirects_from_html_records")
        outputs.append((REDIRECT, (redirect, title)))
      else:
        count("redirects_invalid")


class _Skip(Exception):
  """A page that is skipped, and why (an exception as 'Type: message')."""

  def __init__(self, reason):
    if isinstance(reason, BaseException):
      reason = f"{type(reason).__name__}: {reason}"
    super().__init__(reason)
    self.reason = reason


# ---------------------------------------------------------------------------------------------
# Worker processes (concurrent.futures with the 'spawn' start method: they import this module,
# which imports no Beam and no TensorFlow, ~0.2 s)
# ---------------------------------------------------------------------------------------------

_WORKER_PARSER: Optional[PageParser] = None


def init_worker(sites: Optional[Dict[str, xml_dump.SiteInfo]], max_page_chars: int) -> None:
  """Initializer of a parse worker process: its PageParser (the pool that starts the process
  sets its garbage collector first: pipelines.beam_io.init_pool_worker)."""
  global _WORKER_PARSER
  _WORKER_PARSER = PageParser(sites, max_page_chars)


# The mentions of a batch of pages grouped by raw link target: [(target, [payload, ...]), ...].
MentionGroups = List[Tuple[str, List[records.MentionPayload]]]


def parse_batch(parser: PageParser, pages: Sequence[AnyPage]
                ) -> Tuple[List[PageResult], MentionGroups]:
  """PageParser.parse of each page, in order, with the batch's mentions grouped by raw link
  target (the targets in the order of their first mention, each group's mentions in page and
  text order) instead of in each PageResult (whose `mentions` are then empty): what the parse
  step sends on, one group per target, grouped here, in the worker processes, and not in the
  step's own process (issue 17)."""
  results = [parser.parse(page) for page in pages]
  groups = {}
  for result in results:
    for target, payload in result.mentions:
      group = groups.get(target)
      if group is None:
        groups[target] = [payload]
      else:
        group.append(payload)
    result.mentions.clear()
  return results, list(groups.items())


def parse_pages(pages: Sequence[AnyPage]) -> Tuple[List[PageResult], MentionGroups]:
  """parse_batch of the pages in a worker process (after init_worker).

  Raises:
    RuntimeError: init_worker was not called in this process.
  """
  if _WORKER_PARSER is None:
    raise RuntimeError("parse_pages runs in a worker process set up by init_worker")
  return parse_batch(_WORKER_PARSER, pages)
