"""One knowledge base from every source: dump pages, link targets, descriptions, title lists
and redirect lists, merged by Beam joins on one matching key.

Gillick et al. (2019), section 3: retrieval is over all Wikipedia entities. The dumps we parse
hold a few hundred articles; a Wikipedia-scale KB adds every title of a title list (4.5M
entities) and a redirect list (1.4M aliases). Sources spell titles differently ('Jürgen
Klinsmann' in a dump, 'jurgen_klinsmann' in DBpedia's folded list), so every title is keyed by
`dense_entity.kb.titles.match_key` (case- and accent-insensitive) and each key becomes at most
one entity. Every step below is a join by bucket of keys (see "joins" below) or a per-key
function, with no single-worker step:

1. Redirect edges (dump redirects before list redirects when both name a source key; a source
   key that is a dump article is an article, not a redirect) are resolved to their final
   target by pointer jumping: each round replaces a target that is itself a redirect by that
   redirect's target, so 3 rounds follow chains of up to 8 hops (titles.MAX_REDIRECT_HOPS);
   a target still a redirect after that is a loop or too long a chain and is dropped, counted.
   Each round joins edges by bucket of keys (ResolveRedirects), in packs.
2. Articles, descriptions, link targets of mentions and listed titles are keyed, moved through
   the redirects to their final key (a listed title that is a redirect is an alias, not an
   entity), and grouped by key with the redirect titles (aliases) and anchor texts.
3. Per key, one entity: its display title is the dump article's title, else the description's,
   else the most frequent link target spelling, else the listed title (so a KB of all titles
   keeps the dump's capitalisation and accents where it has them); text from the article, else
   the description; categories from the article. Keys of several articles keep the one with the
   longest text (counted as a collision).
4. Not entities (each counted): disambiguation pages of the dumps (parsers.page_kinds: by
   '__DISAMBIG__', template, category or title; 'not_entities_disambiguation_page', with the
   mentions linking to them, 'mentions_dropped_disambiguation_page', and the redirects to
   them), titles ending in ' (disambiguation)', and title-only entries
   (only listed: no page, link or description) that look like disambiguation pages or unlisted
   redirects, which would otherwise match mention spans exactly ('Georgia', 'AFP', 'U.S.'):
   - by Wikipedia's naming rule for disambiguation (WP:DAB): a base title 'X' with entities
     'X (qualifier)' and no 'X (disambiguation)' is itself the disambiguation page;
   - by the anchors: the title is anchor text of links to other entities and never a link
     target itself (editors linking the words 'X' chose another page), unless 'X
     (disambiguation)' exists, which makes 'X' the primary topic.

Counters go to the extraction's namespace (stats.json); WORKSPACE.md lists them.
"""

import bz2
import collections
import contextlib
import functools
import gzip
import itertools
import logging
import lzma
import re
import threading
import zlib
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics

from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import records
from beam_pipelines.pipelines import beam_io
from dense_entity.kb import titles

COUNTER_NAMESPACE = "extract_wikipedia"

SOURCE_PAGE = "page"
SOURCE_LINK_TARGET = "link_target"
SOURCE_DESCRIPTION = "description"
SOURCE_TITLE_LIST = "title_list"

DISAMBIGUATION_QUALIFIER = "disambiguation"
# Rounds of pointer jumping: chains of up to 2**rounds hops are followed.
REDIRECT_ROUNDS = 3

# Tags of the values grouped by key.
ARTICLE, DESCRIPTION, MENTION, LISTED, ALIAS, ANCHOR, NOT_ENTITY, PRIMARY_TOPIC = (
    "article", "description", "mention", "listed", "alias", "anchor", "not_entity",
    "primary_topic")
DISAMBIGUATION = "disambiguation"  # a disambiguation page of a dump
REDIRECT_EDGE = "redirect_edge"  # the final edge of a redirect from the key (resolve_value)

# Counter prefix of each tag ('mentions_dropped_redirect_loop', ...).
_COUNTER_PREFIX = {ARTICLE: "articles", DESCRIPTION: "descriptions", MENTION: "mentions",
                   LISTED: "titles_listed", DISAMBIGUATION: "disambiguation_pages"}

_QUALIFIED = re.compile(r"^(.*\S) \(([^()]*)\)$")


# Counter objects by name, made once per process: a Beam counter finds the running step's
# metrics when it is incremented, so one object serves every step and bundle.
_COUNTERS = {}


class _PendingCounts(threading.local):
  """The counts of the bucket being joined in this thread (summing_counts), or None."""

  def __init__(self):
    super().__init__()
    self.counts = None


_PENDING = _PendingCounts()


def _count(name: str, n: int = 1) -> None:
  """Increments the Beam counter `name` (reported in stats.json); inside summing_counts, adds
  to the block's sum instead."""
  if n:
    pending = _PENDING.counts
    if pending is not None:
      pending[name] = pending.get(name, 0) + n
      return
    counter = _COUNTERS.get(name)
    if counter is None:
      counter = _COUNTERS[name] = Metrics.counter(COUNTER_NAMESPACE, name)
    counter.inc(n)


@contextlib.contextmanager
def collected_counts() -> Iterator[Dict[str, int]]:
  """Within the block, _count adds to the dictionary it yields, and nothing reaches Beam's
  counters (work in a worker process, whose counts its step adds: _in_worker)."""
  outer, _PENDING.counts = _PENDING.counts, {}
  try:
    yield _PENDING.counts
  finally:
    _PENDING.counts = outer


@contextlib.contextmanager
def summing_counts():
  """Within the block, _count adds to a dictionary, and each name's sum goes to its Beam
  counter once at the block's end: a bucket join counts per key (a listed title-only entity
  four times), and a Beam counter's increment (its step's metrics looked up, its cell locked)
  cost about 0.8 us, a tenth of build_entity's time on such a key (issue 17). The totals in
  stats.json are the same. A block entered inside another in the same thread (a fused step
  after this one runs while this DoFn's generator is suspended at a yield) adds to the outer
  block's sums, which its end reports."""
  if _PENDING.counts is not None:
    yield
    return
  _PENDING.counts = {}
  try:
    yield
  finally:
    pending, _PENDING.counts = _PENDING.counts, None
    for name, n in pending.items():
      _count(name, n)


def split_qualifier(key: str) -> Tuple[str, Optional[str]]:
  """'georgia (country)' -> ('georgia', 'country'); 'georgia' -> ('georgia', None)."""
  if ")" not in key[-2:]:
    # No qualifier without a ')' at the end (or before a final newline, which _QUALIFIED's
    # '$' allows): most keys, told without the match (issue 17: entity_bucket of every key).
    return key, None
  match = _QUALIFIED.match(key)
  return (match.group(1), match.group(2)) if match else (key, None)


# ---------------------------------------------------------------------------- joins

# Every join of the merge groups by bucket of keys, not by key: a step routes its (key, value)
# pairs to their bucket (RouteToBuckets, or the step before the join's outputs), packed per
# bundle and bucket (beam_io.Packs), one GroupByKey moves the packs, and the consuming step
# groups a bucket's values by key in a dictionary and runs its per-key function on each key,
# in key order. Per-key joins cost a Beam element (an encode, a decode and calls) per value and
# per key at every step: with the 5.9M titles of a Wikipedia-scale title list, Beam's element
# decode and encode were 40% of the bundles' time (issue 17). A bucket holds about
# 1/JOIN_BUCKETS of the merge's values, all in memory at once in its step (an estimate for the
# 112M links of English Wikipedia at a few hundred bytes each: tens of MB a bucket), plus all
# the values of its most popular key, as a join by key held them.

# Buckets of the merge's joins (by a CRC-32 of the key: the same in every process).
JOIN_BUCKETS = 1024


def key_bucket(key: str) -> int:
  """The bucket of a key in the merge's joins by key."""
  return zlib.crc32(key.encode("utf-8")) % JOIN_BUCKETS


def root_key(key: str) -> str:
  """'x (a) (b)' -> 'x': the key without its qualifiers (split_qualifier, repeated)."""
  base, qualifier = split_qualifier(key)
  while qualifier is not None:
    base, qualifier = split_qualifier(base)
  return base


def entity_bucket(key: str) -> int:
  """The bucket of a key in the entity join: by its root key (root_key), so that a base key
  'x' and every 'x (qualifier)' meet in one bucket (the WP:DAB rule, sibling_decisions)."""
  return key_bucket(root_key(key))


def _one(element) -> int:
  del element
  return 1


def _single_bucket(key: str) -> int:
  """The bucket of every key in a gathered join (MergeKnowledgeBase's `gathered`)."""
  del key
  return 0


class RouteToBuckets(beam_io.PackingDoFn):
  """Elements (or packs of them, with `packed`) -> (bucket, [(key, value), ...]) packs:
  `pairs(element)` gives an element's (key, value) pairs, each sent to `bucket_of(key)`,
  packed per bundle and bucket (beam_io.Packs; `size_of(pair)` bounds the bytes held).
  With `reads` ('INPUT@STEP'), the items read are counted (beam_io.read_counter), so that a
  finished run can check that every step reading INPUT read all of it (beam_io.flow_losses):
  an element counts `items_of(element)` items (default: a pack's length with `packed`, else
  1; the mention packs of the parse count their mentions). Packed elements for
  _single_bucket (a gathered join) are added a whole element's pairs at a time."""

  def __init__(self, pairs, bucket_of=key_bucket, packed: bool = False, size_of=None,
               reads: Optional[str] = None, items_of=None):
    super().__init__(size_of=size_of)
    self._pairs = pairs
    self._bucket_of = bucket_of
    self._packed = packed
    self._read = beam_io.read_counter(reads) if reads else None
    self._items_of = items_of or (len if packed else _one)

  def process(self, element):
    add, pairs, bucket_of = self._packs.add, self._pairs, self._bucket_of
    if self._read is not None:
      self._read.inc(self._items_of(element))
    if bucket_of is _single_bucket and self._packed:
      # A gathered join's one bucket: a pack's pairs go into it in one call (Packs.add_all),
      # not value by value (issue 17).
      yield from self._packs.add_all(0, [pair for item in element for pair in pairs(item)])
      return
    for item in element if self._packed else (element,):
      for key, value in pairs(item):
        yield from add(bucket_of(key), (key, value))


def groups_by_length(packs) -> Iterator[Dict[str, list]]:
  """Packs of (key, value) holding many keys -> group_bucket of the pairs of each key length,
  in order of length: every key's values, made a few lengths' keys at a time (a gathered
  join's single bucket holds every key of the merge: a dictionary of all of them, a list per
  key, took 1.6 GB more of the full-KB extraction's peak)."""
  by_length = {}
  for pack in packs:
    for pair in pack:
      pairs = by_length.get(len(pair[0]))
      if pairs is None:
        by_length[len(pair[0])] = [pair]
      else:
        pairs.append(pair)
  for length in sorted(by_length):
    yield group_bucket([by_length.pop(length)])


def group_bucket(packs) -> Dict[str, list]:
  """A bucket's packs of (key, value) -> {key: [value, ...]}, values in the order they came."""
  groups = {}
  for pack in packs:
    for key, value in pack:
      group = groups.get(key)
      if group is None:
        groups[key] = [value]
      else:
        group.append(value)
  return groups


class JoinBucketFn(beam_io.PackingDoFn):
  """(bucket, [pack of (key, value)]) -> `fn((key, [value, ...]))` for each key of the bucket,
  in key order. With `route`, fn's (key, value) outputs go on packed per bundle and bucket
  (`route(key)`, beam_io.Packs) to the next join; without, as packs (lists) of a bucket's
  outputs."""

  def __init__(self, fn, route=None, size_of=None):
    super().__init__(size_of=size_of)
    self._fn = fn
    self._route = route

  def process(self, element):
    with summing_counts():
      groups = group_bucket(element[1])
      fn, route = self._fn, self._route
      if route is None:
        out = []
        for key in sorted(groups):
          out.extend(fn((key, groups[key])))
        yield from beam_io.chunks(out)
        return
      add = self._packs.add
      for key in sorted(groups):
        for out in fn((key, groups[key])):  # (out key, value), packed as it is
          done = add(route(out[0]), out)
          if done:
            yield from done


def _by_tag(tagged, tags: Tuple[str, ...]) -> Dict[str, list]:
  """[(tag, value), ...] -> {tag: [value, ...]} for each of `tags` (what CoGroupByKey gives)."""
  grouped = {tag: [] for tag in tags}
  for tag, value in tagged:
    grouped[tag].append(value)
  return grouped


# ------------------------------------------------------------------------------ redirects


def pick_edge(element) -> Iterator[Tuple[str, Tuple[str, str, str]]]:
  """(source key, [(priority, source title, target key, target title)]) -> one edge.

  Priority 0 (dump) before 1 (list), then the smallest target key (deterministic). An edge to
  its own key ('AIDS' -> 'Aids') is no redirect in a key-merged KB.
  """
  source_key, candidates = element
  candidates = sorted(candidates)
  if len({c[2] for c in candidates}) > 1:
    _count("redirects_conflicting_targets")
  _, source, target_key, target = candidates[0]
  if target_key == source_key:
    _count("redirects_to_own_key")
    return
  yield source_key, (source, target_key, target)


# Tags of the edge join's values.
EDGE_CANDIDATE, EDGE_ARTICLE = "candidate", "article"


def edge_of_key(element) -> Iterator[Tuple[str, Tuple[str, str, str]]]:
  """(source key, [(EDGE_CANDIDATE, (priority, source title, target key, target title)) or
  (EDGE_ARTICLE, None)]) -> the key's redirect edge (pick_edge), unless the key is a dump
  article's or disambiguation page's (counted 'redirects_overridden_by_article')."""
  key, values = element
  grouped = _by_tag(values, (EDGE_CANDIDATE, EDGE_ARTICLE))
  if not grouped[EDGE_CANDIDATE]:
    return
  for edge in pick_edge((key, grouped[EDGE_CANDIDATE])):
    if grouped[EDGE_ARTICLE]:
      _count("redirects_overridden_by_article")
      return
    yield edge


class RouteEdgesFn(beam_io.PackingDoFn):
  """Packs of edges -> (bucket, [(tag, item), ...]) packs for one round of pointer jumping:
  each edge goes to its target key's bucket as ('in', edge), and to its source key's bucket
  as ('next', (source key, target key, target title)) or, for the final round (`final`), as
  ('is_source', source key). Packed per bundle and bucket (beam_io.Packs): one Beam element
  per pack through the shuffle, not two per edge."""

  def __init__(self, final: bool):
    super().__init__()
    self._final = final

  def process(self, edges):
    add, final = self._packs.add, self._final
    for edge in edges:
      source_key, (_, target_key, target) = edge
      yield from add(key_bucket(target_key), ("in", edge))
      if final:
        yield from add(key_bucket(source_key), ("is_source", source_key))
      else:
        yield from add(key_bucket(source_key), ("next", (source_key, target_key, target)))


def jump(element) -> Iterator[list]:
  """One round of pointer jumping over one bucket's edges.

  Input: (bucket, [pack of ('in', (source key, (source, X, X title))) and ('next', (X,
  target key, target title)) when X is itself a redirect's source]). Output: packs of the
  incoming edges, each with its target X replaced by X's target when X has one.
  """
  grouped = _by_tag(itertools.chain.from_iterable(element[1]), ("in", "next"))
  nxt = {item[0]: item for item in grouped["next"]}
  out = []
  for edge in grouped["in"]:
    source_key, (source, target_key, _) = edge
    hop = nxt.get(target_key)
    out.append(edge if hop is None else (source_key, (source, hop[1], hop[2])))
  return beam_io.chunks(out)


def finish_edges(element) -> Iterator[list]:
  """(bucket, [pack of ('in', edge) and ('is_source', source key)]) -> packs of (source key,
  (source, final key, final title)); final None when the edge's target is still a redirect's
  source (a loop or a chain longer than 2**REDIRECT_ROUNDS hops)."""
  grouped = _by_tag(itertools.chain.from_iterable(element[1]), ("in", "is_source"))
  sources = set(grouped["is_source"])
  out = []
  for source_key, (source, target_key, target) in grouped["in"]:
    if target_key in sources:
      _count("redirects_loop")
      out.append((source_key, (source, None, None)))
    else:
      out.append((source_key, (source, target_key, target)))
  return beam_io.chunks(out)


def resolve_redirects_gathered(element) -> Iterator[list]:
  """(bucket, [pack of (key, (EDGE_CANDIDATE, ...) or (EDGE_ARTICLE, None))]) holding every
  key's values (one bucket: _single_bucket) -> packs of final edges, (source key, (source
  title, final key or None, final title or None)): what edge_of_key of each key (grouped a
  key length at a time: groups_by_length), then ResolveRedirects make of them, in one step
  (MergeKnowledgeBase's `gathered`).

  The rounds of pointer jumping are dictionary lookups over all edges at once: in a round,
  each edge whose target X is a redirect's source takes X's edge's target, as jump does in
  X's bucket; after REDIRECT_ROUNDS rounds an edge whose target is still a source is a loop
  or a chain of more than 2**REDIRECT_ROUNDS hops (counted 'redirects_loop', final None), as
  finish_edges decides. The same edges and counts, without a shuffle per round (each a stage,
  a fixed cost of Beam's local runner in memory: issue 17)."""
  with summing_counts():
    edges = {}
    for groups in groups_by_length(element[1]):
      for key in sorted(groups):
        for source_key, edge in edge_of_key((key, groups[key])):
          edges[source_key] = edge
    for _ in range(REDIRECT_ROUNDS):
      # Each round reads the edges before it (the jumps of a round are made at once), and
      # only the edges that move are held twice (most redirects end at a page).
      moved = [(source_key, (edge[0], hop[1], hop[2])) for source_key, edge in edges.items()
               if (hop := edges.get(edge[1])) is not None]
      if not moved:
        break  # no target is a source: the rounds left change nothing
      edges.update(moved)
    out = []
    for source_key, edge in edges.items():
      if edge[1] in edges:
        _count("redirects_loop")
        out.append((source_key, (edge[0], None, None)))
      else:
        out.append((source_key, edge))
  return beam_io.chunks(out)


class ResolveRedirects(beam.PTransform):
  """Packs of (source key, (source title, target key, target title)) edges -> packs of final
  edges, by pointer jumping (REDIRECT_ROUNDS rounds, then a check that the target is no
  redirect).

  Each round joins by bucket of keys (key_bucket), not by key: the edges cross each shuffle
  in packs and a bucket's join is a dictionary lookup (the per-key joins were 30% of the
  elements through Beam with a twentieth of the title and redirect lists, issue 17).

  Output: packs of (source key, (source title, final key or None, final title or None)).
  """

  def expand(self, edge_packs):
    for r in range(REDIRECT_ROUNDS):
      edge_packs = (edge_packs
                    | f"Route{r}" >> beam.ParDo(RouteEdgesFn(final=False))
                    | f"Join{r}" >> beam_io.CountedGroupByKey(f"RedirectRound{r}")
                    | f"Jump{r}" >> beam.FlatMap(jump))
    return (edge_packs
            | "RouteFinal" >> beam.ParDo(RouteEdgesFn(final=True))
            | "JoinFinal" >> beam_io.CountedGroupByKey("RedirectFinal")
            | "Finish" >> beam.FlatMap(finish_edges))


# ------------------------------------------------------------------------ keyed values


def resolve_value(element, anchors: bool = True) -> List[Tuple[str, Tuple[str, str, Any]]]:
  """(key, [(tag, title, payload), ...]) -> [(final key, value), ...] (a list, not a
  generator: most keys give one value, and JoinBucketFn calls this once per key).

  The group holds the values at the key and, when the key is a redirect's source, its final
  edge (REDIRECT_EDGE, (source title, final key or None, final title or None), None).
  Values at a redirect's source key move to its final key (counted '<kind>_resolved_through_
  redirect', kind 'mentions', 'descriptions', ...); at a looping redirect they are dropped
  ('<kind>_dropped_redirect_loop'); a listed title that is a redirect is an alias
  ('titles_listed_that_are_redirects'); a value whose final title is not in the main
  namespace is dropped ('<kind>_dropped_other_namespace'). A MENTION value carries a list
  of mention payloads that link to its title (`MergeKnowledgeBase` packs them), counted one per
  mention. Mentions also yield (key of their span text, (ANCHOR, final key, None)), once per
  distinct span key of the list (only whether a key is anchor text is read).
  """
  key, grouped = element
  values, redirect = [], None
  for value in grouped:
    if value[0] == REDIRECT_EDGE:
      redirect = value[1]
    else:
      values.append(value)
  final_key, final_title = key, None
  if redirect is not None:
    _, final_key, final_title = redirect
  out = []
  for tag, title, payload in values:
    if redirect is not None:
      if tag == LISTED:
        _count("titles_listed_that_are_redirects")
        continue
      n = len(payload) if tag == MENTION else 1
      if final_key is None:
        _count(f"{_COUNTER_PREFIX[tag]}_dropped_redirect_loop", n)
        continue
      _count(f"{_COUNTER_PREFIX[tag]}_resolved_through_redirect", n)
      title = final_title  # the redirect target's spelling, not the redirect's
    if not namespaces.is_main_namespace_title(title):
      _count(f"{_COUNTER_PREFIX[tag]}_dropped_other_namespace",
             len(payload) if tag == MENTION else 1)
      continue
    out.append((final_key, (tag, title, payload)))
    if tag == MENTION and anchors:
      for anchor_key in sorted({titles.match_key(mention[2]) for mention in payload}):
        out.append((anchor_key, (ANCHOR, final_key, None)))
  return out


_ENTITY_LIKE = frozenset((ARTICLE, DESCRIPTION, MENTION, LISTED))


def sibling_decisions(groups: Dict[str, list]) -> Iterator[Tuple[str, Tuple[str, str, None]]]:
  """The WP:DAB rule over one entity bucket's keys ({key: [(tag, title, payload), ...]};
  entity_bucket puts a base key and its qualified siblings in one bucket): each base key's
  members are (key, listed, named '(disambiguation)') of the values that make an entity
  (article, description, mention, listed title) at the base and its qualified keys; anchors
  and disambiguation pages give none. Yields disambiguation_by_siblings' decisions."""
  members = {}
  for key, values in groups.items():
    base, qualifier = split_qualifier(key)
    is_dab = qualifier == DISAMBIGUATION_QUALIFIER
    for tag, _, _ in values:
      if tag in _ENTITY_LIKE:
        members.setdefault(base, []).append((key, tag == LISTED, is_dab))
  for base in sorted(members):
    yield from disambiguation_by_siblings((base, members[base]))


def disambiguation_by_siblings(element) -> Iterator[Tuple[str, Tuple[str, str, None]]]:
  """(base key, [(key, listed, is '(disambiguation)')]: sibling_decisions) -> the WP:DAB decision
  on a title-only base (its own values are all listed titles): (base, NOT_ENTITY) when it has
  qualified siblings and no 'base (disambiguation)' page (it is the disambiguation page);
  (base, PRIMARY_TOPIC) when 'base (disambiguation)' exists (it is the primary topic, kept
  whatever its anchors say)."""
  base, members = element
  members = list(members)
  at_base = [listed for k, listed, _ in members if k == base]
  if not at_base or not all(at_base):
    return
  if any(is_dab for _, _, is_dab in members):
    yield base, (PRIMARY_TOPIC, "primary_topic", None)
  elif any(k != base for k, _, _ in members):
    yield base, (NOT_ENTITY, "disambiguation_by_siblings", None)


# --------------------------------------------------------------------------- entities


# Mentions of one entity per pack after the KB merge, at most (build_entity), and mentions
# of a list of such packs before it is sent (build_bucket).
MENTION_PACK_VALUES = beam_io.PACK_MAX_VALUES
MENTION_PACK_BYTES = beam_io.PACK_MAX_BYTES

# Tagged outputs of build_entity and BuildEntitiesFn.
ENTITY_MENTIONS = "mention"
ENTITY_REDIRECTS = "redirect"


def _payload_packs(payloads: Iterable[records.MentionPayload]) -> List[list]:
  """Mention payloads in packs (lists) of at most MENTION_PACK_VALUES mentions or
  MENTION_PACK_BYTES bytes (payload_size): the steps after the merge cost per element, and a
  popular entity has hundreds of thousands of links. A list, not a generator: most entities
  have one pack, which a generator's making and running cost more than (issue 17)."""
  if type(payloads) is list and len(payloads) < MENTION_PACK_VALUES:
    # Most entities (one or two mentions): one pack, when the mentions before the last hold
    # fewer than MENTION_PACK_BYTES (the last one's size cuts no pack), told by one sum
    # (payload_size inlined), not a call and a check per mention (issue 17).
    if len(payloads) < 2 or sum([len(p[0]) + len(p[1]) + len(p[2]) + len(p[3])
                                 for p in payloads[:-1]]) < MENTION_PACK_BYTES:
      return [list(payloads)] if payloads else []
  packs, pack, size = [], [], 0
  for mention in payloads:
    pack.append(mention)
    size += payload_size(mention)
    if len(pack) >= MENTION_PACK_VALUES or size >= MENTION_PACK_BYTES:
      packs.append(pack)
      pack, size = [], 0
  if pack:
    packs.append(pack)
  return packs


def _mention_packs(payloads: Iterable[records.MentionPayload], entity: records.Entity):
  """An entity's mentions tagged ENTITY_MENTIONS in packs (_payload_packs), with the
  entity."""
  for pack in _payload_packs(payloads):
    yield beam.pvalue.TaggedOutput(ENTITY_MENTIONS, (pack, entity))


def _link_target(values: list) -> Optional[Tuple[str, Iterable[records.MentionPayload]]]:
  """The title and mentions of a key whose values are all MENTION (only links name it), as
  the general path (_merged_entity) decides them: the most frequent spelling as the title
  (then the smallest); None when no mention is left. Counts
  'entities_with_spellings_merged'."""
  if len(values) == 1:
    _, title, payloads = values[0]
    return (title, payloads) if payloads else None
  spellings = {}
  for _, spelling, payload in values:
    if payload:
      spellings[spelling] = spellings.get(spelling, 0) + len(payload)
  if not spellings:
    return None
  if len(spellings) > 1:
    _count("entities_with_spellings_merged")
  return (min(spellings, key=lambda t: (-spellings[t], t)),
          itertools.chain.from_iterable(payload for _, _, payload in values))


def _count_link_target_entities(n: int) -> None:
  """The counts of `n` entities made by _link_target_entity's rules."""
  for name in ("entities", "entities_title_from_link_target", "entities_source_link_target",
               "entities_without_page"):
    _count(name, n)


def _link_target_entity(values: list):
  """build_entity of a key whose values are all MENTION (only links name it: most keys of a
  KB without title lists, 27,635 of the 7 English dumps' 28,067), with what the general
  path decides for them and nothing else: the title (_link_target), the counts, the mention
  packs (issue 17: a third of the entity build's time)."""
  found = _link_target(values)
  if found is None:
    return
  entity = _link_target_entity_named(found[0])
  _count_link_target_entities(1)
  yield entity
  yield from _mention_packs(found[1], entity)


_LINK_TARGET_SOURCES = (SOURCE_LINK_TARGET,)


def _link_target_entity_named(title: str) -> records.Entity:
  """The entity of a key only links name: its title, nothing else, from links."""
  return records.Entity(title, "", (), (), _LINK_TARGET_SOURCES)  # (positional: faster)


def _is_link_target_key(key: str, values: list) -> bool:
  """Whether build_entity takes the link-target path for `key`: all its values are MENTION,
  and it has no qualifier (only a key ending in ')', or ')' and a newline as _QUALIFIED's '$'
  allows, has one: the disambiguation rule needs the general path)."""
  return ")" not in key[-2:] and all(value[0] == MENTION for value in values)


def build_entity(key: str, values: list):
  """(key, [(tag, title, payload)]) -> the key's Entity, if it makes one; tagged
  ENTITY_MENTIONS ([mention payload, ...], Entity): its mentions in packs of at most
  MENTION_PACK_VALUES mentions or MENTION_PACK_BYTES bytes (in the order they came), and
  ENTITY_REDIRECTS (alias title, entity title) for each alias."""
  if _is_link_target_key(key, values):
    return _link_target_entity(values)
  return _merged_entity(key, values)


def _merged_entity(key: str, values: list):
  """build_entity of any key (every rule)."""
  articles, descriptions, mentions, listed, alias_titles = [], [], [], [], set()
  others = collections.defaultdict(list)  # DISAMBIGUATION, NOT_ENTITY, ANCHOR, PRIMARY_TOPIC
  for tag, title, payload in values:
    if tag == LISTED:
      listed.append((title, payload))
    elif tag == ALIAS:
      alias_titles.add(title)
    elif tag == MENTION:  # mentions of one link target title, as a list
      mentions.extend((title, mention) for mention in payload)
    elif tag == ARTICLE:
      articles.append((title, payload))
    elif tag == DESCRIPTION:
      descriptions.append((title, payload))
    else:
      others[tag].append((title, payload))
  aliases = sorted(alias_titles)
  if not (articles or descriptions or mentions or listed):
    _count("redirects_to_missing_page", len(aliases))
    return
  if others.get(DISAMBIGUATION) and not articles:
    # A disambiguation page of a dump: a list of other entities, not one (links to it are
    # links that editors still have to point at the right entity).
    _count("not_entities_disambiguation_page")
    _count("mentions_dropped_disambiguation_page", len(mentions))
    _count("redirects_to_missing_page", len(aliases))
    return
  # (Only a key ending in ')', or ')' and a newline as _QUALIFIED's '$' allows, has one.)
  if ")" in key[-2:] and split_qualifier(key)[1] == DISAMBIGUATION_QUALIFIER:
    _count("not_entities_disambiguation_page_by_title")
    _count("mentions_dropped_disambiguation_page", len(mentions))
    _count("redirects_to_missing_page", len(aliases))
    return
  if not (articles or descriptions or mentions):  # title-only
    reasons = sorted(reason for reason, _ in others.get(NOT_ENTITY, ()))
    if not reasons and others.get(ANCHOR) and not others.get(PRIMARY_TOPIC):
      reasons = ["anchor_text_of_other_entities"]
    if reasons:
      _count(f"not_entities_title_list_{reasons[0]}")
      _count("redirects_to_missing_page", len(aliases))
      return
  sources, text, categories = [], "", ()
  if articles:
    if len(articles) > 1:
      _count("kb_key_collisions_articles", len(articles) - 1)
    title, (_, text, categories) = max(
        articles, key=lambda a: (len(a[1][1]), a[1][0], a[0]))
    sources.append(SOURCE_PAGE)
    display = "page"
  if mentions:
    sources.append(SOURCE_LINK_TARGET)
  if descriptions:
    sources.append(SOURCE_DESCRIPTION)
    best_title, best_text = min(descriptions, key=lambda d: (-len(d[1]), d[1], d[0]))
    if not text:
      text = best_text
      _count("entities_text_from_description")
    if not articles:
      title, display = best_title, "description"
  if listed:
    sources.append(SOURCE_TITLE_LIST)
  if not (articles or descriptions):
    if mentions:
      spellings = collections.Counter(t for t, _ in mentions)
      title = min(spellings, key=lambda t: (-spellings[t], t))
      display = "link_target"
    else:
      title, display = min(t for t, _ in listed), "title_list"
  if len(listed) + len(articles) + len(descriptions) + len(mentions) > 1 and len(
      {t for pairs in (articles, descriptions, mentions, listed) for t, _ in pairs}) > 1:
    _count("entities_with_spellings_merged")
  entity = records.Entity(title=title, text=text, categories=tuple(categories),
                          aliases=tuple(a for a in aliases if a != title),
                          sources=tuple(sources))
  _count("entities")
  _count(f"entities_title_from_{display}")
  for source in sources:
    _count(f"entities_source_{source}")
  if not articles:
    _count("entities_without_page")
  yield entity
  yield from _mention_packs((mention for _, mention in mentions), entity)
  for alias in entity.aliases:
    yield beam.pvalue.TaggedOutput(ENTITY_REDIRECTS, (alias, entity.title))


def build_bucket(element, title_only_rules: bool,
                 entity_record: Optional[Callable[[records.Entity], bytes]] = None
                 ) -> Iterator[Any]:
  """(entity bucket, [pack of (key, (tag, title, payload))]) -> BuildEntitiesFn's outputs for
  it: build_entity's for each key of the bucket, in key order (the WP:DAB decisions of
  sibling_decisions joined to their base keys first with `title_only_rules`); its mention
  packs tagged ENTITY_MENTIONS in lists ([([mention payload, ...], Entity), ...], a list sent
  once its packs hold MENTION_PACK_VALUES mentions: one Beam element per list, not per
  entity; the 7 English dumps' 27,824 entities with mentions were as many elements, issue
  17), then its entities in packs (lists of at most beam_io.PACK_MAX_VALUES; with
  `entity_record`, (title, entity_record(entity)) in their place), then its redirects in
  packs tagged ENTITY_REDIRECTS."""
  groups = group_bucket(element[1])
  if title_only_rules:
    for base, decision in list(sibling_decisions(groups)):
      groups[base].append(decision)
  entities, redirects, mention_packs, mentions = [], [], [], 0
  link_targets = 0  # entities of the link-target path, counted once at the end
  for key in sorted(groups):
    values = groups[key]
    if _is_link_target_key(key, values):
      # build_entity's link-target path (_link_target_entity) without its generator and
      # tagged outputs, which this loop would only unpack (issue 17: 27,635 of the 7 English
      # dumps' 28,067 keys).
      found = _link_target(values)
      if found is None:
        continue
      entity = _link_target_entity_named(found[0])
      link_targets += 1
      entities.append(entity)
      packs = [(pack, entity) for pack in _payload_packs(found[1])]
    else:
      packs = []
      for out in _merged_entity(key, values):
        if isinstance(out, records.Entity):
          entities.append(out)
        elif out.tag == ENTITY_REDIRECTS:
          redirects.append(out.value)
        else:
          packs.append(out.value)
    for pack in packs:
      mention_packs.append(pack)
      mentions += len(pack[0])
      if mentions >= MENTION_PACK_VALUES:
        yield beam.pvalue.TaggedOutput(ENTITY_MENTIONS, mention_packs)
        mention_packs, mentions = [], 0
  _count_link_target_entities(link_targets)
  if mention_packs:
    yield beam.pvalue.TaggedOutput(ENTITY_MENTIONS, mention_packs)
  if entity_record is not None:
    entities = [(entity.title, entity_record(entity)) for entity in entities]
  yield from beam_io.chunks(entities)
  for pack in beam_io.chunks(redirects):
    yield beam.pvalue.TaggedOutput(ENTITY_REDIRECTS, pack)


def _in_worker(fn, *args) -> Tuple[list, Dict[str, int]]:
  """fn(*args)'s outputs, as a list, and the counts _count made meanwhile: a call in a
  beam_io.OrderedPool worker process, where Beam's counters do not reach."""
  with collected_counts() as counts:
    outputs = list(fn(*args))
  return outputs, counts


class BuildEntitiesFn(beam.DoFn):
  """(entity bucket, [pack of (key, (tag, title, payload))]) -> build_bucket's outputs: the
  bucket's entities in packs (with `entity_record`, their (title, record) pairs), its mention
  packs tagged ENTITY_MENTIONS, its redirects in packs tagged ENTITY_REDIRECTS.

  With `processes` > 1 the buckets are built in that many worker processes (beam_io.OrderedPool)
  from the first bucket of at least POOL_VALUES values on (the pool started then: smaller
  buckets cost less to build here than to send; shut down at the bundle's end), their outputs
  emitted in bucket order, so that they are the same as built here. The in-memory runner runs
  every other step of the merge in one thread; on the full-KB extraction this step's stage took
  75.6 s with the build inline and 58.7 s with 2 processes (issue 17). As
  extraction.ParsePageFn's `processes`: leave it at 1 on a distributed runner.
  """

  # Values of a bucket (titles, mentions, aliases, ...) from which it is built in the pool:
  # the full KB's buckets hold about 6,000 listed titles each, the 7 dumps' about 100 values.
  POOL_VALUES = 2000

  def __init__(self, title_only_rules: bool, processes: int = 1, start_method: str = "spawn",
               entity_record: Optional[Callable[[records.Entity], bytes]] = None):
    super().__init__()
    beam_io.check_processes(processes)
    self._title_only_rules = title_only_rules
    self._entity_record = entity_record
    self._processes = processes
    self._start_method = start_method
    self._pool = None

  def setup(self):
    beam_io.relax_garbage_collection()

  def teardown(self):
    if self._pool is not None:
      self._pool.shutdown()
      self._pool = None

  def process(self, element):
    bucket = element[0], list(element[1])  # the shuffle's iterable, read once
    if self._pool is None and (self._processes == 1
                               or sum(map(len, bucket[1])) < self.POOL_VALUES):
      with summing_counts():
        yield from build_bucket(bucket, self._title_only_rules, self._entity_record)
      return
    if self._pool is None:  # from here on every bucket goes through it (outputs in order)
      self._pool = beam_io.OrderedPool(self._processes, self._start_method)
    self._pool.submit(_in_worker, build_bucket, bucket, self._title_only_rules,
                      self._entity_record)
    yield from self._results(wait_all=False)

  def finish_bundle(self):
    if self._pool is not None:
      for output in self._results(wait_all=True):
        yield beam_io.output_in_global_window(output)
      # Gone with the bundle: forked from a process of several GB, a worker kept alive would
      # hold on to every page that process writes afterwards (copy-on-write).
      self.teardown()

  def _results(self, wait_all: bool):
    for outputs, counts in self._pool.results(wait_all):
      for name, n in counts.items():
        _count(name, n)
      yield from outputs


def _alias_of_final_edge(final) -> List[Tuple[str, Tuple[str, str, None]]]:
  """A final edge (source key, (source title, final key or None, final title or None)) -> the
  alias value it gives its final key's entity, [(final key, (ALIAS, source title, None))],
  or [] when it ends nowhere (a loop)."""
  _, (source, final_key, _) = final
  return [(final_key, (ALIAS, source, None))] if final_key is not None else []


class ResolveAndBuildEntitiesFn(BuildEntitiesFn):
  """(bucket, [pack of (key, (tag, title, payload))]) holding every value of the values join
  (one bucket: MergeKnowledgeBase's `gathered`) -> BuildEntitiesFn's outputs, in one step for
  what were two joins: resolve_value of each key (grouped a key length at a time:
  groups_by_length), its outputs and the aliases of the final edges among the values
  (_alias_of_final_edge, as the entity join's other input) grouped by entity bucket, then each
  bucket built as BuildEntitiesFn builds it (its pool included), in bucket order; or, from
  fewer than ONE_BUILD_VALUES values, all built in one build_bucket call. The same
  entities, mentions, redirects and counts without the entity join's shuffle (a stage, a
  fixed cost of Beam's local runner in memory) and the packing of every value on its way
  there (issue 17)."""

  # Values of the join from which the resolved values are built by entity bucket (each
  # bucket as BuildEntitiesFn builds it, in its pool from the first bucket of POOL_VALUES
  # on, one bucket's keys in a dictionary at a time); below, in one build_bucket call here:
  # an average bucket of under a quarter of POOL_VALUES is built inline anyway, and the
  # routing and the per-bucket calls cost about a tenth of this step's time (issue 17: the 7
  # English dumps' 31,501 values, in 1,024 buckets of 54 at most).
  ONE_BUILD_VALUES = BuildEntitiesFn.POOL_VALUES * JOIN_BUCKETS // 4

  def process(self, element):
    packs = list(element[1])  # the shuffle's iterable, read once
    one = sum(map(len, packs)) < self.ONE_BUILD_VALUES
    resolved, buckets = [], {}

    def route(outs):
      for out in outs:
        buckets.setdefault(entity_bucket(out[0]), []).append(out)

    add = resolved.extend if one else route
    with summing_counts():
      anchors = self._title_only_rules
      for groups in groups_by_length(packs):
        for key in sorted(groups):
          values = groups[key]
          for value in values:
            if value[0] == REDIRECT_EDGE:
              add(_alias_of_final_edge((key, value[1])))
          add(resolve_value((key, values), anchors=anchors))
      if one:
        # One bucket of every key: the same entities, mentions, redirects and counts (a key
        # and its qualified siblings meet in it, as in their entity bucket), in key order.
        yield from build_bucket((0, [resolved]), self._title_only_rules, self._entity_record)
        return
      for bucket in sorted(buckets):
        yield from super().process((bucket, [buckets.pop(bucket)]))


def payload_size(mention: records.MentionPayload) -> int:
  """Bytes of a mention payload's strings (its encoded features included), for packing: the
  lengths of its four fields (mention id, source page, span: characters; features: bytes)."""
  return len(mention[0]) + len(mention[1]) + len(mention[2]) + len(mention[3])


def mentions_in_packs(target_packs) -> int:
  """Mentions in a [(target, [payload, ...]), ...] element of the 'mention_packs' input."""
  return sum(len(pack) for _, pack in target_packs)


def value_size(pair) -> int:
  """Bytes of a keyed value's text, for packing: (key, (tag, title, payload)) -> the mention
  payloads' sizes (payload_size) of a MENTION value, the text of an article or description,
  else 0."""
  tag, _, payload = pair[1]
  if tag == MENTION:
    return sum(map(payload_size, payload))
  if tag == ARTICLE:
    return len(payload[1])
  return len(payload) if isinstance(payload, str) else 0


class MergeKnowledgeBase(beam.PTransform):
  """Every KB source -> entities, their mentions and the redirects, one entity per key.

  Input: a dict of PCollections (absent keys are empty):
    'articles': (title, ArticleTuple) of dump pages;
    'redirects': (title, target title) of dump redirect pages;
    'disambiguations': title of dump disambiguation pages (never entities);
    'descriptions': (title, text);
    'mentions': (link target title, mention payload): a tuple whose item 2 is the span text
      (records.MentionPayload in the extraction, MentionTuple also works), passed on as is;
    'mention_packs': lists of (link target title, [mention payload, ...]): the same, grouped
      by target by their producer (the extraction's ParsePageFn: per batch of pages,
      parsers.pages.parse_batch), one Beam element per list of groups;
    'titles': title, from title lists; 'title_packs': lists of them (ReadListFileFn);
    'title_redirects': (redirect title, target title), from redirect lists;
      'title_redirect_packs': lists of them.
  All titles normalized (dense_entity.kb.titles.normalize_title).

  Output: {'entities': [Entity, ...] (with `entity_record`: [(title, entity_record(Entity)),
  ...]), 'mentions': [([mention payload, ...], Entity), ...] (entities' mentions, packed per
  entity, the packs in lists: build_bucket), 'redirects':
  [(redirect title, entity title), ...]}, all in packs (BuildEntitiesFn), the last for
  redirects whose final target is an entity.

  Three joins by bucket of keys (see "joins" above), with the redirect rounds between the
  first two: redirect edges with the keys of dump pages (edge_of_key; key_bucket), values
  with the final edges of their keys (resolve_value; key_bucket), and everything of a key
  with its aliases and anchors (build_entity; entity_bucket); with `gathered`, two joins of
  one bucket each, the rounds and the last join inside their steps. Without titles there is no
  title-only entry, so what only decides on those (the anchor values of mentions, the WP:DAB
  sibling rule) is left out: the same outputs with fewer values through the merge.

  Args:
    processes: worker processes of the entity build (BuildEntitiesFn; 1: none).
    start_method: how they start ('spawn' or 'fork': see extraction.ParsePageFn).
    entity_record: Entity -> its serialized record (picklable: a module-level function, such
      as records.entity_record), made where the entity is built, in the worker processes with
      `processes` > 1: the records cross back to the step's process instead of the Entity
      objects, whose unpickling and then serialization there cost about 4 us an entity in the
      one process that runs every other step of the merge (issue 17: the full-KB extraction's
      entity stage took 83.5 s with 71.0 s of that process's CPU before, 63.8 s with 37.3 s
      after).
      None: 'entities' holds the Entity objects.
    gathered: for Beam's local runner in memory with one worker (where every value is in
      the one process anyway): every key's edge values go through one shuffle and one step
      (resolve_redirects_gathered) instead of the edge join and the REDIRECT_ROUNDS + 1
      rounds of ResolveRedirects, and every key's values through one shuffle and one step
      that resolves them and builds the entities (ResolveAndBuildEntitiesFn) instead of the
      values join and the entity join: each join a stage, a fixed cost of that runner (issue
      17); a pack's values for that one bucket go into its packs in one call (RouteToBuckets).
      The same outputs and counts; the steps hold every value of the merge at once (the full
      KB's extraction: 3:39 -> 2:29, its peak RSS 4.1 -> 5.5 GB). Elsewhere it would put
      every value on one worker: leave it False there.

  Raises:
    ValueError: an input name that is none of the above.
  """

  INPUTS = ("articles", "redirects", "disambiguations", "descriptions", "mentions",
            "mention_packs", "titles", "title_packs", "title_redirects", "title_redirect_packs")

  def __init__(self, processes: int = 1, start_method: str = "spawn",
               entity_record: Optional[Callable[[records.Entity], bytes]] = None,
               gathered: bool = False):
    super().__init__()
    self._processes = processes
    self._start_method = start_method
    self._entity_record = entity_record
    self._gathered = gathered

  def expand(self, inputs):
    unknown = sorted(set(inputs) - set(self.INPUTS))
    if unknown:
      raise ValueError(f"MergeKnowledgeBase: unknown input(s) {unknown}; inputs are "
                       f"{', '.join(self.INPUTS)}")
    pipeline = next(iter(inputs.values())).pipeline
    key = titles.match_key
    title_only_rules = "titles" in inputs or "title_packs" in inputs

    def route(name, pairs, packed=False, size_of=None, step=None, items_of=None,
              bucket_of=key_bucket):
      """Input `name`'s (key, value) pairs in packs by `bucket_of` (no step without the
      input)."""
      if name not in inputs:
        return []
      step = step or "Route" + "".join(part.capitalize() for part in name.split("_"))
      return [inputs[name] | step >> beam.ParDo(RouteToBuckets(
          pairs, bucket_of, packed, size_of, f"{name}@{step}", items_of))]

    def join(label, packs):
      """Bucket packs -> (bucket, [pack, ...]): one join's shuffle."""
      if not packs:
        packs = [pipeline | f"No{label}Inputs" >> beam.Create([])]
      # The values pass by reference through the Flatten (beam_io.flatten_by_reference).
      flat = beam_io.flatten_by_reference(packs, f"{label}Inputs")
      return flat | label >> beam_io.CountedGroupByKey(label)

    # 1. Redirect edges, by source key with the keys of dump pages; then to their final keys.
    def dump_edge(st):
      return [(key(st[0]), (EDGE_CANDIDATE, (0, st[0], key(st[1]), st[1])))]

    def list_edge(st):
      return [(key(st[0]), (EDGE_CANDIDATE, (1, st[0], key(st[1]), st[1])))]

    def page_key(title):
      return [(key(title), (EDGE_ARTICLE, None))]

    # Gathered: every key's edge values in one bucket, their redirects resolved in one step.
    edge_bucket = _single_bucket if self._gathered else key_bucket
    edges = join("JoinEdges",
                 route("redirects", dump_edge, bucket_of=edge_bucket)
                 + route("title_redirects", list_edge, bucket_of=edge_bucket)
                 + route("title_redirect_packs", list_edge, packed=True, bucket_of=edge_bucket)
                 + route("articles", lambda kv: page_key(kv[0]), step="RouteArticleKeys",
                         bucket_of=edge_bucket)
                 + route("disambiguations", page_key, step="RouteDisambiguationKeys",
                         bucket_of=edge_bucket))
    if self._gathered:
      finals = edges | "ResolveRedirects" >> beam.FlatMap(resolve_redirects_gathered)
    else:
      finals = (edges
                | "EdgeOfKey" >> beam.ParDo(JoinBucketFn(edge_of_key))
                | "ResolveRedirects" >> ResolveRedirects())

    # 2. Values, with the final edge of a redirect from their key (if any).
    def tag_pairs(tag):
      return lambda kv: [(key(kv[0]), (tag, kv[0], kv[1]))]

    def title_pairs(tag):
      return lambda t: [(key(t), (tag, t, None))]

    # Gathered: every key's values in one bucket (unbounded in bytes: in memory they are
    # all held anyway), resolved and built in one step.
    value_bucket = _single_bucket if self._gathered else key_bucket
    size_of = None if self._gathered else value_size
    mention_packs = route("mention_packs", tag_pairs(MENTION), packed=True, size_of=size_of,
                          items_of=mentions_in_packs, bucket_of=value_bucket)
    if "mentions" in inputs:
      mention_packs.append(
          inputs["mentions"]
          | "PackMentionsByTarget" >> beam.ParDo(beam_io.PackByKey(size_of=payload_size))
          | "RouteMentions" >> beam.ParDo(RouteToBuckets(tag_pairs(MENTION), value_bucket,
                                                         size_of=size_of)))
    values = (route("articles", tag_pairs(ARTICLE), size_of=size_of, bucket_of=value_bucket)
              + route("descriptions", tag_pairs(DESCRIPTION), size_of=size_of,
                      bucket_of=value_bucket)
              + mention_packs
              + route("titles", title_pairs(LISTED), bucket_of=value_bucket)
              + route("title_packs", title_pairs(LISTED), packed=True, bucket_of=value_bucket)
              + route("disambiguations", title_pairs(DISAMBIGUATION), bucket_of=value_bucket)
              + [finals | "RouteFinalEdges" >> beam.ParDo(RouteToBuckets(
                  lambda kv: [(kv[0], (REDIRECT_EDGE, kv[1], None))], value_bucket,
                  packed=True, reads="final_edges@RouteFinalEdges"))])
    joined = join("JoinValuesRedirects", values)
    if self._gathered:
      built = joined | "BuildEntities" >> beam.ParDo(ResolveAndBuildEntitiesFn(
          title_only_rules, self._processes, self._start_method,
          self._entity_record)).with_outputs(ENTITY_MENTIONS, ENTITY_REDIRECTS, main="entity")
    else:
      resolved = joined | "ResolveValues" >> beam.ParDo(JoinBucketFn(
          functools.partial(resolve_value, anchors=title_only_rules),
          route=entity_bucket, size_of=value_size))
      # 3. Per key, one entity, with its aliases (the redirects that end at it).
      aliases = finals | "RouteAliases" >> beam.ParDo(RouteToBuckets(
          _alias_of_final_edge, entity_bucket, packed=True, reads="final_edges@RouteAliases"))
      built = (join("JoinByEntityKey", [resolved, aliases])
               | "BuildEntities" >> beam.ParDo(BuildEntitiesFn(
                   title_only_rules, self._processes, self._start_method,
                   self._entity_record)).with_outputs(
                   ENTITY_MENTIONS, ENTITY_REDIRECTS, main="entity"))
    # Packs, by reference in memory (beam_io.by_reference, on size sampling); kept until the
    # run ends if a stage reads them after this one (the caller may read them twice).
    return {name: beam_io.by_reference(built[tag], keyed=False, read_once=False)
            for name, tag in (("entities", "entity"), ("mentions", ENTITY_MENTIONS),
                              ("redirects", ENTITY_REDIRECTS))}


class ReadListFileFn(beam.DoFn):
  """A title or redirect list file (its path, or fileio's FileMetadata) -> packs (lists of at
  most `max_values`) of what `parse` (parsers.title_lists) makes of its lines: the KB merge
  takes them as 'title_packs' or 'title_redirect_packs'. A line `parse` rejects (ValueError)
  is logged with its file and line number and dropped, counted '<counter>_invalid'; a parsed
  one is counted '<counter>_read'; a blank or header line (None) is neither.

  The file (plain or compressed by its name's suffix, any Beam file system: _open_list) is
  read here in blocks of READ_BYTES and its lines parsed in one loop; a .gz, .bz2 or .xz file
  cut short or corrupt fails the run with a ValueError naming it (Beam's reader took a .gz
  cut in half for a list of half the titles). Read by ReadFromText instead, each line was a
  Beam element (a source read, a timestamp, an encode, a decode and a call): enwiki's 5.9M
  titles took 60 s of the 382 s of the full-KB extraction, 10 us a line, where reading and
  parsing them take 2.2 s (issue 17). Each file is read whole by one worker (ReadFromText too
  reads a .gz or .bz2 file whole); give a list as several files to spread it. A line that is
  not UTF-8 is a bad line (skipped and counted), not a failed job.
  """

  READ_BYTES = 1 << 22

  def __init__(self, parse, counter: str, max_values: int = beam_io.PACK_MAX_VALUES):
    super().__init__()
    self._parse = parse
    self._counter = counter
    self._max_values = max_values

  def setup(self):
    beam_io.relax_garbage_collection()

  def process(self, file) -> Iterator[list]:
    path = getattr(file, "path", file)
    parse, counter, max_values = self._parse, self._counter, self._max_values
    pack, number, read, invalid = [], 0, 0, 0
    try:
      for line in _lines_of(path, self.READ_BYTES):
        number += 1
        if line is None:
          logging.warning("Skipped line %d of %s: not UTF-8", number, path)
          invalid += 1
          continue
        try:
          parsed = parse(line)
        except ValueError as e:
          logging.warning("Skipped line %d of %s: %s", number, path, e)
          invalid += 1
          continue
        if parsed is not None:
          read += 1
          pack.append(parsed)
          if len(pack) >= max_values:
            yield pack
            pack = []
      if pack:
        yield pack
    finally:
      _count(f"{counter}_read", read)
      _count(f"{counter}_invalid", invalid)


# Compressed list files that Python's own decompressors read, raising at a truncated end (a
# .gz cut short reads, in Beam's own CompressedFile, as a shorter file with no error).
_DECOMPRESSORS = {CompressionTypes.GZIP: lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
                  CompressionTypes.BZIP2: lambda raw: bz2.BZ2File(raw, mode="rb"),
                  CompressionTypes.LZMA: lambda raw: lzma.LZMAFile(raw, mode="rb")}
# What a truncated or corrupt compressed file raises while it is read.
_DECOMPRESS_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


@contextlib.contextmanager
def _open_list(path: str) -> Iterator[Any]:
  """A list file opened for reading its decompressed bytes, by its name's suffix as Beam's
  CompressionTypes.AUTO does: .gz, .bz2 and .xz/.lzma by Python's decompressors (every member
  or stream of a concatenated file, and an EOFError at a truncated end), .deflate and .zst by
  Beam's, anything else as plain bytes."""
  kind = CompressionTypes.detect_compression_type(path)
  if kind == CompressionTypes.UNCOMPRESSED or kind not in _DECOMPRESSORS:
    with FileSystems.open(path) as f:
      yield f
    return
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
    with _DECOMPRESSORS[kind](raw) as f:
      yield f


def _lines_of(path: str, read_bytes: int) -> Iterator[Optional[str]]:
  """The lines of a text file (plain, or compressed by its name's suffix: _open_list), without
  their '\n' (a '\r' before it stays: the list parsers strip it), a last line without '\n'
  included; None for a line that is not UTF-8.

  Raises:
    ValueError: naming the file and the line reached, when its compressed data is truncated
      or corrupt (its lines before that were yielded: the caller's run fails, nothing of it
      is published).
  """
  lines = 0
  # Errors of Python's decompressors only (a plain file's read errors are what they say).
  errors = (_DECOMPRESS_ERRORS if CompressionTypes.detect_compression_type(path) in _DECOMPRESSORS
            else ())
  with _open_list(path) as f:
    rest = b""
    while True:
      try:
        block = f.read(read_bytes)
      except errors as e:
        raise ValueError(
            f"{path}: its compressed data is truncated or corrupt ({type(e).__name__}: {e}); "
            f"{lines} lines were read before") from e
      data = rest + block if block else rest
      cut = data.rfind(b"\n") + 1 if block else len(data)
      rest = data[cut:]
      if cut:
        whole = data[:cut - 1] if data[cut - 1:cut] == b"\n" else data[:cut]
        try:
          split = whole.decode("utf-8").split("\n")
        except UnicodeDecodeError:
          split = []
          for raw in whole.split(b"\n"):
            try:
              split.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
              split.append(None)
        lines += len(split)
        yield from split
      if not block:
        return
