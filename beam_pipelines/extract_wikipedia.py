"""Beam pipeline: MediaWiki dumps -> entities, train/held-out mentions, alias counts.

Gillick et al. (2019), section 5: training mentions are Wikipedia anchor links (the anchor text
in the source page, the link target after redirect resolution as the gold entity), split 99.9% /
0.1% by a stable fingerprint of the source page; the knowledge base holds every article and every
linked title; the alias table (AT-Prior, P(e|m)) counts anchors of the training split.

Usage (DirectRunner by default; any runner by standard Beam pipeline flags):

  python -m beam_pipelines.extract_wikipedia --input=GLOB[,GLOB...] --output_dir=DIR \
      [--descriptions=JSONL] [--heldout_fraction=0.001] [--num_shards=N] \
      [--multistream_index=GLOB] [--multistream_range_mb=32] [beam flags...]

Multistream dumps (*-pages-articles-multistream.xml.bz2) with their index (--multistream_index,
or *-multistream-index.txt.bz2 found beside the dump) are split at bz2 stream offsets into byte
ranges that many workers read in parallel; other files are read whole by one worker each. The
outputs are the same either way.

Outputs in DIR (names from dense_entity/schema.py; TFRecord of tf.train.Example, uncompressed,
'PREFIX-SSSSS-of-NNNNN.tfrecord'): entities, mentions_train, mentions_heldout, alias_counts.tsv,
redirects.tsv, stats.json and, written last, MANIFEST.json. Files are written to a staging
directory inside DIR and moved into place only after the pipeline succeeded, so a failed run
leaves no MANIFEST.json.
"""

import collections
import dataclasses
import datetime
import hashlib
import json
import logging
import os
import sys
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
import tensorflow as tf

from beam_pipelines import wikitext
from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema
from dense_entity.kb import titles

COUNTER_NAMESPACE = "extract_wikipedia"
DEFAULT_HELDOUT_FRACTION = 0.001
# Shards are sized by record count when --num_shards is not given (deterministic either way).
RECORDS_PER_SHARD = 200_000
# Pages larger than this (bytes of wikitext) are reported and skipped.
MAX_PAGE_CHARS = 20_000_000
# Multistream dumps with an index are read in byte ranges of about this many compressed bytes
# (whole bz2 streams of ~100 pages each), one range per work item.
DEFAULT_RANGE_BYTES = 32 << 20

SOURCE_PAGE_KIND = "page"
SOURCE_LINK_TARGET = "link_target"
SOURCE_DESCRIPTION = "description"

_STAGING_PREFIX = ".staging-"


def _count(name: str, n: int = 1) -> None:
  """Increments the Beam counter `name` (also reported in stats.json)."""
  if n:
    Metrics.counter(COUNTER_NAMESPACE, name).inc(n)


def fingerprint_fraction(key: str) -> float:
  """A stable number in [0, 1) for `key` (sha256; never Python's hash())."""
  digest = hashlib.sha256(key.encode("utf-8")).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64


def is_heldout(source_page: str, heldout_fraction: float) -> bool:
  """True when mentions from `source_page` belong to the held-out split."""
  return fingerprint_fraction(source_page) < heldout_fraction


# ---------------------------------------------------------------------------------------------
# Records passed between steps (plain tuples encode fast with Beam's default coder)
# ---------------------------------------------------------------------------------------------

# Mention: (mention_id, source_page, span, left, right, sentence)
MentionTuple = Tuple[str, str, str, str, str, str]
# Article: (page_id, first_paragraph, categories)
ArticleTuple = Tuple[int, str, Tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class Entity:
  title: str
  text: str
  categories: Tuple[str, ...]
  aliases: Tuple[str, ...]
  sources: Tuple[str, ...]


def _bytes_feature(values: Iterable[str]) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")
                                                               for v in values]))


def entity_example(entity: Entity) -> tf.train.Example:
  """The entity record (schema.ENTITY_* features)."""
  return tf.train.Example(features=tf.train.Features(feature={
      schema.ENTITY_TITLE: _bytes_feature([entity.title]),
      schema.ENTITY_TEXT: _bytes_feature([entity.text]),
      schema.ENTITY_CATEGORIES: _bytes_feature(entity.categories),
      schema.ENTITY_ALIASES: _bytes_feature(entity.aliases),
      schema.ENTITY_SOURCE: _bytes_feature(entity.sources),
  }))


def mention_example(mention: MentionTuple, entity: Entity) -> tf.train.Example:
  """The mention record: the four mention features, the gold entity's features, ids."""
  mention_id, source_page, span, left, right, sentence = mention
  return tf.train.Example(features=tf.train.Features(feature={
      schema.MENTION_SPAN: _bytes_feature([span]),
      schema.MENTION_LEFT: _bytes_feature([left]),
      schema.MENTION_RIGHT: _bytes_feature([right]),
      schema.MENTION_SENTENCE: _bytes_feature([sentence]),
      schema.ENTITY_TITLE: _bytes_feature([entity.title]),
      schema.ENTITY_TEXT: _bytes_feature([entity.text]),
      schema.ENTITY_CATEGORIES: _bytes_feature(entity.categories),
      schema.SOURCE_PAGE: _bytes_feature([source_page]),
      schema.MENTION_ID: _bytes_feature([mention_id]),
  }))


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
  for index_name in wikitext.multistream_index_names(name):
    candidate = f"{directory}/{index_name}" if directory else index_name
    if FileSystems.exists(candidate):
      return candidate
  return None


def pair_multistream_indexes(dump_paths: Sequence[str],
                             index_paths: Sequence[str]) -> Dict[str, str]:
  """Pairs dump files with the multistream index files given by --multistream_index.

  An index belongs to the dump whose Wikimedia index name it has (find_multistream_index);
  a single index given with a single dump belongs to it whatever the names.

  Args:
    dump_paths: matched dump file paths.
    index_paths: matched index file paths.

  Returns:
    {dump path: index path}.

  Raises:
    ValueError: naming the index files that belong to no dump (no silent full-file reads).
  """
  by_name = {}
  for index_path in index_paths:
    by_name.setdefault(os.path.basename(index_path), index_path)
  pairs = {}
  for dump_path in dump_paths:
    for name in wikitext.multistream_index_names(os.path.basename(dump_path)):
      if name in by_name:
        pairs[dump_path] = by_name[name]
        break
  unpaired = sorted(set(index_paths) - set(pairs.values()))
  if unpaired and len(dump_paths) == 1 and len(index_paths) == 1:
    return {dump_paths[0]: index_paths[0]}
  if unpaired:
    raise ValueError(f"multistream index file(s) {unpaired} belong to no input dump; expected "
                     "names like X-multistream-index.txt.bz2 beside X-multistream.xml.bz2")
  return pairs


class PlanReadsFn(beam.DoFn):
  """Matched dump file -> ReadItems: byte ranges of whole bz2 streams, or the whole file.

  A multistream dump with an index (given in `index_paths`, or, when `detect_index`, found
  beside it by name) is split into ranges of about `range_bytes` compressed bytes at stream
  offsets of its index (wikitext.plan_stream_ranges), so many workers read one file. Any
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
        offsets = wikitext.read_multistream_index(f, source_name=index)
      ranges = wikitext.plan_stream_ranges(offsets, metadata.size_in_bytes, self._range_bytes)
    except (wikitext.DumpError, ValueError, OSError, EOFError) as e:
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


class ReadPagesFn(beam.DoFn):
  """ReadItem (or a plain file path) -> wikitext.Page for every page in it.

  Reads a MediaWiki dump (plain or bz2) whole, or, for a (path, start, end) item, only the bz2
  streams in compressed bytes [start, end) of a multistream dump (one seek; memory bounded by
  a page, not the file or range). A page, range or file tail that cannot be read is logged with
  file, offset and page id, counted ('pages_unreadable') and skipped; the other pages still
  come through. 'files_read' counts whole files and first ranges (start 0).
  """

  def process(self, item) -> Iterator[wikitext.Page]:
    if isinstance(item, str):
      path, start, end = item, None, None
    else:
      path, start, end = item
    byte_range = None if start is None else (start, end)
    errors = []

    def on_error(error: wikitext.DumpError) -> None:
      logging.error("Skipped unreadable input: %s", error)
      errors.append(error)
      _count("pages_unreadable")

    with FileSystems.open(path, compression_type="uncompressed") as f:
      for page in wikitext.iter_pages(f, on_error=on_error, source_name=path,
                                      byte_range=byte_range):
        _count("pages_read")
        yield page
    if byte_range is None or start == 0:
      _count("files_read")
    if byte_range is not None:
      _count("multistream_ranges_read")
    if errors:
      _count("files_with_errors" if byte_range is None else "multistream_ranges_with_errors")


def page_key(page: wikitext.Page) -> Tuple[int, str]:
  """Dedupe key of a page: (namespace, normalized title)."""
  return page.ns, titles.normalize_title(page.title)


def pick_page(key_pages: Tuple[Tuple[int, str], Iterable[wikitext.Page]]) -> wikitext.Page:
  """One page per title when several inputs hold it: prefer an article over a redirect, then
  the longer text, then the larger page id (deterministic)."""
  _, pages = key_pages
  pages = list(pages)
  if len(pages) == 1:
    return pages[0]
  _count("pages_duplicate_title", len(pages) - 1)
  return max(pages, key=lambda p: (wikitext.redirect_target(p) is None, len(p.text), p.page_id,
                                   p.text, p.title))


def _sentence_spans_of_mention_lines(text: str,
                                     links: Sequence[wikitext.Link]) -> List[Tuple[int, int]]:
  """mention_features_lib.sentence_spans(text), restricted to the lines holding a link.

  Sentences never cross a line, so the spans of the other lines are never looked up by
  mention_features; skipping them saves most of the sentence splitting on long pages.

  Returns:
    [(start, end)) character offsets into `text`, in text order.
  """
  spans: List[Tuple[int, int]] = []
  done_until = -1  # end of the last line split (links come in text order)
  for link in links:
    if link.start < done_until:
      continue
    line_start = text.rfind("\n", 0, link.start) + 1
    line_end = text.find("\n", link.start)
    if line_end < 0:
      line_end = len(text)
    for start, end in mention_features_lib.sentence_spans(text[line_start:line_end]):
      spans.append((line_start + start, line_start + end))
    done_until = line_end
  return spans


class ParsePageFn(beam.DoFn):
  """Page -> tagged outputs: 'redirect' (title, target), 'article' (title, ArticleTuple) and
  'mention' (raw target, MentionTuple), the main output.

  Only namespace-0 pages (from the <ns> tag) are used. Mention features come from
  dense_entity.mention_features over the article's plain text (sentence spans computed once).
  """

  REDIRECT = "redirect"
  ARTICLE = "article"

  def __init__(self, max_page_chars: int = MAX_PAGE_CHARS):
    super().__init__()
    self._max_page_chars = max_page_chars

  def process(self, page: wikitext.Page):
    if page.ns != 0:
      _count("pages_other_namespace")
      return
    title = titles.normalize_title(page.title)
    if not title:
      _count("pages_empty_title")
      return
    try:
      target = wikitext.redirect_target(page)
    except Exception as e:  # pylint: disable=broad-except
      self._report(page, e)
      return
    if target is not None:
      if target and target != title:
        _count("redirects")
        yield beam.pvalue.TaggedOutput(self.REDIRECT, (title, target))
      else:
        _count("redirects_invalid")
      return
    if len(page.text) > self._max_page_chars:
      self._report(page, f"page of {len(page.text)} characters exceeds {self._max_page_chars}")
      return
    try:
      parsed = wikitext.parse_article(page.text, page.title)
      sentences = _sentence_spans_of_mention_lines(parsed.text, parsed.links)
      mentions = []
      for index, link in enumerate(parsed.links):
        features = mention_features_lib.mention_features(parsed.text, link.start, link.end,
                                                         sentences=sentences)
        mentions.append((link.target, (
            f"{page.page_id}:{index}", title, features[schema.MENTION_SPAN],
            features[schema.MENTION_LEFT], features[schema.MENTION_RIGHT],
            features[schema.MENTION_SENTENCE])))
    except Exception as e:  # pylint: disable=broad-except
      self._report(page, e)
      return
    _count("articles")
    for reason, n in sorted(parsed.dropped.items()):
      _count(f"links_dropped_{reason}", n)
    _count("links_kept", len(mentions))
    by_source = collections.Counter(link.source for link in parsed.links)
    for source, n in sorted(by_source.items()):
      _count(f"links_kept_{source}", n)  # where the mentions were written (prose, table, ...)
    yield beam.pvalue.TaggedOutput(
        self.ARTICLE, (title, (page.page_id, parsed.first_paragraph, tuple(parsed.categories))))
    yield from mentions

  @staticmethod
  def _report(page: wikitext.Page, reason) -> None:
    logging.error("Skipped page: file %s, page id %d (%r): %s", page.source or "?",
                  page.page_id, page.title, reason)
    _count("pages_failed")


def resolve_all_redirects(redirects: List[Tuple[str, str]]) -> Iterator[Tuple[str, Optional[str]]]:
  """(title, one-hop target) pairs -> (title, final target or None for a loop/too long chain).

  Chains are followed with dense_entity.titles.resolve_redirect. A title listed twice keeps
  its smallest target (deterministic).
  """
  mapping: Dict[str, str] = {}
  for title, target in sorted(redirects):
    mapping.setdefault(title, target)
  for title in sorted(mapping):
    final = titles.resolve_redirect(title, mapping)
    if final is None:
      _count("redirects_loop")
    elif final != mapping[title]:
      _count("redirects_chained")
    yield title, final


def resolve_through_redirects(element, kind: str):
  """CoGroupByKey result {'value': [...], 'redirect': [final]} -> (gold title, value).

  Drops values whose key is a looping redirect ('<kind>_dropped_redirect_loop') or resolves
  outside the main namespace ('<kind>_dropped_other_namespace').
  """
  key, grouped = element
  values = grouped["value"]
  finals = list(grouped["redirect"])
  if finals:
    final = finals[0]
    if final is None:
      _count(f"{kind}_dropped_redirect_loop", sum(1 for _ in values))
      return
    if final != key:
      _count(f"{kind}_resolved_through_redirect", sum(1 for _ in values))
  else:
    final = key
  if not wikitext.is_main_namespace_title(final):
    _count(f"{kind}_dropped_other_namespace", sum(1 for _ in values))
    return
  for value in values:
    yield final, value


def parse_description(line: str) -> Iterator[Tuple[str, str]]:
  """A JSONL line {"title", "text", ...} -> (normalized title, text); bad lines counted."""
  if not line.strip():
    return
  try:
    record = json.loads(line)
    title = titles.normalize_title(str(record["title"]))
    text = " ".join(str(record.get("text") or "").split())
  except (ValueError, KeyError, TypeError) as e:
    logging.warning("Skipped description line (%s): %.100r", e, line)
    _count("descriptions_invalid")
    return
  if not title:
    _count("descriptions_invalid")
    return
  _count("descriptions_read")
  yield title, text


class BuildEntityFn(beam.DoFn):
  """Joins everything known about one title into its entity record and its mentions.

  Input: (title, {'article': [ArticleTuple], 'description': [text], 'alias': [redirect title],
  'mention': [MentionTuple]}). Main output: Entity (when the title has a page, a link or a
  description); tagged 'mention': (MentionTuple, Entity) for every mention of it.
  """

  MENTION = "mention"

  def process(self, element):
    title, grouped = element
    articles = sorted(grouped["article"], reverse=True)
    descriptions = sorted(grouped["description"], key=lambda t: (-len(t), t))
    mentions = grouped["mention"]
    has_mention = any(True for _ in mentions)
    if not (articles or descriptions or has_mention):
      _count("redirects_to_missing_page", sum(1 for _ in grouped["alias"]))
      return
    sources = []
    text, categories = "", ()
    if articles:
      _, text, categories = articles[0]
      sources.append(SOURCE_PAGE_KIND)
    if has_mention:
      sources.append(SOURCE_LINK_TARGET)
    if descriptions:
      sources.append(SOURCE_DESCRIPTION)
      if not text:
        text = descriptions[0]
        _count("entities_text_from_description")
    entity = Entity(title=title, text=text, categories=tuple(categories),
                    aliases=tuple(sorted(set(grouped["alias"]))), sources=tuple(sources))
    _count("entities")
    for source in sources:
      _count(f"entities_source_{source}")
    if not articles:
      _count("entities_without_page")
    yield entity
    for mention in mentions:
      yield beam.pvalue.TaggedOutput(self.MENTION, (mention, entity))


def format_tsv(rows: List[Tuple[Any, ...]]) -> str:
  return "".join("\t".join(str(v) for v in row) + "\n" for row in sorted(rows))


class WriteTextFile(beam.PTransform):
  """Writes all rows of a PCollection as one sorted TSV file (rows of str/int)."""

  def __init__(self, path: str):
    super().__init__()
    self._path = path

  def expand(self, rows):
    path = self._path

    def write(all_rows):
      with FileSystems.create(path) as f:
        f.write(format_tsv(all_rows).encode("utf-8"))
      return path

    return (rows
            | "Collect" >> beam.combiners.ToList()
            | "Write" >> beam.Map(write))


class WriteShardedTFRecords(beam.PTransform):
  """(sort key, serialized record) -> PREFIX-SSSSS-of-NNNNN.tfrecord files, deterministically.

  A record's shard is a fingerprint of its key; records are sorted by key within a shard; every
  shard file is written, even an empty one. The same input gives byte-identical files whatever
  the runner or bundling (Beam's own sharded writes assign shards at random).
  """

  def __init__(self, path_prefix: str, num_shards: Optional[int] = None,
               records_per_shard: int = RECORDS_PER_SHARD):
    super().__init__()
    self._path_prefix = path_prefix
    self._num_shards = num_shards
    self._records_per_shard = records_per_shard

  def expand(self, records):
    path_prefix = self._path_prefix
    if self._num_shards:
      num_shards = (records.pipeline | "NumShards" >> beam.Create([self._num_shards]))
    else:
      per_shard = self._records_per_shard
      num_shards = (records
                    | "Count" >> beam.combiners.Count.Globally()
                    | "NumShards" >> beam.Map(lambda n: max(1, -(-n // per_shard))))
    num_shards_side = beam.pvalue.AsSingleton(num_shards)

    def assign(record, n):
      key, _ = record
      shard = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % n
      return shard, record

    def write(element, n):
      shard, grouped = element
      rows = sorted(grouped["record"])
      path = f"{path_prefix}-{shard:05d}-of-{n:05d}.tfrecord"
      with tf.io.TFRecordWriter(path) as writer:
        for _, value in rows:
          writer.write(value)
      return path, len(rows)

    keyed = records | "AssignShard" >> beam.Map(assign, num_shards_side)
    shard_ids = (num_shards
                 | "ShardIds" >> beam.FlatMap(lambda n: [(i, None) for i in range(n)]))
    return ({"record": keyed, "shard": shard_ids}
            | "GroupByShard" >> beam.CoGroupByKey()
            | "WriteShard" >> beam.Map(write, num_shards_side))


class ExtractWikipedia(beam.PTransform):
  """Dump file paths (or ReadItems) -> entities, mentions (train/held-out), alias counts and
  redirects.

  Returns a dict of PCollections: 'entities' (Entity), 'mentions_train' and
  'mentions_heldout' ((MentionTuple, Entity)), 'alias_counts' ((alias key, entity, count),
  train split only), 'redirects' ((title, final target)).
  """

  def __init__(self, heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
               max_page_chars: int = MAX_PAGE_CHARS):
    super().__init__()
    if not 0.0 <= heldout_fraction <= 1.0:
      raise ValueError(f"heldout_fraction must be in [0, 1], got {heldout_fraction}")
    self._heldout_fraction = heldout_fraction
    self._max_page_chars = max_page_chars

  def expand(self, inputs):
    paths, descriptions = inputs
    pages = (paths
             # One element per file or per multistream range: workers read them in parallel.
             | "SpreadFiles" >> beam.Reshuffle()
             | "ReadPages" >> beam.ParDo(ReadPagesFn())
             # Grouping by title both removes pages repeated across inputs and reshuffles the
             # pages so that parsing parallelizes (it replaces a plain beam.Reshuffle).
             | "KeyByTitle" >> beam.Map(lambda p: (page_key(p), p))
             | "DedupeAndReshufflePages" >> beam.GroupByKey()
             | "PickPage" >> beam.Map(pick_page))
    parsed = pages | "ParsePages" >> beam.ParDo(
        ParsePageFn(self._max_page_chars)).with_outputs(
            ParsePageFn.REDIRECT, ParsePageFn.ARTICLE, main="mention")
    resolved = (parsed[ParsePageFn.REDIRECT]
                | "CollectRedirects" >> beam.combiners.ToList()
                | "ResolveRedirectChains" >> beam.FlatMap(resolve_all_redirects))

    def through_redirects(pcoll, kind):
      return ({"value": pcoll, "redirect": resolved}
              | f"Group{kind}ByTarget" >> beam.CoGroupByKey()
              | f"Resolve{kind}" >> beam.FlatMap(resolve_through_redirects, kind=kind))

    mentions = through_redirects(parsed["mention"], "mentions")
    descriptions = through_redirects(descriptions, "descriptions")
    aliases = (resolved
               | "AliasPairs" >> beam.FlatMap(
                   lambda kv: [(kv[1], kv[0])] if kv[1] is not None else []))
    joined = ({"article": parsed[ParsePageFn.ARTICLE], "description": descriptions,
               "alias": aliases, "mention": mentions}
              | "GroupByEntity" >> beam.CoGroupByKey()
              | "BuildEntities" >> beam.ParDo(BuildEntityFn()).with_outputs(
                  BuildEntityFn.MENTION, main="entity"))
    heldout_fraction = self._heldout_fraction

    def split(mention_entity, num_partitions):
      del num_partitions
      heldout = is_heldout(mention_entity[0][1], heldout_fraction)
      _count("mentions_heldout" if heldout else "mentions_train")
      return 1 if heldout else 0

    train, heldout = (joined[BuildEntityFn.MENTION]
                      | "SplitTrainHeldout" >> beam.Partition(split, 2))
    alias_counts = (train
                    | "AliasKey" >> beam.Map(
                        lambda me: (titles.alias_key(me[0][2]), me[1].title))
                    | "CountAliases" >> beam.combiners.Count.PerElement()
                    | "AliasRows" >> beam.Map(lambda kv: (kv[0][0], kv[0][1], kv[1])))
    return {
        "entities": joined["entity"],
        "mentions_train": train,
        "mentions_heldout": heldout,
        "alias_counts": alias_counts,
        "redirects": resolved | "ResolvedOnly" >> beam.Filter(lambda kv: kv[1] is not None),
    }


def output_prefixes() -> Tuple[str, ...]:
  return (schema.ENTITIES_PREFIX, schema.TRAIN_MENTIONS_PREFIX, schema.HELDOUT_MENTIONS_PREFIX)


def build_pipeline(pipeline: beam.Pipeline, input_patterns: Sequence[str], output_dir: str,
                   heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
                   descriptions: Optional[str] = None, num_shards: Optional[int] = None,
                   max_page_chars: int = MAX_PAGE_CHARS,
                   multistream_index: Optional[str] = None,
                   detect_multistream_index: bool = True,
                   range_bytes: int = DEFAULT_RANGE_BYTES) -> Dict[str, beam.PCollection]:
  """Adds the extraction to `pipeline`, writing its files into `output_dir` (no manifest).

  `run` passes a staging directory here and moves the files into place afterwards; tests pass
  a TestPipeline and a temporary directory.

  Args:
    pipeline: the Beam pipeline.
    input_patterns: file patterns of MediaWiki XML dumps (.xml or .bz2, any file system).
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

  Returns:
    The ExtractWikipedia PCollections, plus 'written' (path, record count) of every shard.

  Raises:
    FileNotFoundError: `multistream_index` matches no file.
    ValueError: an index file belongs to no input dump.
  """
  index_paths = {}
  if multistream_index:
    index_paths = pair_multistream_indexes(_expand_patterns(list(input_patterns)),
                                           _expand_patterns([multistream_index]))
  paths = (pipeline
           | "InputPatterns" >> beam.Create(list(input_patterns))
           | "MatchFiles" >> fileio.MatchAll()
           | "PlanReads" >> beam.ParDo(PlanReadsFn(index_paths, detect_multistream_index,
                                                   range_bytes)))
  if descriptions:
    description_pairs = (pipeline
                         | "ReadDescriptions" >> beam.io.ReadFromText(descriptions)
                         | "ParseDescriptions" >> beam.FlatMap(parse_description))
  else:
    description_pairs = pipeline | "NoDescriptions" >> beam.Create([])
  outputs = (paths, description_pairs) | "Extract" >> ExtractWikipedia(heldout_fraction,
                                                                         max_page_chars)
  join = os.path.join if "://" not in output_dir else FileSystems.join
  written = []
  written.append(
      outputs["entities"]
      | "SerializeEntities" >> beam.Map(
          lambda e: (e.title, entity_example(e).SerializeToString(deterministic=True)))
      | "WriteEntities" >> WriteShardedTFRecords(join(output_dir, schema.ENTITIES_PREFIX),
                                                 num_shards))
  for name, prefix in (("mentions_train", schema.TRAIN_MENTIONS_PREFIX),
                       ("mentions_heldout", schema.HELDOUT_MENTIONS_PREFIX)):
    written.append(
        outputs[name]
        | f"Serialize_{name}" >> beam.Map(
            lambda me: (me[0][0],
                        mention_example(me[0], me[1]).SerializeToString(deterministic=True)))
        | f"Write_{name}" >> WriteShardedTFRecords(join(output_dir, prefix), num_shards))
  _ = outputs["alias_counts"] | "WriteAliasCounts" >> WriteTextFile(
      join(output_dir, schema.ALIAS_COUNTS_FILE))
  _ = outputs["redirects"] | "WriteRedirects" >> WriteTextFile(
      join(output_dir, schema.REDIRECTS_FILE))
  outputs["written"] = written | "AllShards" >> beam.Flatten()
  return outputs


# ---------------------------------------------------------------------------------------------
# Running: staging, stats, atomic move, manifest
# ---------------------------------------------------------------------------------------------


def _expand_patterns(input_patterns: Sequence[str]) -> List[str]:
  """Checks that every pattern matches a file; returns the sorted matched paths.

  Raises:
    FileNotFoundError: naming the patterns that match nothing.
  """
  results = FileSystems.match(list(input_patterns))
  missing = [p for p, r in zip(input_patterns, results) if not r.metadata_list]
  if missing:
    raise FileNotFoundError(f"input pattern(s) match no file: {missing}")
  return sorted({m.path for r in results for m in r.metadata_list})


def _counters(result) -> Dict[str, int]:
  counters = {}
  query = result.metrics().query(MetricsFilter().with_namespace(COUNTER_NAMESPACE))
  for counter in query["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value)
  return dict(sorted(counters.items()))


def _is_output_file(name: str) -> bool:
  if name in (schema.ALIAS_COUNTS_FILE, schema.REDIRECTS_FILE, schema.STATS_FILE,
              schema.MANIFEST_FILE):
    return True
  return any(name.startswith(prefix + "-") and name.endswith(".tfrecord")
             for prefix in output_prefixes())


def _list_dir(directory: str) -> List[str]:
  results = FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list
  return sorted(m.path for m in results)


def _write_json(path: str, value: Any) -> None:
  with FileSystems.create(path) as f:
    f.write((json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def default_pipeline_options(argv: Optional[Sequence[str]] = None) -> PipelineOptions:
  """PipelineOptions from `argv`; DirectRunner in-memory with one worker unless given."""
  options = PipelineOptions(list(argv or []))
  direct = options.view_as(DirectOptions)
  args = " ".join(argv or [])
  if "direct_num_workers" not in args:
    direct.direct_num_workers = 1
  if "direct_running_mode" not in args:
    direct.direct_running_mode = "in_memory"
  return options


def run(input_patterns: Sequence[str], output_dir: str,
        heldout_fraction: float = DEFAULT_HELDOUT_FRACTION, descriptions: Optional[str] = None,
        pipeline_options: Optional[PipelineOptions] = None, num_shards: Optional[int] = None,
        max_page_chars: int = MAX_PAGE_CHARS, multistream_index: Optional[str] = None,
        detect_multistream_index: bool = True,
        range_bytes: int = DEFAULT_RANGE_BYTES) -> Dict[str, Any]:
  """Runs the extraction and publishes its outputs atomically in `output_dir`.

  Files are written to `output_dir/.staging-<id>/`; after the pipeline succeeded, the previous
  outputs in `output_dir` are removed, the new files moved in and MANIFEST.json written last.
  An old MANIFEST.json is removed before the pipeline starts, so a failed run leaves none.

  Args:
    input_patterns: file patterns of MediaWiki XML dumps (plain or .bz2).
    output_dir: output directory (created if missing; previous outputs are replaced).
    heldout_fraction: fraction of source pages whose mentions are held out.
    descriptions: optional JSONL of entity descriptions ({"title", "text"}).
    pipeline_options: Beam options; default DirectRunner, in-memory, one worker.
    num_shards: shards per TFRecord output (None: by record count).
    max_page_chars: longer pages are reported and skipped.
    multistream_index: optional file pattern of multistream index files (see build_pipeline).
    detect_multistream_index: use an index found beside a multistream dump by name.
    range_bytes: compressed bytes per read range of an indexed multistream dump.

  Returns:
    The stats dict written to stats.json: counter name -> value.

  Raises:
    FileNotFoundError: an input pattern (the descriptions file, the multistream index)
      matches no file.
    ValueError: a multistream index file belongs to no input dump.
    RuntimeError: the pipeline did not finish successfully.
  """
  manifest_path = FileSystems.join(output_dir, schema.MANIFEST_FILE)
  if FileSystems.exists(manifest_path):  # from here on, a failure leaves no manifest
    FileSystems.delete([manifest_path])
  input_files = _expand_patterns(input_patterns)
  if descriptions:
    _expand_patterns([descriptions])
  if pipeline_options is None:
    pipeline_options = default_pipeline_options()
  if not FileSystems.exists(output_dir):
    FileSystems.mkdirs(output_dir)
  staging = FileSystems.join(output_dir, _STAGING_PREFIX + uuid.uuid4().hex[:12])
  FileSystems.mkdirs(staging)
  started = datetime.datetime.now(datetime.timezone.utc)
  try:
    pipeline = beam.Pipeline(options=pipeline_options)
    build_pipeline(pipeline, list(input_patterns), staging, heldout_fraction=heldout_fraction,
                   descriptions=descriptions, num_shards=num_shards,
                   max_page_chars=max_page_chars, multistream_index=multistream_index,
                   detect_multistream_index=detect_multistream_index,
                   range_bytes=range_bytes)
    result = pipeline.run()
    state = result.wait_until_finish()
    if state != beam.runners.runner.PipelineState.DONE:
      raise RuntimeError(f"extraction pipeline ended in state {state}")
    stats = _counters(result)
    _write_json(FileSystems.join(staging, schema.STATS_FILE), stats)
    staged = _list_dir(staging)
    # Replace the previous outputs (and staging left by killed runs), then move the new in.
    old = [p for p in _list_dir(output_dir)
           if _is_output_file(os.path.basename(p)) or (
               os.path.basename(p).startswith(_STAGING_PREFIX) and p != staging)]
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
  return stats


def main(argv: Sequence[str]) -> None:
  """Entry point: absl flags for the extraction, every other flag goes to PipelineOptions."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS
  input_patterns = [p for p in flag_values.input.split(",") if p]
  started = datetime.datetime.now()
  try:
    stats = run(input_patterns, flag_values.output_dir,
                heldout_fraction=flag_values.heldout_fraction,
                descriptions=flag_values.descriptions,
                pipeline_options=default_pipeline_options(argv[1:]),
                num_shards=flag_values.num_shards,
                multistream_index=flag_values.multistream_index,
                detect_multistream_index=flag_values.detect_multistream_index,
                range_bytes=int(flag_values.multistream_range_mb * (1 << 20)))
  except (FileNotFoundError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  seconds = (datetime.datetime.now() - started).total_seconds()
  for name, value in stats.items():
    print(f"{name:>45s}  {value}")
  print(f"Wrote {flag_values.output_dir} in {seconds:.1f} s")
  skipped = stats.get("pages_unreadable", 0) + stats.get("pages_failed", 0)
  if skipped:
    print(f"WARNING: {skipped} page(s) or file part(s) were skipped; see the log.",
          file=sys.stderr)
    sys.exit(3)


def _parse_known_flags(argv: List[str]) -> List[str]:
  """Parses this module's flags; returns argv[0] and the rest (Beam options)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  return flags.FLAGS(argv, known_only=True)


def _define_flags() -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("input", None, "Comma-separated file patterns of MediaWiki XML dumps "
                      "(.xml or .xml.bz2, multistream included).")
  flags.DEFINE_string("output_dir", None, "Directory for the extraction outputs.")
  flags.DEFINE_string("descriptions", None, "Optional JSONL of entity descriptions "
                      '({"title", "text"} per line).')
  flags.DEFINE_float("heldout_fraction", DEFAULT_HELDOUT_FRACTION,
                     "Fraction of source pages whose mentions are held out.")
  flags.DEFINE_integer("num_shards", None, "Shards per TFRecord output (default: about "
                       f"{RECORDS_PER_SHARD} records per shard).")
  flags.DEFINE_string("multistream_index", None, "File pattern of the multistream index "
                      "file(s) (*-multistream-index.txt.bz2) of the input dumps: the dumps are "
                      "then read in ranges of bz2 streams, in parallel.")
  flags.DEFINE_boolean("detect_multistream_index", True, "Use X-multistream-index.txt.bz2 "
                       "found beside an input X-multistream.xml.bz2 without --multistream_index.")
  flags.DEFINE_float("multistream_range_mb", DEFAULT_RANGE_BYTES / (1 << 20),
                     "Compressed MiB of bz2 streams per read work item of an indexed dump.")
  flags.mark_flags_as_required(["input", "output_dir"])


def _entry_point() -> None:
  from absl import app  # pylint: disable=g-import-not-at-top
  _define_flags()
  logging.getLogger().setLevel(logging.INFO)
  # Unknown flags (Beam pipeline options) are passed through to PipelineOptions.
  app.run(main, flags_parser=_parse_known_flags)


if __name__ == "__main__":
  # Run the copy of this module imported under its package name, so that nothing the workers
  # unpickle (DoFns, Entity) lives in __main__ (multi_processing and Dataflow workers).
  from beam_pipelines import extract_wikipedia  # pylint: disable=g-import-not-at-top,import-self
  extract_wikipedia._entry_point()  # pylint: disable=protected-access
