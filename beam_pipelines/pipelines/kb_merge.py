"""One knowledge base from every source: dump pages, link targets, descriptions, title lists
and redirect lists, merged by Beam joins on one matching key.

Gillick et al. (2019), section 3: retrieval is over all Wikipedia entities. The dumps we parse
hold a few hundred articles; a Wikipedia-scale KB adds every title of a title list (4.5M
entities) and a redirect list (1.4M aliases). Sources spell titles differently ('Jürgen
Klinsmann' in a dump, 'jurgen_klinsmann' in DBpedia's folded list), so every title is keyed by
`dense_entity.kb.titles.match_key` (case- and accent-insensitive) and each key becomes at most
one entity. Every step below is a join or a per-key function, with no single-worker step:

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

import collections
import itertools
import logging
import re
import zlib
from typing import Dict, Iterator, Optional, Tuple

import apache_beam as beam
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


def _count(name: str, n: int = 1) -> None:
  """Increments the Beam counter `name` (reported in stats.json)."""
  if n:
    counter = _COUNTERS.get(name)
    if counter is None:
      counter = _COUNTERS[name] = Metrics.counter(COUNTER_NAMESPACE, name)
    counter.inc(n)


def split_qualifier(key: str) -> Tuple[str, Optional[str]]:
  """'georgia (country)' -> ('georgia', 'country'); 'georgia' -> ('georgia', None)."""
  match = _QUALIFIED.match(key)
  return (match.group(1), match.group(2)) if match else (key, None)


# ---------------------------------------------------------------------------- joins

# The merge's joins group (key, (tag, value)) elements with one GroupByKey: the producing step
# tags its output and the consuming step splits a group by tag. beam.CoGroupByKey would add a
# tagging step per input and a collecting step per key: two more Beam elements per value and
# per key at every join (each an encode, a decode and calls; issue 17).


def _tag(tag: str, fn):
  """element -> [(key, (tag, value))] of fn(element)'s (key, value) pairs."""
  return lambda element: [(k, (tag, v)) for k, v in fn(element)]


def _by_tag(tagged, tags: Tuple[str, ...]) -> Dict[str, list]:
  """[(tag, value), ...] -> {tag: [value, ...]} for each of `tags` (what CoGroupByKey gives)."""
  grouped = {tag: [] for tag in tags}
  for tag, value in tagged:
    grouped[tag].append(value)
  return grouped


def _join(tags: Tuple[str, ...], fn):
  """fn over (key, {tag: [values]}) (what CoGroupByKey gives) from (key, [(tag, value)])."""
  return lambda element: fn((element[0], _by_tag(element[1], tags)))


def _group(label: str, tagged_inputs):
  """PCollections of (key, (tag, value)) -> (key, [(tag, value), ...]): one join's grouping."""
  return (tagged_inputs
          | f"{label}/Flatten" >> beam.Flatten()
          | f"{label}/GroupByKey" >> beam.GroupByKey())


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


def drop_edges_of_articles(element) -> Iterator[Tuple[str, Tuple[str, str, str]]]:
  """(key, {'edge': [edge], 'article': [...]}) -> the edge, unless its source key is a dump
  article."""
  key, grouped = element
  edges = list(grouped["edge"])
  if not edges:
    return
  if any(True for _ in grouped["article"]):
    _count("redirects_overridden_by_article")
    return
  yield key, edges[0]


# Buckets of the redirect rounds' joins (by a CRC-32 of the key: the same in every process).
REDIRECT_BUCKETS = 1024


def redirect_bucket(key: str) -> int:
  """The bucket of a key in the redirect rounds' joins."""
  return zlib.crc32(key.encode("utf-8")) % REDIRECT_BUCKETS


class RouteEdgesFn(beam.DoFn):
  """Edges (one each, or packs of them with `packed`) -> (bucket, [(tag, item), ...]) packs
  for one round of pointer jumping: each edge goes to its target key's bucket as ('in',
  edge), and to its source key's bucket as ('next', (source key, target key, target title))
  or, for the final round (`final`), as ('is_source', source key). Packed per bundle and
  bucket (beam_io.Packs): one Beam element per pack through the shuffle, not two per edge."""

  def __init__(self, packed: bool, final: bool):
    super().__init__()
    self._packed = packed
    self._final = final

  def start_bundle(self):
    self._packs = beam_io.Packs()

  def process(self, element):
    add, final = self._packs.add, self._final
    for edge in element if self._packed else (element,):
      source_key, (_, target_key, target) = edge
      yield from add(redirect_bucket(target_key), ("in", edge))
      if final:
        yield from add(redirect_bucket(source_key), ("is_source", source_key))
      else:
        yield from add(redirect_bucket(source_key), ("next", (source_key, target_key, target)))

  def finish_bundle(self):
    for element in self._packs.take():
      yield beam_io.in_global_window(element)


def _chunks(values: list):
  for i in range(0, len(values), beam_io.PACK_MAX_VALUES):
    yield values[i:i + beam_io.PACK_MAX_VALUES]


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
  return _chunks(out)


def finish_edge(element) -> Iterator[Tuple[str, Tuple[str, Optional[str], Optional[str]]]]:
  """(bucket, [pack of ('in', edge) and ('is_source', source key)]) -> (source key, (source,
  final key, final title)); final None when the edge's target is still a redirect's source
  (a loop or a chain longer than 2**REDIRECT_ROUNDS hops)."""
  grouped = _by_tag(itertools.chain.from_iterable(element[1]), ("in", "is_source"))
  sources = set(grouped["is_source"])
  for source_key, (source, target_key, target) in grouped["in"]:
    if target_key in sources:
      _count("redirects_loop")
      yield source_key, (source, None, None)
    else:
      yield source_key, (source, target_key, target)


class ResolveRedirects(beam.PTransform):
  """(source key, (source title, target key, target title)) edges -> final edges, by pointer
  jumping (REDIRECT_ROUNDS rounds, then a check that the target is no redirect).

  Each round joins by bucket of keys (redirect_bucket), not by key: the edges cross each
  shuffle in packs and a bucket's join is a dictionary lookup (the per-key joins were 30% of
  the elements through Beam with a twentieth of the title and redirect lists, issue 17).

  Output: (source key, (source title, final key or None, final title or None)).
  """

  def expand(self, edges):
    packed = False
    for r in range(REDIRECT_ROUNDS):
      edges = (edges
               | f"Route{r}" >> beam.ParDo(RouteEdgesFn(packed, final=False))
               | f"Join{r}" >> beam.GroupByKey()
               | f"Jump{r}" >> beam.FlatMap(jump))
      packed = True
    return (edges
            | "RouteFinal" >> beam.ParDo(RouteEdgesFn(packed, final=True))
            | "JoinFinal" >> beam.GroupByKey()
            | "Finish" >> beam.FlatMap(finish_edge))


# ------------------------------------------------------------------------ keyed values


def resolve_value(element, anchors: bool = True):
  """(key, [(tag, title, payload), ...]) -> (final key, value).

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
  for tag, title, payload in values:
    kind = _COUNTER_PREFIX[tag]
    n = len(payload) if tag == MENTION else 1
    if redirect is not None:
      if tag == LISTED:
        _count("titles_listed_that_are_redirects")
        continue
      if final_key is None:
        _count(f"{kind}_dropped_redirect_loop", n)
        continue
      _count(f"{kind}_resolved_through_redirect", n)
      title = final_title  # the redirect target's spelling, not the redirect's
    if not namespaces.is_main_namespace_title(title):
      _count(f"{kind}_dropped_other_namespace", n)
      continue
    yield final_key, (tag, title, payload)
    if tag == MENTION and anchors:
      for anchor_key in sorted({titles.match_key(mention[2]) for mention in payload}):
        yield anchor_key, (ANCHOR, final_key, None)


_ENTITY_LIKE = frozenset((ARTICLE, DESCRIPTION, MENTION, LISTED))


def value_flags(element) -> Iterator[Tuple[str, Tuple[str, bool, bool]]]:
  """(key, (tag, title, payload)) of a resolved value -> (base key, (key, listed, named
  '(disambiguation)')) for the WP:DAB rule, for the values that make an entity (article,
  description, mention, listed title); anchors and disambiguation pages give nothing. One
  element per value, so that the rule needs no grouping by key first."""
  key, (tag, _, _) = element
  if tag not in _ENTITY_LIKE:
    return
  base, qualifier = split_qualifier(key)
  yield base, (key, tag == LISTED, qualifier == DISAMBIGUATION_QUALIFIER)


def disambiguation_by_siblings(element) -> Iterator[Tuple[str, Tuple[str, str, None]]]:
  """(base key, [(key, listed, is '(disambiguation)')] of value_flags) -> the WP:DAB decision
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


# Mentions of one entity per element after the KB merge, at most (BuildEntityFn).
MENTION_PACK_VALUES = beam_io.PACK_MAX_VALUES
MENTION_PACK_BYTES = beam_io.PACK_MAX_BYTES


class BuildEntityFn(beam.DoFn):
  """(key, [(tag, title, payload)]) -> the key's Entity; tagged 'mention' ([mention payload,
  ...], Entity): its mentions in packs of at most MENTION_PACK_VALUES mentions or
  MENTION_PACK_BYTES bytes (in the order they came), and 'redirect' (alias title, entity
  title) for each alias.
  """

  MENTION = "mention"
  REDIRECT = "redirect"

  def process(self, element):
    key, values = element
    by_tag = collections.defaultdict(list)
    for tag, title, payload in values:
      if tag == MENTION:  # mentions of one link target title, as a list
        by_tag[tag].extend((title, mention) for mention in payload)
      else:
        by_tag[tag].append((title, payload))
    articles, mentions = by_tag[ARTICLE], by_tag[MENTION]
    descriptions, listed = by_tag[DESCRIPTION], by_tag[LISTED]
    aliases = sorted({title for title, _ in by_tag[ALIAS]})
    if not (articles or descriptions or mentions or listed):
      _count("redirects_to_missing_page", len(aliases))
      return
    if by_tag[DISAMBIGUATION] and not articles:
      # A disambiguation page of a dump: a list of other entities, not one (links to it are
      # links that editors still have to point at the right entity).
      _count("not_entities_disambiguation_page")
      _count("mentions_dropped_disambiguation_page", len(mentions))
      _count("redirects_to_missing_page", len(aliases))
      return
    if split_qualifier(key)[1] == DISAMBIGUATION_QUALIFIER:
      _count("not_entities_disambiguation_page_by_title")
      _count("mentions_dropped_disambiguation_page", len(mentions))
      _count("redirects_to_missing_page", len(aliases))
      return
    if not (articles or descriptions or mentions):  # title-only
      reasons = sorted(reason for reason, _ in by_tag[NOT_ENTITY])
      if not reasons and by_tag[ANCHOR] and not by_tag[PRIMARY_TOPIC]:
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
    if len({t for tag in (ARTICLE, DESCRIPTION, MENTION, LISTED) for t, _ in by_tag[tag]}) > 1:
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
    # The entity's mentions in packs (at most MENTION_PACK_VALUES mentions or
    # MENTION_PACK_BYTES bytes a pack): the steps after the merge cost per element, and a
    # popular entity has hundreds of thousands of links.
    pack, size = [], 0
    for _, mention in mentions:
      pack.append(mention)
      size += payload_size(mention)
      if len(pack) >= MENTION_PACK_VALUES or size >= MENTION_PACK_BYTES:
        yield beam.pvalue.TaggedOutput(self.MENTION, (pack, entity))
        pack, size = [], 0
    if pack:
      yield beam.pvalue.TaggedOutput(self.MENTION, (pack, entity))
    for alias in entity.aliases:
      yield beam.pvalue.TaggedOutput(self.REDIRECT, (alias, entity.title))


def payload_size(mention) -> int:
  """Bytes of a mention payload's strings (its encoded features included), for packing."""
  return sum(len(x) for x in mention if isinstance(x, (str, bytes)))


class MergeKnowledgeBase(beam.PTransform):
  """Every KB source -> entities, their mentions and the redirects, one entity per key.

  Input: a dict of PCollections (absent keys are empty):
    'articles': (title, ArticleTuple) of dump pages;
    'redirects': (title, target title) of dump redirect pages;
    'disambiguations': title of dump disambiguation pages (never entities);
    'descriptions': (title, text);
    'mentions': (link target title, mention payload): a tuple whose item 2 is the span text
      (records.MentionPayload in the extraction, MentionTuple also works), passed on as is;
    'mention_packs': (link target title, [mention payload, ...]): the same, packed by their
      producer (beam_io.Packs' bounds; the extraction's ParsePageFn);
    'titles': title, from title lists;
    'title_redirects': (redirect title, target title), from redirect lists.
  All titles normalized (dense_entity.kb.titles.normalize_title).

  Output: {'entities': Entity, 'mentions': ([mention payload, ...], Entity) (an entity's
  mentions, packed: BuildEntityFn), 'redirects': (redirect title, entity title)}, the last for
  redirects whose final target is an entity.

  Without 'titles' there is no title-only entry, so the steps that only decide on those (the
  anchor keys of mentions, the WP:DAB sibling rule) are left out of the pipeline: the same
  outputs, a fifth fewer elements through the merge.
  """

  def expand(self, inputs):
    pipeline = next(iter(inputs.values())).pipeline
    sources = {name: inputs[name] if name in inputs else pipeline | f"No_{name}" >> beam.Create([])
               for name in ("articles", "redirects", "disambiguations", "descriptions",
                            "mentions", "mention_packs", "titles", "title_redirects")}
    get = sources.__getitem__
    key = titles.match_key
    edges = ((get("redirects")
              | "DumpEdges" >> beam.Map(lambda st: (key(st[0]), (0, st[0], key(st[1]), st[1]))),
              get("title_redirects")
              | "ListEdges" >> beam.Map(lambda st: (key(st[0]), (1, st[0], key(st[1]), st[1]))))
             | "AllEdges" >> beam.Flatten()
             | "GroupEdges" >> beam.GroupByKey()
             | "PickEdge" >> beam.FlatMap(_tag("edge", pick_edge)))
    edges = (_group("JoinEdgesArticles", (
        edges,
        get("articles") | "ArticleKeys" >> beam.Map(lambda kv: (key(kv[0]), ("article", None))),
        get("disambiguations") | "DisambiguationKeys" >> beam.Map(
            lambda t: (key(t), ("article", None)))))
             | "DropArticleEdges" >> beam.FlatMap(
                 _join(("edge", "article"), drop_edges_of_articles)))
    finals = edges | "ResolveRedirects" >> ResolveRedirects()

    values = (
        get("articles") | "TagArticles" >> beam.Map(
            lambda kv: (key(kv[0]), (ARTICLE, kv[0], kv[1]))),
        get("descriptions") | "TagDescriptions" >> beam.Map(
            lambda kv: (key(kv[0]), (DESCRIPTION, kv[0], kv[1]))),
        # Mentions travel as lists of the mentions of one link target title (packed per
        # bundle where the pages are parsed, at most 1,024 or 32 MB a pack), not one element
        # each: every element costs an encode and a decode at each join (a quarter of the
        # extraction's time, issue 17), and a title has many links.
        (get("mentions")
         | "PackMentionsByTarget" >> beam.ParDo(beam_io.PackByKey(size_of=payload_size)),
         get("mention_packs"))
        | "AllMentionPacks" >> beam.Flatten()
        | "TagMentions" >> beam.Map(lambda kv: (key(kv[0]), (MENTION, kv[0], kv[1]))),
        get("titles") | "TagTitles" >> beam.Map(lambda t: (key(t), (LISTED, t, None))),
        get("disambiguations") | "TagDisambiguations" >> beam.Map(
            lambda t: (key(t), (DISAMBIGUATION, t, None))),
        # A value's key joined with the final edge of a redirect from it, if any.
        finals | "TagFinalEdges" >> beam.Map(lambda kv: (kv[0], (REDIRECT_EDGE, kv[1], None))),
    )
    title_only_rules = "titles" in inputs
    resolved = (_group("JoinValuesRedirects", values)
                | "ResolveValues" >> beam.FlatMap(resolve_value, anchors=title_only_rules))
    aliases = finals | "Aliases" >> beam.FlatMap(
        lambda kv: [(kv[1][1], (ALIAS, kv[1][0], None))] if kv[1][1] is not None else [])
    keyed = [resolved, aliases]
    if title_only_rules:
      keyed.append(resolved
                   | "ValueFlags" >> beam.FlatMap(value_flags)
                   | "ByBaseKey" >> beam.GroupByKey()
                   | "DisambiguationBySiblings" >> beam.FlatMap(disambiguation_by_siblings))
    built = (keyed
             | "KeyedEverything" >> beam.Flatten()
             | "GroupByEntityKey" >> beam.GroupByKey()
             | "BuildEntities" >> beam.ParDo(BuildEntityFn()).with_outputs(
                 BuildEntityFn.MENTION, BuildEntityFn.REDIRECT, main="entity"))
    return {"entities": built["entity"], "mentions": built[BuildEntityFn.MENTION],
            "redirects": built[BuildEntityFn.REDIRECT]}


def parse_list_line(line: str, parse, counter: str, source: str):
  """Parses one line of a title or redirect list with `parse` (parsers.title_lists); a bad
  line is logged with its file and dropped, counted ('<counter>_invalid'), a read one counted
  ('<counter>_read')."""
  try:
    parsed = parse(line)
  except ValueError as e:
    logging.warning("Skipped a line of %s: %s", source, e)
    _count(f"{counter}_invalid")
    return
  if parsed is not None:
    _count(f"{counter}_read")
    yield parsed
