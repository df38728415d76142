"""Tests for dense_entity.metrics: fair recall@k with redirects, NIL and missing gold."""

import pytest

from dense_entity.evaluation import metrics
from dense_entity.kb import titles

# A two-hop chain and a two-title loop, as normalized titles.
REDIRECTS = {
    "Silver Owls": "The Silver Owls",
    "Owls (band)": "Silver Owls",
    "Loop A": "Loop B",
    "Loop B": "Loop A",
}


def test_resolve_title_normalizes_then_follows_chains():
  assert metrics.resolve_title("Silver_Owls", REDIRECTS) == "The Silver Owls"
  assert metrics.resolve_title("Owls_(band)", REDIRECTS) == "The Silver Owls"
  assert metrics.resolve_title("the Silver Owls", REDIRECTS) == "The Silver Owls"
  assert metrics.resolve_title("Kestrel%27s_Rock", {}) == "Kestrel's Rock"


def test_resolve_title_reports_loops_and_empty_titles_as_none():
  assert metrics.resolve_title("Loop A", REDIRECTS) is None
  assert metrics.resolve_title("Loop_B", REDIRECTS) is None
  assert metrics.resolve_title("", REDIRECTS) is None
  assert metrics.resolve_title("#Section", REDIRECTS) is None
  # A chain longer than the hop limit ends without hanging.
  chain = {f"T{i}": f"T{i + 1}" for i in range(3 * titles.MAX_REDIRECT_HOPS)}
  assert metrics.resolve_title("T0", chain) is None


def test_bugbank_ev01_gold_and_predictions_resolved_alike():
  # Gold written with an underscore and through a two-hop redirect chain both reach
  # 'The Silver Owls', the title the system predicts; 'Loop A' loops and cannot be scored.
  gold = ["Silver_Owls", "Owls (band)", "Loop A"]
  rankings = [["The Silver Owls"], ["The Silver Owls"], ["Loop B"]]
  result = metrics.score_rankings(rankings, gold, {"The Silver Owls"}, REDIRECTS, ks=(1,))
  assert result["num_unresolvable_gold"] == 1
  assert result["num_in_kb"] == 2
  assert result["recall@1"] == 1.0  # 2 hits over the 2 in-KB mentions.
  assert result["num_mentions"] == 3
  assert result["overall_recall@1"] == pytest.approx(2 / 3)
  assert result["num_gold_missing_from_kb"] == 0
  assert result["num_nil"] == 0


def test_bugbank_ev02_gold_missing_from_kb_is_counted_not_dropped():
  kb = {"Ore River", "Port Alder"}
  gold = ["Ore River", "Port Alder", "Birch Cove"]
  rankings = [
      ["Ore River", "Port Alder", "Ore", "River", "Alder"],
      ["Ore River", "Port Alder", "Ore", "River", "Alder"],
      # Even predicting the missing title itself is a miss: it is not a KB entity.
      ["Birch Cove", "Ore River", "Port Alder", "Ore", "River"],
  ]
  result = metrics.score_rankings(rankings, gold, kb, {}, ks=(1, 5))
  assert result["num_gold_missing_from_kb"] == 1
  assert result["num_in_kb"] == 2
  assert result["num_mentions"] == 3
  assert result["recall@1"] == 0.5  # Over the 2 in-KB mentions.
  assert result["recall@5"] == 1.0
  assert result["overall_recall@1"] == pytest.approx(1 / 3)  # Over all 3 mentions.
  assert result["overall_recall@5"] == pytest.approx(2 / 3)


def test_nil_gold_is_reported_apart():
  gold = ["--NME--", "NIL", "", "Ore_River"]
  rankings = [["Ore River"]] * 4
  result = metrics.score_rankings(rankings, gold, {"Ore River"}, {})
  assert result["num_nil"] == 3
  assert result["num_mentions"] == 1
  assert result["recall@1"] == 1.0
  assert result["overall_recall@100"] == 1.0


def test_no_mentions_gives_zero_recall_without_dividing_by_zero():
  result = metrics.score_rankings([], [], set(), {})
  assert result == {
      "num_mentions": 0, "num_in_kb": 0, "num_gold_missing_from_kb": 0, "num_nil": 0,
      "num_unresolvable_gold": 0, "recall@1": 0.0, "recall@10": 0.0, "recall@100": 0.0,
      "overall_recall@1": 0.0, "overall_recall@10": 0.0, "overall_recall@100": 0.0,
  }
  only_nil = metrics.score_rankings([["A"]], ["--NME--"], {"A"}, {})
  assert only_nil["recall@1"] == 0.0 and only_nil["num_nil"] == 1
  assert metrics.recall_curve([], [], set(), {}, max_k=3) == [0.0, 0.0, 0.0]


def test_predictions_deduplicated_after_resolution():
  # 'Silver Owls' and 'The Silver Owls' are one entity: the gold is the 2nd distinct one.
  rankings = [["Silver Owls", "The_Silver Owls", "Ore River"]]
  result = metrics.score_rankings(rankings, ["Ore River"], {"Ore River", "The Silver Owls"},
                                  REDIRECTS, ks=(1, 2))
  assert result["recall@1"] == 0.0
  assert result["recall@2"] == 1.0


def test_unresolvable_predictions_are_skipped():
  rankings = [["Loop A", "", "Ore River"]]
  result = metrics.score_rankings(rankings, ["Ore River"], {"Ore River"}, REDIRECTS, ks=(1,))
  assert result["recall@1"] == 1.0


def test_recall_curve_hand_computed():
  kb = {"A", "B", "C", "D"}
  gold = ["A", "B", "C", "--NME--", "Zed"]
  rankings = [["A", "B"], ["C", "D", "B"], ["A", "B", "D"], ["A"], ["Zed"]]
  # In-KB gold ranks: 0, 2, absent -> 3 in-KB mentions.
  curve = metrics.recall_curve(rankings, gold, kb, {}, max_k=4)
  assert curve == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])
  scores = metrics.score_rankings(rankings, gold, kb, {}, ks=(1, 2, 3, 4))
  assert [scores[f"recall@{k}"] for k in (1, 2, 3, 4)] == pytest.approx(curve)
  assert len(metrics.recall_curve(rankings, gold, kb, {})) == 100


def test_bad_arguments_raise_value_error():
  with pytest.raises(ValueError, match="rankings"):
    metrics.score_rankings([["A"]], ["A", "B"], {"A"}, {})
  with pytest.raises(ValueError, match="positive"):
    metrics.score_rankings([["A"]], ["A"], {"A"}, {}, ks=(0,))
  with pytest.raises(ValueError, match="string"):
    metrics.score_rankings(["A"], ["A"], {"A"}, {})
  with pytest.raises(ValueError, match="max_k"):
    metrics.recall_curve([["A"]], ["A"], {"A"}, {}, max_k=0)
