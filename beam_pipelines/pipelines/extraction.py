"""The extraction's Beam graph: MediaWiki dumps -> entities, mentions, alias counts, redirects.

Gillick et al. (2019), section 5: training mentions are Wikipedia anchor links (the anchor text
in the source page, the link target after redirect resolution as the gold entity), split 99.9% /
0.1% by a stable fingerprint of the source page; the knowledge base holds every article and every
linked title; the alias table (AT-Prior, P(e|m)) counts anchors of the training split.

Inputs are MediaWiki XML dumps or HTML dumps (one JSON object a line in the layout of
Wikimedia Enterprise HTML dumps, beam_pipelines.dumps.html_dump), told apart by content; both
give the same records (parsers.html_article renders HTML to the ParsedArticle that
parsers.wikitext gives for wikitext).

The DoFns here are thin: pages come from beam_pipelines.dumps, text, links and mentions from
beam_pipelines.parsers; this module adds Beam counters for every page or record dropped, the
joins (redirects, entities), the train/held-out split and the writes. `build_pipeline` adds the
graph to a pipeline (tests pass a TestPipeline); `run` runs it and publishes the outputs
atomically. The command line is beam_pipelines.extract_wikipedia.

Multistream dumps (*-pages-articles-multistream.xml.bz2) with their index are split at bz2
stream offsets into byte ranges that many workers read in parallel; other files are read whole
by one worker each. The outputs are the same either way.

Outputs (names from dense_entity/kb/schema.py; TFRecord of tf.train.Example, uncompressed,
'PREFIX-SSSSS-of-NNNNN.tfrecord'): entities, mentions_train, mentions_heldout, alias_counts.tsv,
redirects.tsv, stats.json and, written last, MANIFEST.json.
"""

import collections
import concurrent.futures
import contextlib
import datetime
import functools
import gc
import hashlib
import io
import json
import logging
import os
import re
import socket
import sys
import threading
import uuid
from typing import (Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional,
                    Sequence, Tuple, Union)

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from beam_pipelines.dumps import html_dump
from beam_pipelines.dumps import multistream
from beam_pipelines.dumps import read_ahead
from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import descriptions as descriptions_lib
from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import page_kinds
from beam_pipelines.parsers import pages as pages_lib
from beam_pipelines.parsers import records
from beam_pipelines.parsers import title_lists as title_lists_lib
from beam_pipelines.pipelines import beam_io
from beam_pipelines.pipelines import kb_merge
from dense_entity.kb import schema
from dense_entity.kb import titles

COUNTER_NAMESPACE = "extract_wikipedia"
DEFAULT_HELDOUT_FRACTION = 0.001
# Pages larger than this (bytes of wikitext) are reported and skipped.
MAX_PAGE_CHARS = 20_000_000
# Multistream dumps with an index are read in byte ranges of about this many compressed bytes
# (whole bz2 streams of ~100 pages each), one range per work item.
DEFAULT_RANGE_BYTES = 32 << 20

_STAGING_PREFIX = ".staging-"
# Inside each staging directory: who writes it (host, pid, process start, boot), so that a
# later run can tell a dead run's staging from a live one's (remove_stale_staging).
STAGING_OWNER_FILE = ".owner.json"
# A staging directory whose writer cannot be checked (another host, or no owner record) is
# removed once its newest file (or its owner's start) is older than this (seconds).
STALE_STAGING_AGE_S = 24 * 3600


# Counter objects by name, made once per process: a Beam counter finds the running step's
# metrics when it is incremented, so one object serves every step and bundle.
_COUNTERS = {}


def _count(name: str, n: int = 1) -> None:
  """Increments the Beam counter `name` (also reported in stats.json)."""
  if n:
    counter = _COUNTERS.get(name)
    if counter is None:
      counter = _COUNTERS[name] = Metrics.counter(COUNTER_NAMESPACE, name)
    counter.inc(n)


def fingerprint_fraction(key: str) -> float:
  """A stable number in [0, 1) for `key` (sha256; never Python's hash())."""
  digest = hashlib.sha256(key.encode("utf-8")).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64


def is_heldout(source_page: str, heldout_fraction: float) -> bool:
  """True when mentions from `source_page` belong to the held-out split."""
  return fingerprint_fraction(source_page) < heldout_fraction


# is_heldout of recent source pages, kept (a sha256 a mention otherwise; a page's mentions
# come with many entities): MentionRecordsFn's, bounded.
_is_heldout_kept = functools.lru_cache(maxsize=1 << 16)(is_heldout)


# ---------------------------------------------------------------------------------------------
# Pure steps (DoFns and functions)
# ---------------------------------------------------------------------------------------------


# A unit of reading work: (path, start, end): the bz2 streams in compressed bytes
# [start, end) of a multistream dump, or (path, None, None) for the whole file.
ReadItem = Tuple[str, Optional[int], Optional[int]]


def find_multistream_index(path: str) -> Optional[str]:
  """The multistream index lying beside dump `path` under its Wikimedia name, or None.

  'X-multistream.xml.bz2' -> 'X-multistream-index.txt.bz2' (or '.txt'); split dumps
  'X-multistream3.xml-pApB.bz2' -> 'X-multistream-index3.txt-pApB.bz2'. Any file system.
  """
  directory, name = path.rsplit("/", 1) if "/" in path else ("", path)
  for index_name in multistream.multistream_index_names(name):
    candidate = f"{directory}/{index_name}" if directory else index_name
    if FileSystems.exists(candidate):
      return candidate
  return None


class PlanReadsFn(beam.DoFn):
  """Matched dump file -> ReadItems: byte ranges of whole bz2 streams, or the whole file.

  A multistream dump with an index (given in `index_paths`, or, when `detect_index`, found
  beside it by name) is split into ranges of about `range_bytes` compressed bytes at stream
  offsets of its index (multistream.plan_stream_ranges), so many workers read one file. Any
  other file is one item. An index that cannot be used (malformed line, offsets outside the
  file) is logged and counted ('multistream_index_invalid') and the file is read whole, which
  gives the same pages.
  """

  def __init__(self, index_paths: Optional[Dict[str, str]] = None, detect_index: bool = True,
               range_bytes: int = DEFAULT_RANGE_BYTES):
    super().__init__()
    self._index_paths = dict(index_paths or {})
    self._detect_index = detect_index
    self._range_bytes = range_bytes

  def process(self, metadata) -> Iterator[ReadItem]:
    path = metadata.path
    index = self._index_paths.get(path)
    if index is None and self._detect_index:
      index = find_multistream_index(path)
    if index is None:
      yield path, None, None
      return
    try:
      with FileSystems.open(index, compression_type="uncompressed") as f:
        offsets = multistream.read_multistream_index(f, source_name=index)
      ranges = multistream.plan_stream_ranges(offsets, metadata.size_in_bytes,
                                              self._range_bytes)
    except (xml_dump.DumpError, ValueError, OSError, EOFError) as e:
      logging.error("Multistream index %s of %s not usable (%s); reading the file whole.",
                    index, path, e)
      _count("multistream_index_invalid")
      yield path, None, None
      return
    logging.info("Reading %s in %d ranges of bz2 streams (index %s).", path, len(ranges), index)
    _count("multistream_files")
    _count("multistream_ranges", len(ranges))
    for start, end in ranges:
      yield path, start, end


# A page of either input format.
AnyPage = Union[xml_dump.Page, html_dump.HtmlPage]


# Events of one read item (_read_item), emitted in order by ReadPagesFn in the step's thread;
# _EXCEPTION: what a reader thread raised (_ReadAhead), raised again there.
_PAGE, _ERROR, _DONE, _EXCEPTION = "page", "error", "done", "exception"


def _read_item(item, xml_paths: FrozenSet[str]) -> Iterator[Tuple[str, Any]]:
  """A ReadItem (or path) -> (_PAGE, (page, is HTML)), (_ERROR, DumpError) for each page, line,
  range or file tail that cannot be read, and last (_DONE, (is HTML, byte range)): what
  ReadPagesFn counts and logs, without touching Beam's counters (it may run in a reader
  thread)."""
  if isinstance(item, str):
    path, start, end = item, None, None
  else:
    path, start, end = item
  byte_range = None if start is None else (start, end)
  errors = []
  input_format = html_dump.FORMAT_XML
  if byte_range is None and path not in xml_paths:
    with FileSystems.open(path, compression_type="uncompressed") as f:
      input_format = html_dump.sniff_format(f)
  is_html = input_format == html_dump.FORMAT_HTML
  # A whole XML dump that this process decompressed ahead (read_ahead: run() in memory).
  ahead = read_ahead.take(path) if byte_range is None and path in xml_paths else None
  with (io.BytesIO(ahead) if ahead is not None
        else FileSystems.open(path, compression_type="uncompressed")) as f:
    if is_html:
      pages = html_dump.iter_pages(f, on_error=errors.append, source_name=path)
    else:
      pages = xml_dump.iter_pages(f, on_error=errors.append, source_name=path,
                                  byte_range=byte_range)
    with contextlib.closing(pages):
      for page in pages:
        while errors:  # reported before the pages after them, as they came
          yield _ERROR, errors.pop(0)
        yield _PAGE, (page, is_html)
    while errors:
      yield _ERROR, errors.pop(0)
  yield _DONE, (is_html, byte_range)


class _ReadAhead:
  """One item read by _read_item in a thread of `threads`: its events are buffered, at most
  `max_chars` characters of pages at a time (the reader waits for the step to take them),
  and handed over in order by events(). The reader's exception is raised by events() where
  it happened; cancel() stops the reader (a failed bundle, teardown)."""

  def __init__(self, threads: concurrent.futures.ThreadPoolExecutor, item,
               xml_paths: FrozenSet[str], max_chars: int):
    self._cond = threading.Condition()
    self._events = collections.deque()
    self._chars = 0
    self._max_chars = max_chars
    self._finished = self._cancelled = False
    threads.submit(self._read, item, xml_paths)  # its outcome comes through the events

  def _read(self, item, xml_paths) -> None:
    try:
      for event in _read_item(item, xml_paths):
        size = pages_lib.page_size(event[1][0]) if event[0] == _PAGE else 0
        with self._cond:
          while self._chars >= self._max_chars and not self._cancelled:
            self._cond.wait()
          if self._cancelled:
            return
          self._events.append((event, size))
          self._chars += size
          self._cond.notify_all()
    except BaseException as e:  # pylint: disable=broad-except
      with self._cond:
        self._events.append(((_EXCEPTION, e), 0))
    finally:
      with self._cond:
        self._finished = True
        self._cond.notify_all()

  def events(self) -> Iterator[Tuple[str, Any]]:
    while True:
      with self._cond:
        while not self._events and not self._finished:
          self._cond.wait()
        if not self._events:
          return
        event, size = self._events.popleft()
        if size:
          self._chars -= size
          self._cond.notify_all()
      if event[0] == _EXCEPTION:
        raise event[1]
      yield event

  def cancel(self) -> None:
    with self._cond:
      self._cancelled = True
      self._cond.notify_all()


class ReadPagesFn(beam.DoFn):
  """ReadItem (or a plain file path) -> xml_dump.Page or html_dump.HtmlPage for every page.

  A whole file's format is told by its content (html_dump.sniff_format): an HTML dump (NDJSON,
  plain, gzip or bz2) gives HtmlPages, line by line; a MediaWiki dump (plain or bz2) gives
  Pages, read whole, or, for a (path, start, end) item, only the bz2 streams in compressed
  bytes [start, end) of a multistream dump (one seek; memory bounded by a page, not the file
  or range). A page, line, range or file tail that cannot be read is logged with file and
  offset, line or page id, counted ('pages_unreadable') and skipped; the other pages still
  come through. 'files_read' counts whole files and first ranges (start 0), 'files_read_html'
  the HTML dumps among them, 'pages_read_html' their pages. A path in `xml_paths` (the dumps
  whose <siteinfo> was read when the pipeline was built) is read as XML without looking at
  its head again.

  With `threads` > 1 the bundle's items are read in that many threads, the next ones while the
  step emits the pages of the first (bz2 and gzip decompress without holding the GIL, most of
  a read: the 14 dumps' reading stage of Beam's in-memory runner otherwise used one of its 2
  cores, issue 17); each reader holds at most READ_AHEAD_CHARS characters of pages that the
  step has not emitted yet. Pages, counts and log lines are those of the reading in this
  thread, in the same order (an item's pages when the step reaches it: at the end of the
  bundle for the last ones).

  Raises:
    ValueError: `threads` below 1.
  """

  READ_AHEAD_CHARS = 1 << 27

  def __init__(self, xml_paths: Iterable[str] = (), threads: int = 1):
    super().__init__()
    if threads < 1:
      raise ValueError(f"threads must be at least 1, got {threads}")
    self._xml_paths = frozenset(xml_paths)
    self._threads = threads
    self._pool = None
    self._ahead = collections.deque()

  def setup(self):
    if self._threads > 1 and self._pool is None:
      self._pool = concurrent.futures.ThreadPoolExecutor(self._threads,
                                                         thread_name_prefix="ReadPages")

  def teardown(self):
    self._cancel()
    if self._pool is not None:
      self._pool.shutdown(wait=True)
      self._pool = None

  def start_bundle(self):
    self._cancel()  # what a failed bundle left

  def process(self, item) -> Iterator[AnyPage]:
    if self._pool is None:
      yield from self._emit(_read_item(item, self._xml_paths))
      return
    self._ahead.append(_ReadAhead(self._pool, item, self._xml_paths, self.READ_AHEAD_CHARS))
    while len(self._ahead) >= self._threads:
      yield from self._emit(self._ahead[0].events())
      self._ahead.popleft()

  def finish_bundle(self):
    while self._ahead:
      for page in self._emit(self._ahead[0].events()):
        yield beam_io.in_global_window(page)
      self._ahead.popleft()

  def _cancel(self) -> None:
    while self._ahead:
      self._ahead.popleft().cancel()

  @staticmethod
  def _emit(events: Iterator[Tuple[str, Any]]) -> Iterator[AnyPage]:
    errors = 0
    for kind, value in events:
      if kind == _PAGE:
        page, is_html = value
        _count("pages_read")
        if is_html:
          _count("pages_read_html")
        yield page
      elif kind == _ERROR:
        logging.error("Skipped unreadable input: %s", value)
        errors += 1
        _count("pages_unreadable")
      else:  # _DONE
        is_html, byte_range = value
        if is_html:
          _count("files_read_html")
        if byte_range is None or byte_range[0] == 0:
          _count("files_read")
        if byte_range is not None:
          _count("multistream_ranges_read")
        if errors:
          _count("files_with_errors" if byte_range is None else "multistream_ranges_with_errors")


def page_key(page: AnyPage) -> Tuple[int, str]:
  """Dedupe key of a page: (namespace, normalized title)."""
  return page.ns, titles.normalize_title(page.title)


def _pick_key(page: AnyPage, sites: Dict[str, xml_dump.SiteInfo]):
  if isinstance(page, html_dump.HtmlPage):  # never a redirect; after any XML article
    return (True, False, len(page.html), page.page_id, page.html, page.title)
  site = namespaces.site_for(sites.get(page.source))
  return (site.redirect_target(page) is None, True, len(page.text), page.page_id, page.text,
          page.title)


def pick_page(key_pages: Tuple[Tuple[int, str], Iterable[AnyPage]],
              sites: Optional[Dict[str, xml_dump.SiteInfo]] = None) -> AnyPage:
  """One page per title when several inputs hold it: prefer an article over a redirect, then
  a MediaWiki XML page over an HTML dump's, then the longer text, then the larger page id
  (deterministic). `sites`: SiteInfo by file, for the redirect words of each page's wiki."""
  _, pages = key_pages
  pages = list(pages)
  if len(pages) == 1:
    return pages[0]
  _count("pages_duplicate_title", len(pages) - 1)
  sites = sites or {}
  return max(pages, key=lambda p: _pick_key(p, sites))


def read_site_infos(paths: Sequence[str],
                    known: Optional[Dict[str, Optional[xml_dump.SiteInfo]]] = None
                    ) -> Dict[str, xml_dump.SiteInfo]:
  """The <siteinfo> header of each MediaWiki XML dump file (any file system), by path (HTML
  dumps are left out).

  Read once when the pipeline is built (the header is in the first bz2 stream of a multistream
  dump, which later reads of byte ranges never see) and passed to the DoFns, so that each
  page is read with the namespaces, redirect words, link trail and title case of its own wiki.
  A path in `known` is not read again: its SiteInfo, or None for an HTML dump (check_inputs
  gives them from its own read of each head).

  Raises:
    xml_dump.DumpError: a file whose header cannot be read, naming it.
  """
  infos = {}
  known = known or {}
  for path in paths:
    if path in known:
      if known[path] is not None:
        infos[path] = known[path]
      continue
    with FileSystems.open(path, compression_type="uncompressed") as f:
      if html_dump.sniff_format(f) == html_dump.FORMAT_HTML:
        continue  # an HTML dump has no header: its pages are read with English rules
    with FileSystems.open(path, compression_type="uncompressed") as f:
      infos[path] = xml_dump.read_siteinfo(f, source_name=path)
  return infos


class ParsePageFn(beam.DoFn):
  """Page -> tagged outputs: 'redirect' (title, target), 'article' (title, ArticleTuple),
  'disambiguation' (title), 'category' (category name, hidden) and 'mention' ([(raw target,
  [records.MentionPayload, ...]), ...]), the main output: the mentions of each batch of pages
  (below) grouped by their target (pages_lib.parse_batch), in lists of at most
  beam_io.PACK_MAX_VALUES groups, one Beam element per list: not one element per link, nor
  per target (28,016 packs of the 7 English dumps' 42,382 mentions were as many elements,
  each taken alone by the next step, issue 17).

  What each page gives is parsers.pages.PageParser's (articles, redirects, disambiguation
  pages, category pages, skipped pages: see there); here its counts become Beam counters, a
  skipped page is logged ('Skipped page: file F, page id N (title): reason') and the outputs
  are routed.

  Pages are parsed in batches of about BATCH_CHARS characters (BATCH_PAGES pages at most).
  With `processes` > 1 the batches are parsed in that many worker processes
  (beam_io.OrderedPool, made in setup and shut down in teardown), which also group their
  mentions: at most 2 batches per process in flight (memory bounded by them, not by the
  bundle), and the results come back and are emitted in page order, so that the outputs are
  byte-identical to an inline parse (processes=1). This is how one local in-memory run uses
  several cores (Beam's multi_processing mode loses values on large inputs, issue 17); on a
  distributed runner, whose workers already run one process per core, leave it at 1. A
  worker process that dies fails the step (concurrent.futures' BrokenProcessPool), never
  silently drops pages.

  Args:
    max_page_chars: longer pages are reported and skipped.
    sites: xml_dump.SiteInfo by dump path.
    processes: worker processes for the parse (1: in this process).
    start_method: how they start (multiprocessing): 'spawn' (a fresh interpreter, which
      imports parsers.pages and, as multiprocessing does, the main module, so a script
      needs its `if __name__ == "__main__":` guard; safe beside any thread) or 'fork' (a
      copy of this process, no imports: the command line's extraction of the benchmark's 7
      dumps 6.7 s instead of 7.4-7.8 s with 'spawn'; only where no other thread can hold a
      lock the parse needs, as in Beam's in-memory runner, whose only other thread is its
      data plane's periodic flusher).

  Raises:
    ValueError: `processes` is below 1.
  """

  REDIRECT = pages_lib.REDIRECT
  ARTICLE = pages_lib.ARTICLE
  DISAMBIGUATION = pages_lib.DISAMBIGUATION
  CATEGORY = pages_lib.CATEGORY
  # A batch sent to a worker process: this many characters of wikitext or HTML, or pages.
  BATCH_CHARS = 1 << 20
  BATCH_PAGES = 64

  def __init__(self, max_page_chars: int = MAX_PAGE_CHARS,
               sites: Optional[Dict[str, xml_dump.SiteInfo]] = None, processes: int = 1,
               start_method: str = "spawn"):
    super().__init__()
    beam_io.check_processes(processes)
    self._max_page_chars = max_page_chars
    self._sites = dict(sites or {})
    self._processes = processes
    self._start_method = start_method
    self._pool = None

  def setup(self):
    # A page's parse makes and drops tens of thousands of small objects.
    beam_io.relax_garbage_collection()
    self._parser = pages_lib.PageParser(self._sites, self._max_page_chars)
    if self._processes > 1 and self._pool is None:
      self._pool = beam_io.OrderedPool(
          self._processes, self._start_method, initializer=pages_lib.init_worker,
          initargs=(self._sites, self._max_page_chars))

  def teardown(self):
    if self._pool is not None:
      self._pool.shutdown()
      self._pool = None

  def start_bundle(self):
    self._batch, self._batch_chars = [], 0

  def process(self, page: AnyPage):
    self._batch.append(page)
    self._batch_chars += pages_lib.page_size(page)
    if len(self._batch) >= self.BATCH_PAGES or self._batch_chars >= self.BATCH_CHARS:
      yield from self._submit()
    if self._pool is not None:
      for batch in self._pool.results(wait_all=False):
        yield from self._emit(batch)

  def finish_bundle(self):
    outputs = self._submit()
    if self._pool is not None:
      outputs = (output for batch in self._pool.results(wait_all=True)
                 for output in self._emit(batch))
    for output in outputs:
      yield beam_io.output_in_global_window(output)

  def _submit(self):
    """Parses the batch held (inline: its outputs; in the pool: none yet, submitted)."""
    batch, self._batch, self._batch_chars = self._batch, [], 0
    if not batch:
      return ()
    if self._pool is None:
      return self._emit(pages_lib.parse_batch(self._parser, batch))
    self._pool.submit(pages_lib.parse_pages, batch)
    return ()

  def _emit(self, batch: Tuple[List[pages_lib.PageResult], pages_lib.MentionGroups]):
    results, groups = batch
    # A batch's outputs live on (in packs, through the shuffles to the KB merge) and hold no
    # reference cycles: out of the cyclic collector's reach (gc.freeze, as
    # beam_io.relax_garbage_collection does), they are not traversed by the young collections
    # their numbers trigger (issue 17: one of 46-53 ms in the parse stage of the 7 English
    # dumps, in the process that also feeds the parse workers).
    gc.freeze()
    for result in results:
      for name, n in result.counts.items():
        _count(name, n)
      if result.skipped is not None:
        logging.error("Skipped page: %s", result.skipped)
      for tag, value in result.outputs:
        yield beam.pvalue.TaggedOutput(tag, value)
    # Each mention's own record features were encoded by the parse, once: the KB merge and
    # the writes pass them on as one bytes value (records.MentionPayload).
    yield from beam_io.chunks(groups)


def drop_hidden_categories(article: Tuple[str, records.ArticleTuple],
                           category_pages: Dict[str, bool]) -> Tuple[str, records.ArticleTuple]:
  """(title, ArticleTuple) -> the same without its hidden categories.

  A category is hidden when the dump holds its page and that page hides it
  (`category_pages[name]` True), or, when the dump holds no such page, when its name is a
  standard maintenance category's (page_kinds.is_maintenance_category). Counted
  'categories_dropped_hidden_by_page' and 'categories_dropped_hidden_by_name'.

  Args:
    article: (title, (page_id, first_paragraph, categories)).
    category_pages: category name -> hidden, for the category pages of the dump that hide
      their category or have a maintenance-like name (ParsePageFn 'category' output).
  """
  title, (page_id, first_paragraph, categories) = article
  kept = []
  for name in categories:
    by_page = category_pages.get(name)
    if by_page:
      _count("categories_dropped_hidden_by_page")
    elif by_page is None and page_kinds.is_maintenance_category(name):
      _count("categories_dropped_hidden_by_name")
    else:
      kept.append(name)
  if len(kept) == len(categories):
    return article
  return title, (page_id, first_paragraph, tuple(kept))


def parse_description(line: str) -> Iterator[Tuple[str, str]]:
  """A JSONL line {"title", "text", ...} -> (normalized title, text); bad lines counted.

  The line is parsed by parsers.descriptions.parse_description_line; a blank line gives
  nothing, a bad one ('descriptions_invalid': not JSON, no title) is logged and dropped.
  """
  try:
    parsed = descriptions_lib.parse_description_line(line)
  except (ValueError, KeyError, TypeError) as e:
    logging.warning("Skipped description line (%s): %.100r", e, line)
    _count("descriptions_invalid")
    return
  if parsed is None:
    return
  title, text = parsed
  if not title:
    _count("descriptions_invalid")
    return
  _count("descriptions_read")
  yield title, text


class MentionRecordsFn(beam.DoFn):
  """[([MentionPayload, ...], Entity), ...] of the KB merge -> packs of (mention_id, serialized
  mention record): the main output (training split) and 'heldout' (is_heldout of its source
  page), counted 'mentions_train' / 'mentions_heldout'; and 'alias': packs of alias counts,
  dicts {alias_count_key(alias key of a training mention's span, entity title): number of
  mentions with that key}, for the alias table (AliasCountsFn sums them).

  One step per list of packs of entities' mentions for what were three per-mention steps
  (split, alias key, record), each a Beam element per mention. The records and alias counts
  of a whole bundle leave in packs (beam_io.Packs' bounds; alias counts once they hold
  ALIAS_PACK keys, at most one entity's mentions more), not one or more elements per entity:
  the writers and counters downstream take one step per pack. The record is
  records.mention_record: the entity's encoded features (made once per entity) and the
  mention's own. An alias count's key is one string, not an (alias, title) tuple: a dict of
  strings and ints is no work for Python's cyclic garbage collector, which visited the
  tuples of the 14 dumps' 265,082 keys (and the rows made of them) at about 0.7 us each:
  0.76 s of collections in the step that summed them (issue 17).
  """

  HELDOUT = "heldout"
  ALIAS = "alias"
  ALIAS_PACK = 1 << 16

  def __init__(self, heldout_fraction: float):
    super().__init__()
    self._heldout_fraction = heldout_fraction

  def start_bundle(self):
    # freeze_full: the records outlive the step, acyclic (beam_io.Packs).
    self._packs = beam_io.Packs(size_of=beam_io.record_size, freeze_full=True)
    self._aliases = {}

  def _tagged(self, key, pack):
    return pack if key == "train" else beam.pvalue.TaggedOutput(self.HELDOUT, pack)

  def process(self, packs):
    fraction = self._heldout_fraction
    is_heldout, alias_key = _is_heldout_kept, titles.alias_key
    # The element's records, packed in one call per split (Packs.add_all: the same packs as
    # a call per entity, whose cost was a third of this step's, issue 17).
    train, heldout = [], []
    for payloads, entity in packs:
      aliases, tab_title = self._aliases, _ALIAS_KEY_SEPARATOR + entity.title
      for payload, record in zip(payloads, records.mention_records_with_part(
          payloads, records.entity_features_part(entity))):
        if is_heldout(payload[1], fraction):
          heldout.append((payload[0], record))
        else:
          train.append((payload[0], record))
          key = alias_key(payload[2]) + tab_title  # alias_count_key
          aliases[key] = aliases.get(key, 0) + 1
      if len(aliases) >= self.ALIAS_PACK:
        self._aliases = {}
        yield beam.pvalue.TaggedOutput(self.ALIAS, aliases)
    add_all = self._packs.add_all
    if train:
      _count("mentions_train", len(train))
      for key, pack in add_all("train", train):
        yield self._tagged(key, pack)
    if heldout:
      _count("mentions_heldout", len(heldout))
      for key, pack in add_all(self.HELDOUT, heldout):
        yield self._tagged(key, pack)

  def finish_bundle(self):
    for key, pack in self._packs.take():
      yield self._tagged(key, beam_io.in_global_window(pack))
    if self._aliases:
      aliases, self._aliases = self._aliases, {}
      yield beam.pvalue.TaggedOutput(self.ALIAS, beam_io.in_global_window(aliases))


# Between an alias key and an entity title in an alias count's key: alias_key collapses every
# whitespace run to one space, so the key's first TAB is this one.
_ALIAS_KEY_SEPARATOR = "\t"
# A character that sorts before the separator; in an alias count's key it could make the keys'
# order differ from the (alias, title) order (alias_table_lines).
_BEFORE_SEPARATOR = re.compile("[\x00-\x08]")


def alias_count_key(alias: str, title: str) -> str:
  """The key of an (alias key, entity title) pair in MentionRecordsFn's alias count packs:
  'alias<TAB>title', the start of its line in the alias table."""
  return alias + _ALIAS_KEY_SEPARATOR + title


class AliasCountsFn(beam.CombineFn):
  """Packs of alias counts ({alias_count_key(alias key, entity title): count}: MentionRecordsFn's
  'alias') -> their sums, one dict; extract_output gives its (alias key, entity title, total
  count) rows: the alias table's counts (paper section 4.1, AT-Prior)."""

  def create_accumulator(self) -> Dict[str, int]:
    return {}

  def add_input(self, counts, pack):
    get = counts.get
    for key, n in pack.items():
      counts[key] = get(key, 0) + n
    return counts

  def merge_accumulators(self, accumulators):
    accumulators = iter(accumulators)
    merged = next(accumulators)
    for counts in accumulators:
      self.add_input(merged, counts)
    return merged

  def extract_output(self, counts) -> List[Tuple[str, str, int]]:
    return [(*key.split(_ALIAS_KEY_SEPARATOR, 1), n) for key, n in counts.items()]


def sum_alias_counts(key_packs: Tuple[Any, Iterable[Dict[str, int]]]) -> Dict[str, int]:
  """(key, packs of alias counts) -> their sum, {alias_count_key(alias key, entity title):
  total count} (AliasCountsFn's accumulator of every pack)."""
  combine = AliasCountsFn()
  counts = combine.create_accumulator()
  for pack in key_packs[1]:
    combine.add_input(counts, pack)
  return counts


def alias_table_lines(sums: List[Dict[str, int]]) -> List[str]:
  """Summed alias counts (sum_alias_counts' dicts: the one the pipeline makes, or none) -> the
  lines of the alias table ('alias key<TAB>entity title<TAB>count\n'), sorted as
  beam_io.format_tsv sorts the rows (alias key, entity title, count): the text that
  WriteTextFile wrote from AliasCountsFn's rows.

  The lines are sorted as strings (no row tuples: the 14 dumps' 265,082 rows took 0.5 s to
  sort and format, their tuples 0.76 s of garbage collection, issue 17), which is the rows'
  order when no key holds a character that sorts before TAB and each holds one TAB (a key is
  never the start of another's line then: the next character after a key is TAB, and a
  longer key's is above it); otherwise they are sorted by (alias key, entity title).
  """
  counts = sums[0] if len(sums) == 1 else AliasCountsFn().merge_accumulators([{}, *sums])
  keys = "".join(counts)
  if _BEFORE_SEPARATOR.search(keys) is None and keys.count(_ALIAS_KEY_SEPARATOR) == len(counts):
    return sorted([f"{key}\t{n}\n" for key, n in counts.items()])
  return [f"{key}\t{counts[key]}\n"
          for key in sorted(counts, key=lambda k: tuple(k.split(_ALIAS_KEY_SEPARATOR, 1)))]


class ExtractWikipedia(beam.PTransform):
  """Dump file paths (or ReadItems) -> entities, mentions (train/held-out), alias counts and
  redirects.

  Input: (paths, descriptions) or (paths, descriptions, listed titles, listed redirects):
  PCollections of dump paths or ReadItems, (title, text), lists of titles and lists of
  (redirect, target) (packs: kb_merge.ReadListFileFn); without the listed titles the KB
  merge leaves out the steps only title-only entries need. The KB is merged from all of them
  by kb_merge.MergeKnowledgeBase (one entity per matching key).

  Returns a dict of PCollections: 'entity_records' (packs [(title, serialized entity record),
  ...]: records.entity_record, made where the KB merge builds the entities), 'mentions_train' and
  'mentions_heldout' (packs [(mention_id, serialized mention record), ...]: MentionRecordsFn),
  'alias_counts' (one dict of all alias counts, {alias_count_key(alias key, entity title):
  count}, train split only: sum_alias_counts; no element when there is none), 'redirects'
  (packs [(redirect title, entity title), ...]).

  `gathered`: for Beam's local runner in memory with one worker (runs_in_memory), as
  kb_merge.MergeKnowledgeBase's.
  """

  def __init__(self, heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
               max_page_chars: int = MAX_PAGE_CHARS,
               sites: Optional[Dict[str, xml_dump.SiteInfo]] = None,
               parse_processes: int = 1, parse_start_method: str = "spawn",
               gathered: bool = False):
    super().__init__()
    if not 0.0 <= heldout_fraction <= 1.0:
      raise ValueError(f"heldout_fraction must be in [0, 1], got {heldout_fraction}")
    self._heldout_fraction = heldout_fraction
    self._max_page_chars = max_page_chars
    self._sites = dict(sites or {})
    self._parse_processes = parse_processes
    self._parse_start_method = parse_start_method
    self._gathered = gathered

  def expand(self, inputs):
    paths, descriptions = inputs[:2]
    title_list, title_redirects = inputs[2:] if len(inputs) > 2 else (None, None)
    # One element per file or per multistream range: workers read them in parallel.
    pages = (beam_io.spread(paths, "SpreadFiles")
             | "ReadPages" >> beam.ParDo(ReadPagesFn(xml_paths=self._sites,
                                                     threads=self._parse_processes))
             # Grouping by title both removes pages repeated across inputs and reshuffles the
             # pages so that parsing parallelizes (it replaces a plain beam.Reshuffle).
             | "KeyByTitle" >> beam.Map(lambda p: (page_key(p), p))
             | "DedupeAndReshufflePages" >> beam_io.CountedGroupByKey("Pages", packed=False)
             | "PickPage" >> beam.Map(pick_page, sites=self._sites))
    parsed = pages | "ParsePages" >> beam.ParDo(
        ParsePageFn(self._max_page_chars, self._sites, self._parse_processes,
                    self._parse_start_method)).with_outputs(
            ParsePageFn.REDIRECT, ParsePageFn.ARTICLE, ParsePageFn.DISAMBIGUATION,
            ParsePageFn.CATEGORY, main="mention")
    # Lists of mention groups, each Beam element thousands of mentions (by_reference, on size
    # sampling).
    beam_io.by_reference(parsed["mention"], keyed=False)
    # Hidden categories: the dump's category pages decide where it has them (one flag per
    # name, hidden if any page says so), the maintenance-name patterns elsewhere.
    category_pages = (parsed[ParsePageFn.CATEGORY]
                      | "OneFlagPerCategory" >> beam.CombinePerKey(any))
    articles = parsed[ParsePageFn.ARTICLE] | "DropHiddenCategories" >> beam.Map(
        drop_hidden_categories, beam.pvalue.AsDict(category_pages))
    sources = {"articles": articles,
               "redirects": parsed[ParsePageFn.REDIRECT],
               "disambiguations": parsed[ParsePageFn.DISAMBIGUATION],
               "descriptions": descriptions, "mention_packs": parsed["mention"]}
    if title_list is not None:
      sources["title_packs"] = title_list
    if title_redirects is not None:
      sources["title_redirect_packs"] = title_redirects
    kb = sources | "MergeKnowledgeBase" >> kb_merge.MergeKnowledgeBase(
        self._parse_processes, self._parse_start_method, entity_record=records.entity_record,
        gathered=self._gathered)
    split = kb["mentions"] | "SplitAndEncodeMentions" >> beam.ParDo(
        MentionRecordsFn(self._heldout_fraction)).with_outputs(
            MentionRecordsFn.HELDOUT, MentionRecordsFn.ALIAS, main="train")
    # Packs of records and dicts of alias counts (by_reference, on size sampling; kept until
    # the run ends if a stage reads them after this one: the caller may read them twice).
    train, heldout = (beam_io.by_reference(split[tag], keyed=False, read_once=False)
                      for tag in ("train", MentionRecordsFn.HELDOUT))
    # One global sum: the counts are written as one file (all rows on one worker) anyway.
    # All packs under one key, grouped (by reference on the local runner in memory: the
    # packs, each bundle's counts already summed by MentionRecordsFn, cross no coder) and
    # summed; no element when there is no alias (the writer still writes the file). Not
    # beam.CombineGlobally, whose accumulators (dicts of all keys) Beam's local runner
    # encodes and decodes, the table's rows again on their way to the writer: 1.6 s of the
    # 14 dumps' 48 s extraction, 2 s more in the writer's own combine (issue 17).
    # Each step's output marked by reference (on size sampling: the counts' dicts are large).
    alias_packs = beam_io.by_reference(split[MentionRecordsFn.ALIAS], keyed=False)
    keyed_alias_packs = beam_io.by_reference(
        alias_packs | "KeyAliasPacks" >> beam.Map(lambda pack: (None, pack)))
    alias_counts = beam_io.by_reference(
        keyed_alias_packs
        | "GatherAliasCounts" >> beam_io.CountedGroupByKey("AliasCounts")
        | "SumAliasCounts" >> beam.Map(sum_alias_counts), keyed=False, read_once=False)
    return {
        "entity_records": kb["entities"],
        "mentions_train": train,
        "mentions_heldout": heldout,
        "alias_counts": alias_counts,
        "redirects": kb["redirects"],
    }


def _read_lists(pipeline, name: str, patterns: Sequence[str], parse, counter: str):
  """The files matching `patterns` (title or redirect lists: plain, .gz or .bz2), each read
  and its lines parsed with `parse` by kb_merge.ReadListFileFn, in packs (lists)."""
  if not patterns:
    return pipeline | f"No{name}" >> beam.Create([])
  files = (pipeline
           | f"{name}Patterns" >> beam.Create(list(patterns), reshuffle=False)
           | f"Match{name}" >> fileio.MatchAll())
  # One element per file: workers read them in parallel.
  return (beam_io.spread(files, f"Spread{name}")
          | f"Read{name}" >> beam.ParDo(kb_merge.ReadListFileFn(parse, counter)))


def output_prefixes() -> Tuple[str, ...]:
  return (schema.ENTITIES_PREFIX, schema.TRAIN_MENTIONS_PREFIX, schema.HELDOUT_MENTIONS_PREFIX)


def build_pipeline(pipeline: beam.Pipeline, input_patterns: Sequence[str], output_dir: str,
                   heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
                   descriptions: Optional[str] = None, num_shards: Optional[int] = None,
                   max_page_chars: int = MAX_PAGE_CHARS,
                   multistream_index: Optional[str] = None,
                   detect_multistream_index: bool = True,
                   range_bytes: int = DEFAULT_RANGE_BYTES,
                   title_lists: Sequence[str] = (),
                   redirect_lists: Sequence[str] = (),
                   site_infos: Optional[Dict[str, Optional[xml_dump.SiteInfo]]] = None,
                   parse_processes: int = 1, parse_start_method: str = "spawn"
                   ) -> Dict[str, beam.PCollection]:
  """Adds the extraction to `pipeline`, writing its files into `output_dir` (no manifest).

  `run` passes a staging directory here and moves the files into place afterwards; tests pass
  a TestPipeline and a temporary directory.

  Args:
    pipeline: the Beam pipeline.
    input_patterns: file patterns of MediaWiki XML dumps (.xml or .bz2) and HTML dumps
      (NDJSON; plain, .gz or .bz2), any file system; each file's format is told by its
      content (html_dump.sniff_format).
    output_dir: existing directory the record files and TSVs are written to.
    heldout_fraction: fraction of source pages whose mentions are held out.
    descriptions: optional JSONL file of {"title", "text"} entity descriptions.
    num_shards: shards per TFRecord output; None sizes them by record count.
    max_page_chars: longer pages are reported and skipped.
    multistream_index: optional file pattern of multistream index files
      ('offset:page_id:title' lines, plain or bz2), paired with the dumps by name (or one index
      with one dump); matched when the pipeline is built.
    detect_multistream_index: look for 'X-multistream-index.txt.bz2' beside each
      'X-multistream.xml.bz2' input without an index given.
    range_bytes: a multistream dump with an index is read in ranges of about this many
      compressed bytes (whole bz2 streams), distributed over the workers.
    title_lists: file patterns of title lists (one title per line, plain, .gz or .bz2;
      parsers.title_lists): every title becomes a KB entity unless it is a redirect or
      disambiguation-like (kb_merge).
    redirect_lists: file patterns of redirect lists ('redirect<TAB>target' lines): the
      redirect titles become aliases of their targets' entities.
    site_infos: the SiteInfo of dump paths whose heads were read already (None for an HTML
      dump: check_inputs' 'site_infos'); the other dumps' heads are read here
      (read_site_infos).
    parse_processes: worker processes of each parse step (ParsePageFn) and of the entity
      build (kb_merge.BuildEntitiesFn), and threads that read the dumps (ReadPagesFn); 1:
      none.
    parse_start_method: how they start ('spawn' or 'fork': see ParsePageFn).

  Returns:
    The ExtractWikipedia PCollections, plus 'written' (path, record count) of every shard
    (the files complete once the run ends: on the local runner in memory, run by
    beam_io.run_pipeline, forked processes write them while it goes on).

  Raises:
    FileNotFoundError: `multistream_index` matches no file.
    ValueError: an index file belongs to no input dump.
  """
  index_paths = {}
  dump_paths = _expand_patterns(list(input_patterns))
  if multistream_index:
    index_paths = multistream.pair_multistream_indexes(dump_paths,
                                                       _expand_patterns([multistream_index]))
  sites = read_site_infos(dump_paths, site_infos)
  for path, info in sorted(sites.items()):
    logging.info("%s: wiki %s, language %r, %d namespaces, case %s.", path,
                 info.dbname or "?", info.lang, len(info.namespaces), info.case)
  paths = (pipeline
           # Not reshuffled: SpreadFiles spreads the files (or ranges) that the patterns match.
           | "InputPatterns" >> beam.Create(list(input_patterns), reshuffle=False)
           | "MatchFiles" >> fileio.MatchAll()
           | "PlanReads" >> beam.ParDo(PlanReadsFn(index_paths, detect_multistream_index,
                                                   range_bytes)))
  if descriptions:
    description_pairs = (pipeline
                         | "ReadDescriptions" >> beam.io.ReadFromText(descriptions)
                         | "ParseDescriptions" >> beam.FlatMap(parse_description))
  else:
    description_pairs = pipeline | "NoDescriptions" >> beam.Create([])
  inputs = (paths, description_pairs)
  if title_lists or redirect_lists:
    # Without any list the two are left out: the KB merge then also leaves out the steps only
    # title-only entries need (MergeKnowledgeBase).
    inputs += (_read_lists(pipeline, "Titles", title_lists, title_lists_lib.parse_title_line,
                           "titles_listed"),
               _read_lists(pipeline, "TitleRedirects", redirect_lists,
                           title_lists_lib.parse_redirect_line, "title_list_redirects"))
  # In memory every value is in this process anyway: each writer is one stage, and so are the
  # KB merge's redirect resolution and its entity build.
  gathered = runs_in_memory(pipeline.options)
  outputs = inputs | "Extract" >> ExtractWikipedia(heldout_fraction, max_page_chars, sites,
                                                      parse_processes, parse_start_method,
                                                      gathered=gathered)
  join = os.path.join if "://" not in output_dir else FileSystems.join
  written = []
  written.append(
      outputs["entity_records"]  # packs of (title, record): the KB merge's
      | "WriteEntities" >> beam_io.WriteShardedTFRecords(
          join(output_dir, schema.ENTITIES_PREFIX), num_shards, packed=True,
          gathered=gathered, background=True))
  for name, prefix in (("mentions_train", schema.TRAIN_MENTIONS_PREFIX),
                       ("mentions_heldout", schema.HELDOUT_MENTIONS_PREFIX)):
    written.append(
        outputs[name]  # packs of (mention_id, record): MentionRecordsFn
        | f"Write_{name}" >> beam_io.WriteShardedTFRecords(join(output_dir, prefix),
                                                           num_shards, packed=True,
                                                           gathered=gathered,
                                                           background=True))
  _ = outputs["alias_counts"] | "WriteAliasCounts" >> beam_io.WriteTextFile(
      join(output_dir, schema.ALIAS_COUNTS_FILE), lines=alias_table_lines)
  _ = outputs["redirects"] | "WriteRedirects" >> beam_io.WriteTextFile(
      join(output_dir, schema.REDIRECTS_FILE), packed=True)
  outputs["written"] = written | "AllShards" >> beam.Flatten()
  return outputs


# ---------------------------------------------------------------------------------------------
# Running: staging, stats, atomic move, manifest
# ---------------------------------------------------------------------------------------------


def _expand_patterns(input_patterns: Sequence[str], what: str = "input") -> List[str]:
  """Checks that every pattern matches a file; returns the sorted matched paths.

  Raises:
    FileNotFoundError: naming `what` and the patterns that match nothing.
    ValueError: a pattern names a local directory (Beam's match gives the directory itself,
      which no reader opens): the message names it and the pattern of its files to give.
  """
  results = FileSystems.match(list(input_patterns))
  missing = [p for p, r in zip(input_patterns, results) if not r.metadata_list]
  if missing:
    raise FileNotFoundError(f"{what} pattern(s) match no file: {', '.join(missing)}")
  paths = sorted({m.path for r in results for m in r.metadata_list})
  directories = [p for p in paths if os.path.isdir(p)]
  if directories:
    raise ValueError(f"{what} {directories[0]} is a directory, not a file: give its files "
                     f"as a pattern, e.g. {os.path.join(directories[0], '*')}")
  return paths


# Lines looked at by the check of a description, title or redirect list before the run.
_HEAD_LINES = 20


def _head_lines(path: str, n: int = _HEAD_LINES, max_bytes: int = 1 << 20) -> List[str]:
  """The first `n` lines within the first `max_bytes` bytes of a text file (plain, .gz or .bz2
  by its name, as ReadFromText reads it)."""
  with FileSystems.open(path) as f:
    head = f.read(max_bytes)
  lines = head.decode("utf-8", "replace").split("\n")
  if len(head) == max_bytes and len(lines) > 1:
    lines.pop()  # cut by max_bytes
  if lines and not lines[-1]:
    lines.pop()
  return [line.rstrip("\r") for line in lines[:n]]


def check_line_file(path: str, kind: str, parse) -> None:
  """Checks that a description, title or redirect list holds lines of its kind.

  The first non-blank line that `parse` does not skip (a header) must parse; a title line
  must not hold a character MediaWiki forbids in titles ('<', '{', '[', '|', ...: an XML dump
  or JSON given as a title list). Later bad lines are counted and skipped by the pipeline.

  Raises:
    ValueError: naming the file, the line number and why (the file is empty, or its first
      line is not of its kind).
  """
  lines = _head_lines(path)
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      parsed = parse(line)
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f"{path}: line {number} is not a {kind} line ({type(e).__name__}: "
                       f"{e}): {line[:80]!r}") from e
    if parsed is None:
      continue
    if parse is title_lists_lib.parse_title_line and namespaces.has_illegal_title_chars(line):
      raise ValueError(f"{path}: line {number} is not a {kind} line (it holds a character "
                       f"MediaWiki forbids in titles): {line[:80]!r}")
    return
  what = "only blank or header lines" if lines else "no line (empty file)"
  raise ValueError(f"{path}: holds {what}; expected {kind} lines")


# Threads that read the dumps' heads in check_inputs.
CHECK_THREADS = 8


def check_dump(path: str, head_of: Optional[Callable[[str, Callable[[bytes], Any]],
                                                      Optional[bytes]]] = None
               ) -> Tuple[str, Optional[xml_dump.SiteInfo]]:
  """Checks one --input file: an HTML dump or a MediaWiki XML export, told by its content.

  A file that is not gzip has its head (plain or bz2) read once (xml_dump.read_dump_head) for
  the format (html_dump.sniff_head; sniff_format's own read where the head ends in a
  decompression error) and the XML check (xml_dump.check_dump_head): what sniff_format and
  check_dump_start, each reading it, decide (issue 17: a bz2 head is a first block to
  decompress, 15-30 ms; the 7 English dumps' check_inputs 0.12 -> 0.10 s); an HTML dump's
  own check reads its first record again.

  With `head_of` (dumps.read_ahead.head), the head of a bz2 dump being decompressed ahead is
  read from its decompressed bytes (waiting until they hold the head, xml_dump.
  dump_head_complete), not decompressed again from the file: the same head, checked the same
  way (the same outcome on every real dump and bad file of tests/.../test_extraction_html.py;
  `head` waits for a first chunk of 1 MB, as the file's first read, so that a fault in the
  first bz2 block still fails the check); a file it gives nothing for is read as above.

  Returns:
    (html_dump.FORMAT_HTML, None) or (html_dump.FORMAT_XML, its SiteInfo): the <siteinfo>
    header parsed from the head the check read, so that read_site_infos need not decompress
    that head again (each read of a bz2 head decompresses its first block, about 900 KB;
    issue 17).

  Raises:
    xml_dump.DumpError: the file is neither (named, with what it holds instead and what
      both formats are); an HTML dump's first record does not parse (file and line named).
  """
  with FileSystems.open(path, compression_type="uncompressed") as f:
    gzipped = f.read(2) == b"\x1f\x8b"
    f.seek(0)
    if gzipped:  # an HTML dump, or what the XML check reports as gzip (its reader opens none)
      input_format = html_dump.sniff_format(f)
      head = failure = None
    else:
      # One decompression of the head (plain or bz2) for both the format and the XML check:
      # each read of a bz2 head decompresses its first block (issue 17: 15-30 ms a dump).
      def stop(h):
        return html_dump.sniff_final(h) and html_dump.sniff_head(h) == html_dump.FORMAT_HTML

      ahead = (head_of(path, functools.partial(xml_dump.dump_head_complete, stop=stop))
               if head_of is not None else None)
      if ahead is not None and ahead[:3] == b"BZh":
        ahead = None  # bz2 inside bz2: read_dump_head would decompress it again; the file
      try:
        head, failure = xml_dump.read_dump_head(f if ahead is None else io.BytesIO(ahead),
                                                path, stop=stop)
      except xml_dump.DumpError as e:  # unreadable
        raise _neither_format(e) from e
      if failure is None:
        input_format = html_dump.sniff_head(head)
      else:  # a fault in the head: sniff_format's own read decides (its bytes before it)
        f.seek(0)
        input_format = html_dump.sniff_format(f)
  if input_format == html_dump.FORMAT_HTML:
    with FileSystems.open(path, compression_type="uncompressed") as f:
      html_dump.check_dump_start(f, source_name=path)
    return input_format, None
  try:
    if head is None:
      with FileSystems.open(path, compression_type="uncompressed") as f:
        head = xml_dump.check_dump_start(f, source_name=path)
    else:
      head = xml_dump.check_dump_head(head, failure, path)
  except xml_dump.DumpError as e:
    raise _neither_format(e) from e
  return input_format, xml_dump.parse_siteinfo(head, path)


def _neither_format(error: xml_dump.DumpError) -> xml_dump.DumpError:
  """The XML check's error, naming the HTML dump format as the other one expected."""
  return xml_dump.DumpError(f"{error}; or {html_dump.EXPECTED}")


def check_inputs(input_patterns: Sequence[str], descriptions: Optional[str] = None,
                 title_lists: Sequence[str] = (), redirect_lists: Sequence[str] = (),
                 multistream_index: Optional[str] = None,
                 heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
                 head_of=None) -> Dict[str, List[str]]:
  """Checks every input of an extraction before anything is written (issue 14, items 1, 2).

  Every pattern must match a file; every dump must be, by its content
  (html_dump.sniff_format), an HTML dump whose first record parses
  (html_dump.check_dump_start: the message names the file and line) or a MediaWiki XML export
  with pages (xml_dump.check_dump_start reads its first bytes: not empty, not raw wikitext);
  the descriptions, title and redirect lists must hold lines of their kind (check_line_file);
  multistream index files must pair with the dumps; heldout_fraction must lie in [0, 1].
  `head_of`: check_dump's (dumps.read_ahead.head: heads of dumps decompressed ahead).

  Returns:
    {'dumps': matched dump paths, 'list_files': matched title and redirect list paths}, each
    sorted, and 'site_infos': {dump path: its SiteInfo, None for an HTML dump}, parsed from the
    heads the checks read (for build_pipeline).

  Raises:
    FileNotFoundError: a pattern matches no file (the message names the flag and pattern).
    ValueError: a file is not of its kind (named, with what it holds instead), an index
      belongs to no dump, or heldout_fraction is outside [0, 1].
  """
  if not 0.0 <= heldout_fraction <= 1.0:
    raise ValueError(f"heldout_fraction must be in [0, 1], got {heldout_fraction}")
  dumps = _expand_patterns(input_patterns, "--input dump")
  # The dumps' heads are read in threads: a bz2 head is a whole first block to decompress
  # (about 900 KB, 27 ms), which runs without the GIL, and a remote file's opening waits.
  # The first dump in order that fails raises, as it would one at a time.
  with concurrent.futures.ThreadPoolExecutor(
      max_workers=max(1, min(len(dumps), CHECK_THREADS))) as pool:
    site_infos = dict(zip(dumps, (info for _, info in pool.map(
        functools.partial(check_dump, head_of=head_of), dumps))))
  if descriptions:
    for path in _expand_patterns([descriptions], "--descriptions"):
      check_line_file(path, "description (JSON object with a \"title\")",
                      descriptions_lib.parse_description_line)
  titles_files = _expand_patterns(title_lists, "--titles list") if title_lists else []
  for path in titles_files:
    check_line_file(path, "title list (one title)", title_lists_lib.parse_title_line)
  redirect_files = (_expand_patterns(redirect_lists, "--redirects_tsv list")
                    if redirect_lists else [])
  for path in redirect_files:
    check_line_file(path, "redirect list ('redirect<TAB>target')",
                    title_lists_lib.parse_redirect_line)
  if multistream_index:
    multistream.pair_multistream_indexes(
        dumps, _expand_patterns([multistream_index], "--multistream_index"))
  return {"dumps": dumps, "list_files": sorted(set(titles_files) | set(redirect_files)),
          "site_infos": site_infos}


def check_results(stats: Dict[str, int], input_files: Sequence[str],
                  descriptions: Optional[str] = None, title_lists: Sequence[str] = (),
                  redirect_lists: Sequence[str] = ()) -> None:
  """Refuses a finished pipeline whose outputs hold nothing useful, before they are published.

  Raises:
    ValueError: no page was read from the dumps, the KB holds no entity, or a descriptions
      file, title list or redirect list given gave no line (their files named, with the
      counts of what was read and dropped).
  """
  def counts(*names):
    return ", ".join(f"{name} {stats.get(name, 0)}" for name in names)

  if not stats.get("pages_read", 0):
    raise ValueError(f"no page could be read from {', '.join(input_files)} "
                     f"({counts('pages_read', 'pages_unreadable')}); nothing was written")
  if not stats.get("entities", 0):
    read = counts("pages_read", "articles", "redirects", "pages_other_namespace", "pages_failed")
    raise ValueError(f"the extraction of {', '.join(input_files)} holds no entity ({read}); "
                     "nothing was written")
  checks = ((descriptions and [descriptions], "descriptions_read", "descriptions_invalid"),
            (title_lists, "titles_listed_read", "titles_listed_invalid"),
            (redirect_lists, "title_list_redirects_read", "title_list_redirects_invalid"))
  for patterns, read, invalid in checks:
    if patterns and not stats.get(read, 0):
      raise ValueError(f"no line of {', '.join(patterns)} could be read ({counts(read, invalid)})"
                       "; nothing was written")


def check_flow(flow: Dict[str, int], stats: Dict[str, int],
               pipeline_options: Optional[PipelineOptions] = None) -> None:
  """Refuses a finished pipeline whose runner lost or duplicated values, before its outputs
  are published: every shuffle of the KB merge, the page dedupe and the shard writers must
  hand on as many values as went in, every step of the merge that reads one of its inputs
  must read all that the input's producer counted (pages, redirects, the mentions kept,
  listed titles), and
  every TFRecord output must hold the records the pipeline counted (the MANIFEST's counts)
  (beam_io.flow_losses over the beam_io.FLOW_NAMESPACE counters).

  Raises:
    RuntimeError: naming each shuffle and output that does not add up, and the runner.
  """
  expected = {schema.ENTITIES_PREFIX: stats.get("entities", 0),
              schema.TRAIN_MENTIONS_PREFIX: stats.get("mentions_train", 0),
              schema.HELDOUT_MENTIONS_PREFIX: stats.get("mentions_heldout", 0)}
  # What the KB merge's routing steps must have read of each input (kb_merge
  # MergeKnowledgeBase's route(): 'INPUT@STEP' counters): what its producer counted.
  made = {"articles": stats.get("articles", 0),
          "disambiguations": stats.get("pages_disambiguation", 0),
          "redirects": stats.get("redirects", 0),
          "mention_packs": stats.get("links_kept", 0),
          "title_packs": stats.get("titles_listed_read", 0),
          "title_redirect_packs": stats.get("title_list_redirects_read", 0)}
  losses = beam_io.flow_losses(flow, expected, made)
  if not losses:
    return
  runner = ("the default runner" if pipeline_options is None
            else describe_runner(pipeline_options))
  raise RuntimeError(
      f"the pipeline finished but its values do not add up ({runner}): "
      + "; ".join(losses) + ". Nothing was published. Beam's local runner lost values this "
      "way with --direct_running_mode=multi_processing on the full title and redirect lists "
      "(issue 17); locally, rerun with its default in-memory mode (one worker)")


def _is_output_file(name: str) -> bool:
  if name in (schema.ALIAS_COUNTS_FILE, schema.REDIRECTS_FILE, schema.STATS_FILE,
              schema.MANIFEST_FILE):
    return True
  return any(name.startswith(prefix + "-") and name.endswith(".tfrecord")
             for prefix in output_prefixes())


def _list_dir(directory: str) -> List[str]:
  results = FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list
  return sorted(m.path for m in results)


def _is_empty_dir(directory: str) -> bool:
  """No file or directory in `directory`, hidden ones (another run's .staging-*) included (a
  local glob skips them; an object store's does not)."""
  if "://" not in directory:
    return not os.listdir(directory)
  return not FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list


def _write_json(path: str, value: Any) -> None:
  with FileSystems.create(path) as f:
    f.write((json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _boot_id() -> Optional[str]:
  try:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
      return f.read().strip()
  except OSError:
    return None


def _process_start_ticks(pid: int) -> Optional[int]:
  """Start time of process `pid` in clock ticks since boot (Linux /proc), None if unknown."""
  try:
    with open(f"/proc/{pid}/stat", "rb") as f:
      stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])
  except (OSError, ValueError, IndexError):
    return None


def staging_owner() -> Dict[str, Any]:
  """This process as the owner of a staging directory: host, pid, start ticks, boot id, time."""
  return {"host": socket.gethostname(), "pid": os.getpid(),
          "start_ticks": _process_start_ticks(os.getpid()), "boot_id": _boot_id(),
          "started": datetime.datetime.now(datetime.timezone.utc).timestamp()}


def owner_alive(owner: Dict[str, Any]) -> Optional[bool]:
  """Whether the process that wrote a staging owner record still runs.

  Returns:
    False when it ran on this host and is gone (no such pid, the machine rebooted since, or
    the pid now belongs to a process started later); True when it still runs; None when it
    cannot be told (another host).
  """
  if owner.get("host") != socket.gethostname():
    return None
  boot_id = _boot_id()
  if owner.get("boot_id") and boot_id and owner["boot_id"] != boot_id:
    return False
  pid = int(owner.get("pid", -1))
  if pid <= 0:
    return None
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # alive, another user's
    pass
  start = _process_start_ticks(pid)
  if owner.get("start_ticks") is not None and start is not None and start != owner["start_ticks"]:
    return False  # the pid was reused
  return True


def write_staging_owner(staging: str) -> None:
  """Writes this process's owner record (staging_owner) into a staging directory."""
  _write_json(FileSystems.join(staging, STAGING_OWNER_FILE), staging_owner())


def _staging_dirs(output_dir: str, prefix: str = _STAGING_PREFIX) -> Dict[str, float]:
  """The staging directories in `output_dir`: path -> newest modification time (seconds).

  Beam's FileSystems.match lists files only and its '*' never crosses a '/', so a staging
  directory is found by walking a local `output_dir` (empty ones included), and on other file
  systems by matching the files under '.staging-*/'.
  """
  found: Dict[str, float] = {}
  if "://" not in output_dir:
    if not os.path.isdir(output_dir):
      return found
    for entry in os.scandir(output_dir):
      if entry.name.startswith(prefix) and entry.is_dir(follow_symlinks=False):
        newest = entry.stat(follow_symlinks=False).st_mtime
        for root, _, names in os.walk(entry.path):
          for name in names:
            try:
              newest = max(newest, os.path.getmtime(os.path.join(root, name)))
            except OSError:
              pass
        found[entry.path] = newest
    return found
  pattern = FileSystems.join(output_dir, prefix + "*/**")
  base = output_dir.rstrip("/") + "/"
  for metadata in FileSystems.match([pattern])[0].metadata_list:
    name = metadata.path[len(base):].split("/", 1)[0]
    path = base + name
    found[path] = max(found.get(path, 0.0), metadata.last_updated_in_seconds or 0.0)
  return found


def remove_stale_staging(output_dir: str, now: Optional[float] = None,
                         prefix: str = _STAGING_PREFIX) -> List[str]:
  """Removes the staging directories of extractions that died (killed, crashed machine).

  A staging directory is stale when its owner record names this host and a process that is
  gone (owner_alive is False), or, when that cannot be told (another host, or no record: a run
  of an older version, or one killed before writing it), when its owner started, or else its
  newest file was written, more than STALE_STAGING_AGE_S ago. A live run's staging directory
  is kept. Each removal and each kept directory is logged.

  Args:
    output_dir: an extraction's output directory (any file system), or the directory that
      holds the staging directories of another job (mining: the output's parent).
    now: the current time (seconds since the epoch), for tests.
    prefix: the staging directories' name prefix ('.staging-'; mining: '.staging-NAME-').

  Returns:
    The removed staging directories.
  """
  now = datetime.datetime.now(datetime.timezone.utc).timestamp() if now is None else now
  removed = []
  for path, newest in sorted(_staging_dirs(output_dir, prefix).items()):
    owner = None
    try:
      with FileSystems.open(FileSystems.join(path, STAGING_OWNER_FILE),
                            compression_type="uncompressed") as f:
        owner = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, IOError):  # no record (BeamIOError is an IOError)
      pass
    alive = owner_alive(owner) if isinstance(owner, dict) else None
    age = now - (float(owner.get("started", newest)) if isinstance(owner, dict) else newest)
    if alive is False or (alive is None and age > STALE_STAGING_AGE_S):
      why = "its run is gone" if alive is False else f"{age / 3600:.0f} h old"
      logging.info("Removing the staging directory %s of an earlier extraction (%s).", path, why)
      FileSystems.delete([path])
      removed.append(path)
    else:
      logging.warning("Keeping the staging directory %s: %s.", path,
                      "its run is still running" if alive else
                      f"it may belong to a running extraction ({age / 3600:.1f} h old)")
  return removed


def describe_runner(pipeline_options: PipelineOptions) -> str:
  """'runner R, --direct_running_mode=M --direct_num_workers=N', for error messages."""
  direct = pipeline_options.view_as(DirectOptions)
  return (f"runner {pipeline_options.view_as(StandardOptions).runner or 'default'}, "
          f"--direct_running_mode={direct.direct_running_mode} "
          f"--direct_num_workers={direct.direct_num_workers}")


def runs_in_memory(pipeline_options: PipelineOptions) -> bool:
  """True for Beam's local runner in memory with one worker: every step in this process."""
  runner = pipeline_options.view_as(StandardOptions).runner
  return (runner in (None, beam_io.LOCAL_RUNNER, "DirectRunner")
          and beam_io.in_memory_one_worker(pipeline_options))


# A dump is decompressed ahead (read_ahead_paths) when it has at most this many compressed
# bytes, and until the chosen ones have this many together: small dumps, whose bytes
# (about 5 times as many decompressed) read_ahead holds whole.
READ_AHEAD_FILE_BYTES = 16 << 20
READ_AHEAD_TOTAL_BYTES = 48 << 20


def read_ahead_paths(site_infos: Dict[str, Optional[xml_dump.SiteInfo]],
                     multistream_index: Optional[str], detect_multistream_index: bool,
                     pipeline_options: PipelineOptions) -> List[str]:
  """The dumps that run() decompresses ahead (dumps.read_ahead), largest first: on the local
  runner in memory (runs_in_memory: ReadPagesFn runs in this process), the local MediaWiki XML
  dumps read whole (no multistream index given or found beside them) of at most
  READ_AHEAD_FILE_BYTES compressed bytes each, taken in the order given until
  READ_AHEAD_TOTAL_BYTES in all. Larger inputs gain nothing measurable from it (their reading
  and parsing dwarf the pipeline's construction) and would hold their bytes twice.

  Largest first (by compressed bytes; ties in the order given): the threads take the files in
  this order, and the largest file's decompression is the longest, so started last it is the
  one the reading step waits for (issue 17: the 7 English dumps' largest, 1.6 MB of their 2.7
  MB, came fourth and the reading step waited 80 ms on it; the extraction took 2.94 s
  against 3.09 s, means of 5 runs side by side)."""
  if multistream_index or not runs_in_memory(pipeline_options):
    return []
  paths, total = [], 0
  for path, info in site_infos.items():
    if info is None:
      continue
    try:
      size = os.path.getsize(path) if os.path.isfile(path) else None
    except OSError:
      size = None  # gone meanwhile: read (and reported) the usual way
    if size is None or size > READ_AHEAD_FILE_BYTES or total + size > READ_AHEAD_TOTAL_BYTES:
      continue
    if detect_multistream_index and find_multistream_index(path) is not None:
      continue
    paths.append((size, path))
    total += size
  return [path for _, path in sorted(paths, key=lambda sp: -sp[0])]


def read_ahead_candidates(input_patterns: Sequence[str], multistream_index: Optional[str],
                          detect_multistream_index: bool,
                          pipeline_options: PipelineOptions) -> List[str]:
  """The dumps that run() starts decompressing ahead before it checks the inputs (their heads
  then come from that decompression: check_dump's `head_of`): read_ahead_paths' files as if
  every file the patterns match were a MediaWiki XML dump (the check tells the HTML dumps,
  which run() then discards: dumps.read_ahead.discard). A pattern that matches nothing is left
  to the check to report."""
  if multistream_index or not runs_in_memory(pipeline_options):
    return []
  try:
    results = FileSystems.match(list(input_patterns))
  except Exception:  # pylint: disable=broad-except
    return []  # the check reports what is wrong with the patterns
  paths = sorted({m.path for r in results for m in r.metadata_list})
  return read_ahead_paths({path: _ANY_SITE for path in paths}, multistream_index,
                          detect_multistream_index, pipeline_options)


# A SiteInfo for read_ahead_candidates' read_ahead_paths (any non-None value: a dump taken
# for XML).
_ANY_SITE = xml_dump.SiteInfo()


def default_parse_processes(pipeline_options: PipelineOptions) -> int:
  """Worker processes for the parse step by default: the cores this process may use
  (os.sched_getaffinity where the system has it, else os.cpu_count) on the local runner in
  memory (runs_in_memory), whose single process would otherwise use one core (Beam's
  multi_processing mode loses values, issue 17); 1 on any other runner or mode, whose workers
  already run one process per core."""
  if not runs_in_memory(pipeline_options):
    return 1
  if hasattr(os, "sched_getaffinity"):
    return max(1, len(os.sched_getaffinity(0)))
  return os.cpu_count() or 1


def default_parse_start_method(pipeline_options: PipelineOptions) -> str:
  """How the parse step's worker processes start: 'fork' in memory (runs_in_memory) on Linux
  (the process's only other thread is then Beam's periodic flusher), else 'spawn' (Beam's
  other modes run gRPC threads, which fork does not survive; macOS's system libraries do not
  survive fork either, which is why Python spawns there by default)."""
  if runs_in_memory(pipeline_options) and sys.platform.startswith("linux"):
    return "fork"
  return "spawn"


# Parse worker processes at most (a typo's thousands of processes are refused, not forked).
MAX_PARSE_PROCESSES = 256


def check_parse_processes(parse_processes: Optional[int],
                          pipeline_options: PipelineOptions) -> None:
  """Refuses a number of parse worker processes that run() cannot use.

  Raises:
    ValueError: `parse_processes` below 1 or above MAX_PARSE_PROCESSES, or above 1 with any
      runner or mode but Beam's local one in memory (runs_in_memory): Beam's local
      multi_threading mode lost values with parse worker processes in 4 of 29 runs on the 7
      English dumps, past the extraction's counts (issue 17), and distributed runners already
      run a worker process per core. None (the default) is always accepted.
  """
  if parse_processes is None:
    return
  if not 1 <= parse_processes <= MAX_PARSE_PROCESSES:
    raise ValueError(f"parse_processes must be in [1, {MAX_PARSE_PROCESSES}], got "
                     f"{parse_processes}")
  if parse_processes > 1 and not runs_in_memory(pipeline_options):
    raise ValueError(
        f"parse_processes={parse_processes} needs Beam's local runner in memory with one "
        f"worker (the default); this run has {describe_runner(pipeline_options)}. Beam's "
        "local multi_threading mode lost values with parse worker processes (issue 17), and "
        "distributed runners run a worker process per core already: leave parse_processes "
        "at 1 there")


def run(input_patterns: Sequence[str], output_dir: str,
        heldout_fraction: float = DEFAULT_HELDOUT_FRACTION, descriptions: Optional[str] = None,
        pipeline_options: Optional[PipelineOptions] = None, num_shards: Optional[int] = None,
        max_page_chars: int = MAX_PAGE_CHARS, multistream_index: Optional[str] = None,
        detect_multistream_index: bool = True,
        range_bytes: int = DEFAULT_RANGE_BYTES, title_lists: Sequence[str] = (),
        redirect_lists: Sequence[str] = (),
        parse_processes: Optional[int] = None) -> Dict[str, Any]:
  """Runs the extraction and publishes its outputs atomically in `output_dir`.

  Every input is checked first (check_inputs), before anything in `output_dir` is touched.
  Files are written to `output_dir/.staging-<id>/`; only after the pipeline succeeded and its
  outputs hold something (check_results) is the previous MANIFEST.json removed, the previous
  outputs replaced by the new files and the new MANIFEST.json written last. So a run that
  fails, at any point before that, leaves a finished extraction in `output_dir` as it was; a
  run killed while it publishes leaves no MANIFEST.json (never a manifest over mixed files).
  Staging directories left by dead runs are removed first (remove_stale_staging); this run's
  own holds an owner record (.owner.json: host, pid) that tells later runs whether it lives.
  A run that made `output_dir` and fails removes it again if it is empty.

  Args:
    input_patterns: file patterns of MediaWiki XML dumps (plain or .bz2) and HTML dumps
      (NDJSON; plain, .gz or .bz2), told apart by content.
    output_dir: output directory (created if missing; previous outputs are replaced).
    heldout_fraction: fraction of source pages whose mentions are held out.
    descriptions: optional JSONL of entity descriptions ({"title", "text"}).
    pipeline_options: Beam options; default DirectRunner, in-memory, one worker.
    num_shards: shards per TFRecord output (None: by record count).
    max_page_chars: longer pages are reported and skipped.
    multistream_index: optional file pattern of multistream index files (see build_pipeline).
    detect_multistream_index: use an index found beside a multistream dump by name.
    range_bytes: compressed bytes per read range of an indexed multistream dump.
    title_lists: file patterns of title lists (see build_pipeline).
    redirect_lists: file patterns of redirect lists (see build_pipeline).
    parse_processes: worker processes that parse pages (ParsePageFn) and build the KB's
      entities (kb_merge.BuildEntitiesFn), and threads that read the dumps (ReadPagesFn;
      above 1 only on the local runner in memory:
      check_parse_processes); None:
      default_parse_processes(pipeline_options).

  Returns:
    The stats dict written to stats.json: counter name -> value.

  Raises:
    FileNotFoundError: an input pattern (a dump, the descriptions file, a list, the
      multistream index) matches no file.
    ValueError: the runner is unknown (before anything is made), an input is not of its
      kind (check_inputs), a multistream index file belongs to no input dump, the finished
      pipeline read nothing useful (check_results), or parse_processes cannot be used
      (check_parse_processes).
    RuntimeError: the pipeline did not finish successfully.
  """
  if pipeline_options is None:
    pipeline_options = beam_io.default_pipeline_options()
  check_parse_processes(parse_processes, pipeline_options)
  runner = pipeline_options.view_as(StandardOptions).runner
  if isinstance(runner, str):
    beam.runners.create_runner(runner)  # an unknown runner: ValueError before any file is made
  if parse_processes is None:
    parse_processes = default_parse_processes(pipeline_options)
  # In memory, the small whole dumps are decompressed in one thread per parse process (as many
  # as cores) from here on, while the inputs are checked (their heads come from it) and the
  # pipeline is built, until it has run (dumps.read_ahead; read_ahead_paths).
  with read_ahead.decompressed_ahead(
      read_ahead_candidates(input_patterns, multistream_index, detect_multistream_index,
                            pipeline_options), threads=max(1, parse_processes)):
    return _run(input_patterns, output_dir, heldout_fraction=heldout_fraction,
                descriptions=descriptions, pipeline_options=pipeline_options,
                num_shards=num_shards, max_page_chars=max_page_chars,
                multistream_index=multistream_index,
                detect_multistream_index=detect_multistream_index, range_bytes=range_bytes,
                title_lists=title_lists, redirect_lists=redirect_lists,
                parse_processes=parse_processes)


def _run(input_patterns, output_dir, *, heldout_fraction, descriptions, pipeline_options,
         num_shards, max_page_chars, multistream_index, detect_multistream_index, range_bytes,
         title_lists, redirect_lists, parse_processes) -> Dict[str, Any]:
  """run(), inside its decompressed_ahead context, with the options and parse processes
  decided."""
  # Every input is checked before anything in output_dir is touched.
  checked = check_inputs(input_patterns, descriptions, title_lists, redirect_lists,
                         multistream_index, heldout_fraction, head_of=read_ahead.head)
  ahead = read_ahead_paths(checked["site_infos"], multistream_index, detect_multistream_index,
                           pipeline_options)
  read_ahead.discard(set(checked["dumps"]) - set(ahead))  # HTML dumps: read as they are
  input_files, list_files = checked["dumps"], checked["list_files"]
  manifest_path = FileSystems.join(output_dir, schema.MANIFEST_FILE)
  direct = pipeline_options.view_as(DirectOptions)
  if direct.direct_running_mode == "multi_processing" and direct.direct_num_workers != 1:
    logging.warning(
        "Beam's local runner with --direct_running_mode=multi_processing lost values in this "
        "pipeline on large inputs (issue 17: 6 of 7 extractions with the full title and "
        "redirect lists); this run checks its counts at the end (check_flow) and publishes "
        "nothing when they do not add up. No in-memory run has lost any.")
  elif direct.direct_running_mode == "multi_threading":
    logging.warning(
        "Beam's local runner with --direct_running_mode=multi_threading lost values in this "
        "pipeline (issue 17: 4 of 29 runs on 7 small dumps with parse worker processes, 1 "
        "of 51 without), past the counts this run checks. No in-memory run has lost any: "
        "run locally in its default in-memory mode.")
  start_method = default_parse_start_method(pipeline_options)
  logging.info("Parsing pages and building entities in %d process(es)%s.", parse_processes,
               f" ({start_method})" if parse_processes > 1 else "")
  created = not FileSystems.exists(output_dir)
  if created:
    FileSystems.mkdirs(output_dir)
  remove_stale_staging(output_dir)
  staging = FileSystems.join(output_dir, _STAGING_PREFIX + uuid.uuid4().hex[:12])
  FileSystems.mkdirs(staging)
  started = datetime.datetime.now(datetime.timezone.utc)
  try:
    write_staging_owner(staging)
    # Beam's introspection once per object, built and run.
    with beam_io.introspect_once():
      pipeline = beam.Pipeline(options=pipeline_options)
      build_pipeline(pipeline, list(input_patterns), staging,
                     heldout_fraction=heldout_fraction, descriptions=descriptions,
                     num_shards=num_shards, max_page_chars=max_page_chars,
                     multistream_index=multistream_index,
                     detect_multistream_index=detect_multistream_index,
                     range_bytes=range_bytes, title_lists=title_lists,
                     redirect_lists=redirect_lists, site_infos=checked["site_infos"],
                     parse_processes=parse_processes, parse_start_method=start_method)
      result, state = beam_io.run_pipeline(pipeline)
    if state != beam.runners.runner.PipelineState.DONE:
      raise RuntimeError(f"extraction pipeline ended in state {state}")
    stats = beam_io.counters(result, COUNTER_NAMESPACE)
    check_results(stats, input_files, descriptions, title_lists, redirect_lists)
    if heldout_fraction > 0 and not stats.get("mentions_heldout", 0):
      # A small dump at the default fraction holds no page out: say so, not only in a count.
      logging.warning(
          "No mention was held out: --heldout_fraction=%g of %d source pages held none out "
          "(mentions_heldout = 0, its files are empty); on a small dump pass a larger "
          "fraction (e.g. 0.1) to have held-out mentions for evaluation.",
          heldout_fraction, stats.get("articles", 0))
    check_flow(beam_io.counters(result, beam_io.FLOW_NAMESPACE), stats, pipeline_options)
    _write_json(FileSystems.join(staging, schema.STATS_FILE), stats)
    staged = [p for p in _list_dir(staging) if os.path.basename(p) != STAGING_OWNER_FILE]
    # Publishing: the old manifest goes first, so that from here on a killed run leaves none.
    if FileSystems.exists(manifest_path):
      FileSystems.delete([manifest_path])
    # Replace the previous outputs, then move the new in.
    old = [p for p in _list_dir(output_dir) if _is_output_file(os.path.basename(p))]
    if old:
      FileSystems.delete(old)
    names = [os.path.basename(p) for p in staged]
    FileSystems.rename(staged, [FileSystems.join(output_dir, n) for n in names])
    record_files = {prefix: sorted(n for n in names if n.startswith(prefix + "-"))
                    for prefix in output_prefixes()}
    manifest = {
        "files": sorted(names),
        "record_files": record_files,
        "counts": {
            schema.ENTITIES_PREFIX: stats.get("entities", 0),
            schema.TRAIN_MENTIONS_PREFIX: stats.get("mentions_train", 0),
            schema.HELDOUT_MENTIONS_PREFIX: stats.get("mentions_heldout", 0),
            "redirects": stats.get("redirects", 0),
            "articles": stats.get("articles", 0),
        },
        "heldout_fraction": heldout_fraction,
        "inputs": input_files,
        "input_patterns": list(input_patterns),
        "descriptions": descriptions,
        "title_lists": list(title_lists),
        "redirect_lists": list(redirect_lists),
        "list_files": list_files,
        "multistream_index": multistream_index,
        "started": started.isoformat(),
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "pages_skipped": stats.get("pages_unreadable", 0) + stats.get("pages_failed", 0),
    }
    tmp = FileSystems.join(staging, schema.MANIFEST_FILE)
    _write_json(tmp, manifest)
    FileSystems.rename([tmp], [manifest_path])
  finally:
    if FileSystems.exists(staging):
      FileSystems.delete([staging])
    # A run that made output_dir and failed leaves no empty directory behind (a published
    # run's holds its files).
    if created and FileSystems.exists(output_dir) and _is_empty_dir(output_dir):
      FileSystems.delete([output_dir])
  return stats
