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


def test_negatives_are_counted_by_how_often_training_anchors_link_to_them():
  import collections  # pylint: disable=g-import-not-at-top
  gold_counts = collections.Counter({"united states": 2057, "georgia (country)": 3})
  pairs = [
      ("m1", "American", "Americans", "United States", "A country in North America.", 10),
      ("m2", "U.S.", "United States Army", "United States", "A country in North America.", 10),
      ("m3", "Georgia", "Georgia (U.S. state)", "Georgia (country)", "A country.", 2),
      ("m4", "Farsi", "Persian language", "Farsi District", "", 10),
      ("m4", "Farsi", "Persian language", "Kruszyny-Rumunki", "", 10),
  ]
  kinds = mining_pairs.negative_gold_frequencies(pairs, gold_counts)
  described, title_only = kinds["described"], kinds["title-only"]
  assert described["pairs"] == 3 and described["distinct negatives"] == 2
  assert described["negative is a training gold"] == 1.0
  assert described["mean anchors"] == (2057 * 2 + 3) / 3 and described["median anchors"] == 2057
  assert described["negative has >= 100 anchors"] == 2 / 3
  assert described["top"][0] == ("United States", 2, 2057)
  assert title_only["pairs"] == 2 and title_only["negative is a training gold"] == 0.0
  assert title_only["mean anchors"] == 0.0
