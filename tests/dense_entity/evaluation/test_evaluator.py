"""evaluate: the seen / unseen and ambiguous-span splits of held-out recall."""

import os
import types

from dense_entity.evaluation import evaluator
from dense_entity.evaluation import reports
from dense_entity.kb import schema
from dense_entity.kb import titles


def test_split_by_training_gold(tmp_path):
  # Training anchors link to 'Ore River' and to 'Ore Stream', a redirect to 'Ore River';
  # 'Port Alder' is never a training gold.
  with open(os.path.join(tmp_path, schema.ALIAS_COUNTS_FILE), "w", encoding="utf-8") as f:
    f.write("ore river\tOre River\t3\nthe stream\tOre_Stream\t1\n")
  redirects = {"Ore Stream": "Ore River"}
  assert evaluator.training_entities(str(tmp_path), redirects) == {"Ore River"}
  kb_titles = {"Ore River", "Port Alder", "Birch Cove"}
  retrievers = types.SimpleNamespace(resolver=titles.TitleResolver(kb_titles, redirects),
                                     kb_titles=kb_titles)
  gold = ["Ore River", "Port Alder", "ore_Stream", "Port Alder"]
  ranked = [["Ore River"], ["Birch Cove", "Port Alder"], ["Birch Cove"], ["Port Alder"]]
  rankings = {name: ranked for name in reports.SYSTEMS}
  split = evaluator.split_by_training_gold(gold, rankings, retrievers, str(tmp_path))
  seen, unseen = split["seen"]["DEER"], split["unseen"]["DEER"]
  assert seen["num_in_kb"] == 2 and unseen["num_in_kb"] == 2
  assert seen["recall@1"] == 0.5  # 'Ore River' found, 'ore_Stream' (= Ore River) not
  assert unseen["recall@1"] == 0.5 and unseen["recall@10"] == 1.0


def test_split_ambiguous_spans_keeps_aliases_of_several_entities_and_blanks_contexts():
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  table = baselines.AliasTable({"georgia": {"Georgia (country)": 4, "Georgia (U.S. state)": 2},
                                "ore river": {"Ore River": 3}})
  seen_by_deer = []

  def deer(features):
    seen_by_deer.extend(features)
    # Without context the more frequent sense comes first.
    return [["Georgia (country)", "Georgia (U.S. state)"] for _ in features], None

  kb_titles = {"Georgia (country)", "Georgia (U.S. state)", "Ore River", "Georgia"}
  retrievers = types.SimpleNamespace(resolver=titles.TitleResolver(kb_titles, {}),
                                     alias_table=table, deer=deer, kb_titles=kb_titles)
  def mention(span, sentence):
    return {schema.MENTION_SPAN: span, schema.MENTION_LEFT: "in", schema.MENTION_RIGHT: "x",
            schema.MENTION_SENTENCE: sentence}
  features = [mention("Georgia", "Atlanta is in [MASK]"), mention("georgia", "Tbilisi, [MASK]"),
              mention("Ore River", "the [MASK]"), mention("Georgia", "[MASK] O'Keeffe")]
  # The last gold is not among the alias's entities: the alias table cannot be right, so the
  # mention is not counted as one the context has to decide.
  gold = ["Georgia (U.S. state)", "Georgia (country)", "Ore River", "Georgia"]
  ranked = [["Georgia (U.S. state)"], ["Georgia (country)"], ["Ore River"], ["Georgia"]]
  rankings = {name: ranked for name in reports.SYSTEMS}
  out = evaluator.split_ambiguous_spans(features, gold, rankings, retrievers)
  assert out["num_mentions"] == 2
  assert out["systems"]["DEER"]["recall@1"] == 1.0
  assert out["systems"]["DEER (no context)"]["recall@1"] == 0.5
  assert out["systems"]["DEER (no context)"]["recall@10"] == 1.0
  assert [f[schema.MENTION_SENTENCE] for f in seen_by_deer] == ["", ""]
  assert {f[schema.MENTION_SPAN] for f in seen_by_deer} == {"Georgia", "georgia"}
  assert all(f[schema.MENTION_LEFT] == f[schema.MENTION_RIGHT] == "" for f in seen_by_deer)
