"""benchmarks.mining_pairs: the groups and properties of mined pairs."""

from benchmarks import mining_pairs


def test_pairs_are_grouped_by_whether_the_gold_was_found():
  anchors = {"georgia": {"georgia (country)", "georgia (u.s. state)"}}
  pairs = [
      # 'Georgia' (the state) ranked 3rd: the country above it is a namesake linked by the span.
      ("m1", "Georgia", "Georgia (U.S. state)", "Georgia (country)", "A country.", 2),
      ("m1", "Georgia", "Georgia (U.S. state)", "Georgia", "", 2),
      # 'Farsi' not among the 10: a near-namesake and an unrelated title-only entity.
      ("m2", "Farsi", "Persian language", "Farsi District", "", 10),
      ("m2", "Farsi", "Persian language", "Kruszyny-Rumunki", "", 10),
  ]
  groups = mining_pairs.pair_groups(pairs, anchors, k=10)
  found, missed = groups["found"], groups["not found"]
  assert found["mentions"] == 1 and found["pairs"] == 2
  assert found["span = negative"] == 1  # 'Georgia'
  assert found["negative anchored by span"] == 1  # 'Georgia (country)'
  assert found["negative words in gold"] == 1  # {'georgia'} <= {'georgia', 'u.s.', 'state'}
  assert found["title-only negative"] == 1
  assert missed["mentions"] == 1 and missed["pairs"] == 2
  assert missed["title-only negative"] == 2
  assert missed.get("span = negative", 0) == 0 and missed.get("span = gold", 0) == 0
