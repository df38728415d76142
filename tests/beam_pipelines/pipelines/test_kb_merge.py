"""The KB merge (beam_pipelines.pipelines.kb_merge) on small hand-written sources, and the
extraction with real title and redirect lists."""

import bz2
import gzip
import itertools
import json
import lzma
import os
import pickle
import re
import zlib

import apache_beam as beam
from apache_beam.testing import test_pipeline
import pytest
import tensorflow as tf

from beam_pipelines.dumps import samples
from beam_pipelines.parsers import records
from beam_pipelines.pipelines import extraction
from beam_pipelines.pipelines import kb_merge
from dense_entity.kb import schema
from tests import testutil


def _mention(mention_id, span, page="Source page"):
  return (mention_id, page, span, "left", "right", "x [MASK] y")


def _merge(sources, tmp_path, **kwargs):
  """Runs MergeKnowledgeBase(**kwargs) on in-memory sources; returns its outputs as lists."""
  with test_pipeline.TestPipeline() as p:
    inputs = {name: p | f"Create_{name}" >> beam.Create(values)
              for name, values in sources.items()}
    merged = inputs | kb_merge.MergeKnowledgeBase(**kwargs)
    for name in ("entities", "mentions", "redirects"):
      _ = (merged[name]
           | f"Pickle_{name}" >> beam.Map(lambda x: pickle.dumps(x).hex())
           | f"Write_{name}" >> beam.io.WriteToText(str(tmp_path / name),
                                                    shard_name_template=""))
  out = {}
  for name in ("entities", "mentions", "redirects"):
    with open(tmp_path / name, encoding="utf-8") as f:
      out[name] = [pickle.loads(bytes.fromhex(line.strip())) for line in f if line.strip()]
  # Entities and redirects leave the merge in packs (lists), mention packs in lists.
  out["entities"] = [e for pack in out["entities"] for e in pack]
  out["redirects"] = [r for pack in out["redirects"] for r in pack]
  assert all(isinstance(packs, list) for packs in out["mentions"])
  out["mentions"] = [pack_entity for packs in out["mentions"] for pack_entity in packs]
  return out


def _entities(out):
  return {e.title: e for e in out["entities"]}


def test_one_entity_per_key_with_the_dump_spelling_and_list_aliases(tmp_path):
  out = _merge({
      "articles": [("Jürgen Klinsmann", (7, "Jürgen Klinsmann is a footballer.", ("Players",)))],
      "titles": ["Jurgen klinsmann", "Persian language", "Farsi", "Parsi"],
      "title_redirects": [("Farsi", "Persian language"), ("Parsi", "Farsi")],  # a chain
      "mentions": [("Farsi", _mention("1:0", "Farsi")),
                   ("JURGEN KLINSMANN", _mention("1:1", "Klinsmann"))],
  }, tmp_path)
  entities = _entities(out)
  assert sorted(entities) == ["Jürgen Klinsmann", "Persian language"]
  klinsmann = entities["Jürgen Klinsmann"]
  assert klinsmann.sources == ("page", "link_target", "title_list")
  assert klinsmann.text == "Jürgen Klinsmann is a footballer."
  persian = entities["Persian language"]
  assert persian.aliases == ("Farsi", "Parsi") and persian.sources == ("link_target",
                                                                       "title_list")
  assert sorted((m[0], e.title) for pack, e in out["mentions"] for m in pack) == [
      ("1:0", "Persian language"), ("1:1", "Jürgen Klinsmann")]
  assert sorted(out["redirects"]) == [("Farsi", "Persian language"),
                                      ("Parsi", "Persian language")]


def test_entity_records_are_made_where_the_entities_are_built(tmp_path):
  """With entity_record (the extraction's records.entity_record), 'entities' holds each
  entity's (title, record) in its place, and the other outputs are unchanged (issue 17: the
  records cross back from the build's worker processes, not the Entity objects)."""
  sources = {
      "articles": [("Zug", (2, "Zug is a town.", ("Towns",)))],
      "titles": ["Persian language", "Farsi", "Zug"],
      "title_redirects": [("Farsi", "Persian language")],
      "mentions": [("Farsi", _mention("1:0", "Farsi")), ("Zug", _mention("1:1", "Zug"))],
  }
  plain = _merge(sources, tmp_path / "plain")
  recorded = _merge(sources, tmp_path / "records", entity_record=records.entity_record)
  assert sorted(recorded["entities"]) == sorted(
      (e.title, records.entity_record(e)) for e in plain["entities"])
  assert [title for title, _ in sorted(recorded["entities"])] == ["Persian language", "Zug"]
  for name in ("mentions", "redirects"):
    assert sorted(map(repr, recorded[name])) == sorted(map(repr, plain[name])), name


def test_mention_packs_merge_as_the_same_mentions_one_by_one(tmp_path):
  """'mention_packs' (the extraction's: lists of mentions packed by target where pages are
  parsed) give the outputs of 'mentions' one by one, however the packs are cut."""
  mentions = [("Farsi", _mention("1:0", "Farsi")), ("Persian language", _mention("1:1", "P")),
              ("Farsi", _mention("2:0", "farsi")), ("Zoug", _mention("2:1", "Zoug"))]
  common = {"articles": [("Zug", (2, "Zug is a town.", ()))], "redirects": [("Zoug", "Zug")],
            "title_redirects": [("Farsi", "Persian language")]}
  one_by_one = _merge(dict(common, mentions=mentions), tmp_path / "one")
  packs = [[("Farsi", [mentions[0][1]]), ("Farsi", [mentions[2][1]])],
           [("Persian language", [mentions[1][1]])]]
  packed = _merge(dict(common, mention_packs=packs, mentions=mentions[3:]), tmp_path / "packed")

  def flat(out):
    return sorted((m, e) for pack, e in out["mentions"] for m in pack)

  assert flat(packed) == flat(one_by_one) and len(flat(packed)) == 4
  assert sorted(packed["entities"], key=str) == sorted(one_by_one["entities"], key=str)
  assert sorted(packed["redirects"]) == sorted(one_by_one["redirects"])


def test_redirect_loops_conflicts_and_articles(tmp_path):
  out = _merge({
      "articles": [("AIDS", (1, "AIDS is a disease.", ())), ("Zug", (2, "Zug is a town.", ()))],
      # The dump's redirect wins over the list's for the same source key; an article is never
      # a redirect; a loop is dropped.
      "redirects": [("Zoug", "Zug")],
      "title_redirects": [("Zoug", "Zug (disambiguation)"), ("Aids", "Hiv/aids"),
                          ("Loop a", "Loop b"), ("Loop b", "Loop a")],
      "titles": ["Loop a", "Loop b", "Hiv/aids"],
      "mentions": [("Loop a", _mention("2:0", "loop")), ("Zoug", _mention("2:1", "Zoug"))],
  }, tmp_path)
  entities = _entities(out)
  assert sorted(entities) == ["AIDS", "Hiv/aids", "Zug"]
  assert entities["Zug"].aliases == ("Zoug",)
  assert entities["AIDS"].aliases == ()  # 'Aids' is the article's own key, not a redirect
  assert [(m[0], e.title) for pack, e in out["mentions"] for m in pack] == [("2:1", "Zug")]


def _walk(edges, source_key, rounds):
  """The final edge pointer jumping gives: 2**rounds hops at most, None when the target
  reached is still a redirect's source (a loop or a longer chain)."""
  source, target_key, target = edges[source_key]
  for _ in range(2 ** rounds - 1):
    if target_key not in edges:
      break
    _, target_key, target = edges[target_key]
  if target_key in edges:
    return source_key, (source, None, None)
  return source_key, (source, target_key, target)


def _chains_and_loops():
  """Redirect edges {source key: (source title, target key, target title)}: chains of 1 to 12
  hops, loops of 2 and 3 keys with a redirect into each, a second redirect into a chain."""
  edges = {}
  for chain in range(1, 13):  # k0 -> k1 -> ... -> k<chain> (an article)
    for hop in range(chain):
      edges[f"c{chain}h{hop}"] = (f"C{chain}H{hop}", f"c{chain}h{hop + 1}", f"C{chain}H{hop + 1}")
  for size in (2, 3):  # loops, and a redirect into one
    for i in range(size):
      edges[f"l{size}n{i}"] = (f"L{size}N{i}", f"l{size}n{(i + 1) % size}",
                               f"L{size}N{(i + 1) % size}")
    edges[f"into{size}"] = (f"Into{size}", f"l{size}n0", f"L{size}N0")
  edges["other"] = ("Other", "c3h3", "C3H3")
  return edges


@pytest.mark.parametrize("buckets", [1, 7, 1024])
def test_redirect_rounds_follow_chains_and_stop_at_loops(buckets, monkeypatch, tmp_path):
  """ResolveRedirects (joins by bucket of keys) gives every redirect the final edge a walk
  along the chain gives: chains of 1 to 12 hops (longer than 2**REDIRECT_ROUNDS = 8 hops:
  None), loops, several redirects to one target; whatever the number of buckets."""
  monkeypatch.setattr(kb_merge, "JOIN_BUCKETS", buckets)
  edges = _chains_and_loops()
  with test_pipeline.TestPipeline() as p:
    _ = (p | beam.Create([sorted(edges.items())]) | kb_merge.ResolveRedirects()
         | beam.FlatMap(lambda pack: [pickle.dumps(kv).hex() for kv in pack])
         | beam.io.WriteToText(str(tmp_path / "finals"), shard_name_template=""))
  with open(tmp_path / "finals", encoding="utf-8") as f:
    got = sorted(pickle.loads(bytes.fromhex(line.strip())) for line in f if line.strip())
  want = sorted(_walk(edges, k, kb_merge.REDIRECT_ROUNDS) for k in edges)
  assert got == want
  assert dict(got)["c8h0"][1] == "c8h8" and dict(got)["c9h0"][1] is None
  assert dict(got)["l2n0"][1] is None and dict(got)["into3"][1] is None


def test_gathered_redirect_resolution_gives_the_rounds_edges_and_counts():
  """resolve_redirects_gathered (all keys in one step, in memory) gives the final edges of the
  walk (as ResolveRedirects' rounds, test above) from the edge join's values: a key's dump
  redirect before its list redirect, none for a key with an article or a redirect to its own
  key; and the same counts."""
  edges = _chains_and_loops()
  values = [(key, (kb_merge.EDGE_CANDIDATE, (1, source, target_key, target)))
            for key, (source, target_key, target) in edges.items()]
  # A dump redirect wins over the list's; a page at a key is no redirect; nor is one to the
  # key itself. Values come in packs, in any order.
  values += [("c1h0", (kb_merge.EDGE_CANDIDATE, (0, "C1H0", "c2h0", "C2H0"))),
             ("page", (kb_merge.EDGE_CANDIDATE, (1, "Page", "c1h1", "C1H1"))),
             ("page", (kb_merge.EDGE_ARTICLE, None)),
             ("own", (kb_merge.EDGE_CANDIDATE, (1, "OWN", "own", "Own")))]
  values.reverse()
  with kb_merge.collected_counts() as counts:
    packs = list(kb_merge.resolve_redirects_gathered((0, [values[:5], values[5:]])))
  got = sorted(edge for pack in packs for edge in pack)
  edges["c1h0"] = ("C1H0", "c2h0", "C2H0")
  want = sorted(_walk(edges, k, kb_merge.REDIRECT_ROUNDS) for k in edges)
  assert got == want
  assert dict(got)["c1h0"] == ("C1H0", "c2h2", "C2H2")
  assert dict(got)["c9h0"] == ("C9H0", None, None)
  # The loops (l2: 2 keys + 1 into, l3: 3 + 1) and the chains longer than 8 hops
  # (c9..c12: hops that start more than 8 from their end) are 'redirects_loop'.
  loops = sum(1 for _, (_, final, _) in want if final is None)
  assert counts == {"redirects_loop": loops, "redirects_conflicting_targets": 1,
                    "redirects_overridden_by_article": 1, "redirects_to_own_key": 1}


def test_disambiguation_like_title_only_entries_are_not_entities(tmp_path):
  out = _merge({
      # 'Georgia': only listed, with qualified siblings and no 'Georgia (disambiguation)'.
      # 'Paris': only listed, with a sibling and 'Paris (disambiguation)': the primary topic.
      # 'Afp': only listed, and the anchor text 'AFP' links to another entity.
      # 'Zug': only listed, no siblings, no anchors: kept.
      "titles": ["Georgia", "Paris", "Afp", "Zug", "Paris (disambiguation)"],
      "mentions": [("Georgia (country)", _mention("3:0", "Georgia")),
                   ("Georgia (U.S. state)", _mention("3:1", "the state")),
                   ("Paris (mythology)", _mention("3:2", "Paris")),
                   ("Agence France-Presse", _mention("3:3", "AFP")),
                   ("Animal (disambiguation)", _mention("3:4", "animal"))],
  }, tmp_path)
  entities = _entities(out)
  assert sorted(entities) == ["Agence France-Presse", "Georgia (U.S. state)",
                              "Georgia (country)", "Paris", "Paris (mythology)", "Zug"]
  # Links to a disambiguation page are not training mentions.
  assert sorted(m[0] for pack, _ in out["mentions"] for m in pack) == ["3:0", "3:1", "3:2",
                                                                      "3:3"]


@pytest.mark.parametrize("buckets,gathered,build", [
    (1, False, None), (7, False, None), (1024, False, None), (7, True, "one"),
    (1024, True, "one"), (7, True, "buckets"), (7, True, "pool")])
def test_merge_by_buckets_gives_the_same_kb_whatever_their_number(buckets, gathered, build,
                                                                   monkeypatch, tmp_path):
  """Every join of the merge is by bucket of keys: the KB is the same with 1, 7 or 1,024
  buckets, a base key meets its qualified siblings for the WP:DAB rule (entity_bucket: by
  the key without its qualifiers), and redirect edges, anchors and aliases reach keys in
  other buckets; and with the redirects resolved in one step (gathered), its entities built
  in one call ('one': ResolveAndBuildEntitiesFn below ONE_BUILD_VALUES) or by entity bucket,
  in the step ('buckets') or in its worker processes ('pool')."""
  monkeypatch.setattr(kb_merge, "JOIN_BUCKETS", buckets)
  kwargs = {}
  if build in ("buckets", "pool"):
    monkeypatch.setattr(kb_merge.ResolveAndBuildEntitiesFn, "ONE_BUILD_VALUES", 0)
    kwargs = {"processes": 2, "start_method": "fork"}
  if build == "pool":
    monkeypatch.setattr(kb_merge.BuildEntitiesFn, "POOL_VALUES", 1)
  out = _merge({
      "articles": [("Zug", (2, "Zug is a town.", ())), ("Paris", (3, "Paris is a city.", ()))],
      "redirects": [("Zoug", "Zug")],
      "titles": ["Georgia", "Lincoln (band)", "Afp", "Persian language", "Farsi", "Mercury",
                 "Paris (disambiguation)"],
      "title_redirects": [("Farsi", "Persian language"), ("Parsi", "Farsi")],
      "descriptions": [("Mercury (planet)", "The smallest planet.")],
      "mentions": [("Georgia (country)", _mention("4:0", "Georgia")),
                   ("Lincoln (band) (album)", _mention("4:1", "the album")),
                   ("Agence France-Presse", _mention("4:2", "AFP")),
                   ("Parsi", _mention("4:3", "Parsi")), ("Zoug", _mention("4:4", "Zoug"))],
  }, tmp_path, gathered=gathered, **kwargs)
  entities = _entities(out)
  # Not entities: 'Georgia', 'Mercury': title-only bases with qualified siblings and no
  # '(disambiguation)' page; 'Afp': anchor text of another entity; 'Paris (disambiguation)':
  # a disambiguation page by its title. 'Lincoln (band)' is kept: the rule is for a base
  # without qualifier.
  assert sorted(entities) == ["Agence France-Presse", "Georgia (country)", "Lincoln (band)",
                              "Lincoln (band) (album)", "Mercury (planet)", "Paris",
                              "Persian language", "Zug"]
  assert entities["Persian language"].aliases == ("Farsi", "Parsi")
  assert entities["Zug"].aliases == ("Zoug",)
  assert sorted((m[0], e.title) for pack, e in out["mentions"] for m in pack) == [
      ("4:0", "Georgia (country)"), ("4:1", "Lincoln (band) (album)"),
      ("4:2", "Agence France-Presse"), ("4:3", "Persian language"), ("4:4", "Zug")]
  assert sorted(out["redirects"]) == [("Farsi", "Persian language"),
                                      ("Parsi", "Persian language"), ("Zoug", "Zug")]


def test_groups_by_length_are_the_bucket_groups_a_length_at_a_time():
  packs = [[("zug", 1), ("ab", 2), ("zoug", 3)], [("ab", 4), ("zug", 5), ("cd", 6)]]
  parts = list(kb_merge.groups_by_length(packs))
  assert [sorted({len(k) for k in part}) for part in parts] == [[2], [3], [4]]
  merged = {k: v for part in parts for k, v in part.items()}
  assert merged == kb_merge.group_bucket(packs) == {"zug": [1, 5], "ab": [2, 4], "zoug": [3],
                                                    "cd": [6]}


def test_split_qualifier_without_a_closing_parenthesis_at_the_end_is_the_match():
  """split_qualifier tells most keys (no ')' in their last two characters) without the
  regular expression: the same split as the match, a trailing newline included."""
  keys = ["georgia", "georgia (country)", "georgia (country)\n", "georgia (country) x",
          "a (b) (c)", "(c)", " (c)", "x (c))", "x ()", "x (a(b))", "", ")", "x (c)\n\n",
          "lincoln (band) (album)", "x (c) ", "x\n(c)"]
  for key in keys:
    match = kb_merge._QUALIFIED.match(key)
    assert kb_merge.split_qualifier(key) == (
        (match.group(1), match.group(2)) if match else (key, None)), key
  assert kb_merge.split_qualifier("georgia (country)\n") == ("georgia", "country")
  assert kb_merge.split_qualifier("georgia (country) x") == ("georgia (country) x", None)


def test_bucket_of_a_key_is_its_roots():
  assert kb_merge.root_key("lincoln (band) (album)") == "lincoln"
  assert kb_merge.root_key("georgia") == "georgia"
  assert (kb_merge.entity_bucket("lincoln (band) (album)") == kb_merge.entity_bucket(
      "lincoln (band)") == kb_merge.key_bucket("lincoln"))
  assert kb_merge.key_bucket("lincoln") == zlib.crc32(b"lincoln") % kb_merge.JOIN_BUCKETS


def test_unknown_merge_input_is_an_error():
  with pytest.raises(ValueError, match="unknown input.*'title'"):
    with test_pipeline.TestPipeline() as p:
      _ = {"title": p | beam.Create(["Zug"])} | kb_merge.MergeKnowledgeBase()


def test_an_entitys_mentions_leave_the_merge_in_bounded_packs(monkeypatch):
  monkeypatch.setattr(kb_merge, "MENTION_PACK_VALUES", 3)
  mentions = [_mention(f"5:{i}", "Zug") for i in range(7)]
  values = [(kb_merge.ARTICLE, "Zug", (5, "Zug is a town.", ())),
            (kb_merge.MENTION, "Zug", mentions[:4]), (kb_merge.MENTION, "Zug", mentions[4:])]
  out = list(kb_merge.build_entity("zug", values))
  assert out[0].title == "Zug"
  packs = [o.value for o in out[1:]]
  assert [len(pack) for pack, _ in packs] == [3, 3, 1]
  assert [m for pack, _ in packs for m in pack] == mentions  # all of them, in order
  assert all(entity is out[0] for _, entity in packs)
  monkeypatch.setattr(kb_merge, "MENTION_PACK_BYTES", 1)  # every mention over the bytes bound
  packs = [o.value for o in list(kb_merge.build_entity("zug", values))[1:]]
  assert [len(pack) for pack, _ in packs] == [1] * 7


def _packs_mention_by_mention(payloads, max_values, max_bytes):
  """The packs of the rule: a pack ends after the mention that makes it hold max_values
  mentions or max_bytes bytes (kb_merge.payload_size)."""
  packs, pack, size = [], [], 0
  for mention in payloads:
    pack.append(mention)
    size += kb_merge.payload_size(mention)
    if len(pack) >= max_values or size >= max_bytes:
      packs.append(pack)
      pack, size = [], 0
  return packs + ([pack] if pack else [])


@pytest.mark.parametrize("max_bytes", [1, 60, 61, 120, 1 << 20])
def test_mention_packs_of_a_list_are_those_of_the_rule(max_bytes, monkeypatch):
  """_payload_packs of a list (one sum of sizes for an entity's single pack) cuts the packs
  where the rule does: by count, or after the mention that reaches the bytes bound (the last
  mention's size never cuts a pack); 0 to 5 mentions of 30 bytes each."""
  monkeypatch.setattr(kb_merge, "MENTION_PACK_VALUES", 4)
  monkeypatch.setattr(kb_merge, "MENTION_PACK_BYTES", max_bytes)
  mentions = [(f"m:{i}", "Page", "Span", b"x" * 19) for i in range(5)]  # 3 + 4 + 4 + 19
  assert all(kb_merge.payload_size(m) == 30 for m in mentions)
  for n in range(6):
    want = _packs_mention_by_mention(mentions[:n], 4, max_bytes)
    assert list(kb_merge._payload_packs(mentions[:n])) == want, n
    assert list(kb_merge._payload_packs(iter(mentions[:n]))) == want, n
  assert [len(p) for p in kb_merge._payload_packs(mentions[:2])] == (
      [1, 1] if max_bytes <= 30 else [2])


def test_keys_only_links_name_give_what_the_general_rules_give(monkeypatch):
  """Issue 17: build_entity's path for keys whose values are all mentions (most keys) gives
  the entity, packs and counts of the general path: one or several spellings (the most
  frequent wins, then the smallest), ties, empty packs, packs cut by MENTION_PACK_VALUES."""
  monkeypatch.setattr(kb_merge, "MENTION_PACK_VALUES", 3)

  def mentions(spelling, n):
    return (kb_merge.MENTION, spelling, [_mention(f"{spelling}:{i}", spelling) for i in range(n)])

  cases = [[mentions("Zug", 1)], [mentions("Zug", 4)], [mentions("Zug", 0)],
           [mentions("Zug", 0), mentions("ZUG", 0)],
           [mentions("Zug", 2), mentions("ZUG", 2)], [mentions("ZUG", 2), mentions("Zug", 2)],
           [mentions("Zug", 1), mentions("ZUG", 3), mentions("Zug", 1), mentions("zug", 0)],
           [mentions("Zug", 2), mentions("Zug", 1)]]
  def plain(outputs):
    return [(o.tag, o.value) if isinstance(o, beam.pvalue.TaggedOutput) else o
            for o in outputs]

  for values in cases:
    with kb_merge.collected_counts() as fast_counts:
      fast = plain(kb_merge.build_entity("zug", values))
    with kb_merge.collected_counts() as general_counts:
      general = plain(kb_merge._merged_entity("zug", values))  # pylint: disable=protected-access
    assert fast == general, values
    assert fast_counts == general_counts, values
  assert kb_merge.build_entity("zug", cases[4]).__name__ == "_link_target_entity"
  # A key ending in ')' may be a disambiguation title: the general rules decide.
  values = [mentions("Zug (disambiguation)", 2)]
  assert list(kb_merge.build_entity("zug (disambiguation)", values)) == []


def test_a_buckets_mention_packs_leave_in_lists(monkeypatch):
  """Issue 17: build_bucket sends its entities' mention packs in lists (one Beam element per
  list, not per entity), a list once its packs hold MENTION_PACK_VALUES mentions; every
  mention once, in key order."""
  monkeypatch.setattr(kb_merge, "MENTION_PACK_VALUES", 3)
  pairs = [(kb_merge.titles.match_key(t), (kb_merge.MENTION, t, [_mention(f"{t}:{i}", t)
                                                                  for i in range(n)]))
           for t, n in (("Zug", 1), ("Bern", 2), ("Chur", 4), ("Aarau", 1))]
  out = list(kb_merge.build_bucket((0, [pairs]), title_only_rules=False))
  lists = [o.value for o in out if getattr(o, "tag", None) == kb_merge.ENTITY_MENTIONS]
  # Aarau (1) + Bern (2) fill the first list; Chur's 4 mentions are a pack of 3 and one of 1.
  assert [[(e.title, len(pack)) for pack, e in packs] for packs in lists] == [
      [("Aarau", 1), ("Bern", 2)], [("Chur", 3)], [("Chur", 1), ("Zug", 1)]]
  assert [m[0] for packs in lists for pack, _ in packs for m in pack] == [
      "Aarau:0", "Bern:0", "Bern:1", "Chur:0", "Chur:1", "Chur:2", "Chur:3", "Zug:0"]


class _FakeCounter:

  def __init__(self, calls, name):
    self._calls, self._name = calls, name

  def inc(self, n):
    self._calls.append((self._name, n))


def test_counts_of_a_bucket_reach_beam_once_per_name(monkeypatch):
  # Inside summing_counts the merge's counts are summed and reach each Beam counter once, at
  # the end of the outermost block (a block inside it, as a fused step's, adds to its sums).
  calls = []
  names = ("entities", "entities_source_title_list", "entities_title_from_title_list",
           "entities_without_page", "entities_with_spellings_merged",
           "redirects_to_missing_page")
  monkeypatch.setattr(kb_merge, "_COUNTERS", {n: _FakeCounter(calls, n) for n in names})
  listed = [(kb_merge.LISTED, "Zug", None), (kb_merge.ALIAS, "Zug (town)", None)]
  with kb_merge.summing_counts():
    for key in ("zug", "baar", "cham"):
      entity = list(kb_merge.build_entity(key, listed))[0]
      assert entity.aliases == ("Zug (town)",)
    with kb_merge.summing_counts():
      list(kb_merge.build_entity("alias only", [(kb_merge.ALIAS, "A", None)]))
      list(kb_merge.build_entity("two", [(kb_merge.LISTED, "Two", None),
                                         (kb_merge.LISTED, "two", None)]))
    assert not calls
  assert sorted(calls) == [("entities", 4), ("entities_source_title_list", 4),
                           ("entities_title_from_title_list", 4),
                           ("entities_with_spellings_merged", 1),
                           ("entities_without_page", 4), ("redirects_to_missing_page", 1)]
  calls.clear()
  list(kb_merge.build_entity("zug", listed))  # outside a block: at once, one by one
  assert sorted(calls) == [("entities", 1), ("entities_source_title_list", 1),
                           ("entities_title_from_title_list", 1),
                           ("entities_without_page", 1)]


def test_disambiguation_qualifier_is_read_from_the_key():
  values = [(kb_merge.LISTED, "Zug (disambiguation)", None)]
  assert not list(kb_merge.build_entity("zug (disambiguation)", values))
  assert list(kb_merge.build_entity("zug (town)", values))
  assert list(kb_merge.build_entity("zug (disambiguation) x", values))


def test_title_list_parsing_reports_bad_lines():
  from beam_pipelines.parsers import title_lists  # pylint: disable=g-import-not-at-top
  assert title_lists.parse_title_line("jurgen_klinsmann\n") == "Jurgen klinsmann"
  assert title_lists.parse_title_line("page_title") is None  # Wikimedia's header line
  assert title_lists.parse_title_line("  \n") is None
  with pytest.raises(ValueError, match="redirect list"):
    title_lists.parse_title_line("farsi\tpersian_language")
  assert title_lists.parse_redirect_line("farsi\tpersian_language") == ("Farsi",
                                                                        "Persian language")
  with pytest.raises(ValueError, match="1 field"):
    title_lists.parse_redirect_line("farsi persian_language")
  with pytest.raises(ValueError, match="normalizes to nothing"):
    title_lists.parse_redirect_line("farsi\t_")



@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
def test_a_list_file_is_read_in_blocks_with_its_bad_lines_named_and_counted(
    tmp_path, monkeypatch, caplog, suffix):
  from beam_pipelines.parsers import title_lists  # pylint: disable=g-import-not-at-top
  data = ("page_title\nJürgen_Klinsmann\na\tb\nOre_River\r\n\n".encode("utf-8")
          + b"Bad_\xff_bytes\n" + "".join(f"T{i}\n" for i in range(5)).encode("utf-8")
          + b"Last_title")  # no newline at the end
  path = tmp_path / ("titles.txt" + suffix)
  path.write_bytes({"": bytes, ".gz": gzip.compress, ".bz2": bz2.compress}[suffix](data))
  counts = {}
  monkeypatch.setattr(kb_merge, "_count",
                      lambda name, n=1: counts.__setitem__(name, counts.get(name, 0) + n))
  fn = kb_merge.ReadListFileFn(title_lists.parse_title_line, "titles_listed", max_values=3)
  fn.READ_BYTES = 7  # lines cross the blocks read
  packs = list(fn.process(str(path)))
  assert packs == [["Jürgen Klinsmann", "Ore River", "T0"], ["T1", "T2", "T3"],
                   ["T4", "Last title"]]
  assert counts == {"titles_listed_read": 8, "titles_listed_invalid": 2}
  assert f"Skipped line 3 of {path}: a title line holds a tab" in caplog.text
  assert f"Skipped line 6 of {path}: not UTF-8" in caplog.text

_COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_compressed_list_cut_short_or_corrupt_fails_naming_the_file(tmp_path, suffix):
  from beam_pipelines.parsers import title_lists  # pylint: disable=g-import-not-at-top
  data = "".join(f"Title_{i}_{i * 7919 % 1000003}\n" for i in range(20000)).encode("utf-8")
  whole = _COMPRESS[suffix](data)
  fn = kb_merge.ReadListFileFn(title_lists.parse_title_line, "titles_listed")
  fn.READ_BYTES = 4096
  # Two members (gzip) or streams (bz2, xz) one after the other are one list, read whole.
  both = tmp_path / ("both.txt" + suffix)
  both.write_bytes(whole + whole)
  assert sum(len(pack) for pack in fn.process(str(both))) == 40000
  cut = tmp_path / ("cut.txt" + suffix)
  cut.write_bytes(whole[:len(whole) // 2])
  with pytest.raises(ValueError, match=re.escape(str(cut)) + ": its compressed data is truncated"):
    list(fn.process(str(cut)))
  corrupt = bytearray(whole)
  corrupt[len(whole) // 2] ^= 0xFF
  bad = tmp_path / ("corrupt.txt" + suffix)
  bad.write_bytes(bytes(corrupt))
  with pytest.raises(ValueError, match=re.escape(str(bad))):
    list(fn.process(str(bad)))


def test_an_extraction_with_a_list_cut_short_fails_and_publishes_nothing(tmp_path):
  data = "".join(f"Title_{i}\n" for i in range(3000)).encode("utf-8")
  whole = gzip.compress(data)
  (tmp_path / "titles.txt.gz").write_bytes(whole[:len(whole) // 2])
  out = tmp_path / "extract"
  with pytest.raises(ValueError, match="titles.txt.gz: its compressed data is truncated"):
    extraction.run([samples.gensim_sample_path()], str(out),
                   title_lists=[str(tmp_path / "titles.txt.gz")], parse_processes=1)
  assert not out.exists()  # the run made the directory, and removed it on failing


@pytest.fixture(scope="module")
def full_kb_sample(tmp_path_factory):
  """The first 3,000 titles and redirects of the real all-Wikipedia lists (gz and plain), the
  gensim dump sample, and the extraction of them all."""
  root = tmp_path_factory.mktemp("lists")
  kb = testutil.shared_data("kb")
  with gzip.open(os.path.join(kb, "enwiki-titles-lowercase.txt.gz"), "rt",
                 encoding="utf-8") as f:
    listed = list(itertools.islice(f, 3000))
  with gzip.open(os.path.join(kb, "enwiki-redirects-lowercase.tsv.gz"), "rt",
                 encoding="utf-8") as f:
    redirects = list(itertools.islice(f, 3000))
  with gzip.open(root / "titles.txt.gz", "wt", encoding="utf-8") as f:
    f.write("page_title\n" + "".join(listed) + "a\tb\n")  # header and one bad line
  with open(root / "redirects.tsv", "w", encoding="utf-8") as f:
    f.write("".join(redirects))
  out = str(root / "extract")
  stats = extraction.run([samples.gensim_sample_path()], out, heldout_fraction=0.1,
                         title_lists=[str(root / "titles.txt.gz")],
                         redirect_lists=[str(root / "redirects.tsv")])
  return out, stats, listed, redirects


def _read_entities(extract_dir):
  entities = {}
  for path in tf.io.gfile.glob(os.path.join(extract_dir, schema.ENTITIES_PREFIX + "-*")):
    for record in tf.data.TFRecordDataset(path):
      f = tf.train.Example.FromString(record.numpy()).features.feature
      values = lambda name: [v.decode() for v in f[name].bytes_list.value]
      entities[values(schema.ENTITY_TITLE)[0]] = (values(schema.ENTITY_SOURCE),
                                                  values(schema.ENTITY_ALIASES))
  return entities


def test_extraction_with_real_title_and_redirect_lists(full_kb_sample):
  out, stats, listed, redirects = full_kb_sample
  entities = _read_entities(out)
  assert stats["titles_listed_read"] == 3000 and stats["titles_listed_invalid"] == 1
  assert stats["title_list_redirects_read"] == 3000
  title_only = [t for t, (sources, _) in entities.items() if sources == ["title_list"]]
  assert stats["entities_source_title_list"] >= len(title_only) > 2000
  # Every listed title is an entity, a redirect, a disambiguation-like entry or merged into
  # the dump's entity with the same key; the counters account for each.
  from dense_entity.kb import titles  # pylint: disable=g-import-not-at-top
  listed_keys = {titles.match_key(t.rstrip("\n")) for t in listed}
  entity_keys = {titles.match_key(t) for t in entities}
  redirect_keys = {titles.match_key(r.split("\t")[0]) for r in redirects}
  dropped = sum(v for k, v in stats.items() if k.startswith("not_entities_title_list_"))
  unexplained = listed_keys - entity_keys - redirect_keys
  assert len(unexplained) <= dropped + stats.get("titles_listed_dropped_other_namespace", 0)
  # Redirects of the list are aliases (never entities) and resolve in redirects.tsv.
  assert not redirect_keys & entity_keys - {titles.match_key(t) for t, (s, _) in
                                             entities.items() if "page" in s}
  with open(os.path.join(out, schema.REDIRECTS_FILE), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f]
  assert rows and all(target in entities for _, target in rows)
  with open(os.path.join(out, schema.MANIFEST_FILE), encoding="utf-8") as f:
    manifest = json.load(f)
  assert manifest["counts"]["entities"] == len(entities)
  assert manifest["title_lists"] and manifest["redirect_lists"]
