"""evaluate: the seen / unseen split of held-out recall."""

import os
import types

from dense_entity import evaluate
from dense_entity import schema


def test_split_by_training_gold(tmp_path):
  # Training anchors link to 'Ore River' and to 'Ore Stream', a redirect to 'Ore River';
  # 'Port Alder' is never a training gold.
  with open(os.path.join(tmp_path, schema.ALIAS_COUNTS_FILE), "w", encoding="utf-8") as f:
    f.write("ore river\tOre River\t3\nthe stream\tOre_Stream\t1\n")
  redirects = {"Ore Stream": "Ore River"}
  assert evaluate.training_entities(str(tmp_path), redirects) == {"Ore River"}
  retrievers = types.SimpleNamespace(redirects=redirects,
                                     kb_titles={"Ore River", "Port Alder", "Birch Cove"})
  gold = ["Ore River", "Port Alder", "ore_Stream", "Port Alder"]
  ranked = [["Ore River"], ["Birch Cove", "Port Alder"], ["Birch Cove"], ["Port Alder"]]
  rankings = {name: ranked for name in evaluate.SYSTEMS}
  split = evaluate.split_by_training_gold(gold, rankings, retrievers, str(tmp_path))
  seen, unseen = split["seen"]["DEER"], split["unseen"]["DEER"]
  assert seen["num_in_kb"] == 2 and unseen["num_in_kb"] == 2
  assert seen["recall@1"] == 0.5  # 'Ore River' found, 'ore_Stream' (= Ore River) not
  assert unseen["recall@1"] == 0.5 and unseen["recall@10"] == 1.0
