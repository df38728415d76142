"""NIL calibration on hand-made scores: fitting, threshold, NIL metrics, reliability, artifact."""

import json

import numpy as np
import pytest

from dense_entity.evaluation import metrics
from dense_entity.evaluation import nil_calibration as nc
from dense_entity.retrieval import nil as nil_lib


def _rows(top1, margin):
  """Ranked score rows [top1, top1 - margin] (the features are then exactly top1, margin)."""
  return [[t, t - m] for t, m in zip(top1, margin)]


def test_score_features_top1_and_margin_with_floors():
  x = nil_lib.score_features([[0.8, 0.5, 0.1], [0.3], [0.4, -np.inf]])
  np.testing.assert_allclose(x, [[0.8, 0.3], [0.3, 1.3], [0.4, 1.4]])
  with pytest.raises(ValueError, match="mention 1: no scores"):
    nil_lib.score_features([[0.5, 0.1], []])


def test_separable_scores_give_probabilities_near_0_and_1():
  top1 = [0.20, 0.25, 0.30, 0.35, 0.65, 0.70, 0.75, 0.80]
  right = [0, 0, 0, 0, 1, 1, 1, 1]
  scores = _rows(top1, [0.1] * 8)
  calibrator = nc.fit_calibrator(scores, right, [1 - r for r in right])
  p = calibrator.probability(scores)
  assert np.all(p[4:] > 0.9) and np.all(p[:4] < 0.1)
  # The threshold separates them: every mention right (wrong top-1s are all NIL gold here).
  assert p[3] < calibrator.threshold < p[4]
  assert calibrator.info["dev_metrics"]["accuracy"] == 1.0
  assert calibrator.info["dev_metrics"]["nil_f1"] == 1.0


def test_uninformative_scores_give_probability_one_half():
  # The same scores are right half of the time; a feature that does not predict the outcome.
  scores = _rows([0.5, 0.5, 0.6, 0.6], [0.1, 0.1, 0.1, 0.1])
  calibrator = nc.fit_calibrator(scores, [0, 1, 0, 1], [1, 0, 1, 0])
  np.testing.assert_allclose(calibrator.probability(scores), 0.5, atol=1e-6)
  np.testing.assert_allclose(calibrator.weights, 0.0, atol=1e-6)


def test_calibrated_probability_matches_the_observed_rate():
  # 10 mentions at one score, 3 of them right: P = 0.3 (nearly: the L2 penalty is tiny).
  scores = _rows([0.4] * 10 + [0.9] * 10, [0.05] * 20)
  right = [1, 1, 1] + [0] * 7 + [1] * 8 + [0] * 2
  p = nc.fit_calibrator(scores, right, [1 - r for r in right], l2=1e-6).probability(scores)
  np.testing.assert_allclose(p[:10], 0.3, atol=1e-3)
  np.testing.assert_allclose(p[10:], 0.8, atol=1e-3)


def test_probability_increases_with_top1_score_and_margin():
  rng = np.random.default_rng(0)
  top1 = rng.uniform(0.2, 0.9, 400)
  margin = rng.uniform(0.0, 0.3, 400)
  right = (rng.uniform(size=400) < nil_lib.sigmoid(8 * top1 + 10 * margin - 6)).astype(int)
  calibrator = nc.fit_calibrator(_rows(top1, margin), right, 1 - right)
  assert calibrator.weights[0] > 0 and calibrator.weights[1] > 0
  grid = np.linspace(0.0, 1.0, 21)
  along_top1 = calibrator.probability(_rows(grid, [0.1] * 21))
  along_margin = calibrator.probability(_rows([0.6] * 21, grid * 0.5))
  assert np.all(np.diff(along_top1) > 0) and np.all(np.diff(along_margin) > 0)


# Six mentions by increasing P(top-1 right). Accuracy (NIL counted) by threshold: never NIL 3/6;
# NIL below 0.15: 4/6; below 0.25: 5/6; below 0.45: 4/6 (mention 3 is right and lost); below
# 0.7: 5/6; below 0.85: 4/6; below 0.95: 3/6. Best 5/6, tied at 0.25 and 0.7: the lower wins.
# NIL F1: below 0.25 P=1 R=2/3 F1=0.8; below 0.7 P=3/4 R=1 F1=6/7 (best); below 0.95 F1=2/3.
P = [0.1, 0.2, 0.3, 0.6, 0.8, 0.9]
RIGHT = [False, False, True, False, True, True]
GOLD_NIL = [True, True, False, True, False, False]


def test_threshold_maximises_accuracy_on_a_hand_made_set():
  assert nc.choose_threshold(P, RIGHT, GOLD_NIL, "accuracy") == pytest.approx(0.25)
  m = nc.nil_metrics(np.array(P) < 0.25, RIGHT, GOLD_NIL)
  assert m["accuracy"] == pytest.approx(5 / 6)


def test_threshold_maximises_nil_f1_on_a_hand_made_set():
  assert nc.choose_threshold(P, RIGHT, GOLD_NIL, "nil_f1") == pytest.approx(0.7)
  m = nc.nil_metrics(np.array(P) < 0.7, RIGHT, GOLD_NIL)
  assert m["nil_f1"] == pytest.approx(6 / 7)
  with pytest.raises(ValueError, match="objective"):
    nc.choose_threshold(P, RIGHT, GOLD_NIL, "recall")


def test_nil_metrics_worked_by_hand():
  # Predicted NIL: 0, 1, 4; gold NIL: 0, 3, 4. NIL right: 0 and 4 -> P = 2/3, R = 2/3, F1 = 2/3.
  # Linked and right: 2 and 5. Accuracy (2 + 2) / 6; always linking: 2 / 6.
  m = nc.nil_metrics([True, True, False, False, True, False],
                     [False, False, True, False, False, True],
                     [True, False, False, True, True, False])
  assert (m["num_predicted_nil"], m["num_gold_nil"], m["num_nil_correct"]) == (3, 3, 2)
  assert m["nil_precision"] == pytest.approx(2 / 3)
  assert m["nil_recall"] == pytest.approx(2 / 3)
  assert m["nil_f1"] == pytest.approx(2 / 3)
  assert m["accuracy"] == pytest.approx(4 / 6)
  assert m["accuracy_without_nil"] == pytest.approx(2 / 6)
  none = nc.nil_metrics([False, False], [True, False], [False, True])
  assert none["nil_precision"] == 0.0 and none["nil_f1"] == 0.0 and none["accuracy"] == 0.5
  with pytest.raises(ValueError, match="cannot have a correct top-1"):
    nc.nil_metrics([False], [True], [True])


def test_top1_outcomes_tell_nil_labels_from_gold_outside_the_kb():
  kb = {"Ore River", "Port Alder"}
  gold = ["--NME--", "Ore River", "Port_Alder", "Lake Nowhere", "Ore Stream", None]
  rankings = [["Ore River"], ["Ore River", "Port Alder"], ["Ore River", "Port Alder"],
              ["Ore River"], ["Ore River"], ["Port Alder"]]
  gold_nil, right, not_in_kb = metrics.top1_outcomes(rankings, gold, kb,
                                                     {"Ore Stream": "Ore River"})
  assert gold_nil == [True, False, False, False, False, True]
  assert right == [False, True, False, False, True, False]
  assert not_in_kb == [False, False, False, True, False, False]


def test_gold_outside_the_kb_is_wrong_unless_nil_means_not_in_the_kb():
  # Mentions: NIL gold answered NIL; gold not in the KB answered NIL; gold not in the KB
  # linked; in-KB gold linked right. Accuracy 2/4; with not-in-KB gold as NIL 3/4.
  m = nc.nil_metrics([True, True, False, False], [False, False, False, True],
                     [True, False, False, False], [False, True, True, False])
  assert (m["nil_precision"], m["nil_recall"]) == (0.5, 1.0)
  assert m["accuracy"] == 0.5 and m["accuracy_not_in_kb_as_nil"] == 0.75
  assert (m["num_gold_not_in_kb"], m["num_gold_not_in_kb_predicted_nil"]) == (2, 1)


def test_reliability_bins_by_hand():
  out = nc.reliability([0.05, 0.15, 0.12, 0.95, 1.0], [False, True, False, True, True], bins=10)
  bins = out["bins"]
  assert [b["count"] for b in bins] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 2]
  assert bins[1]["mean_probability"] == pytest.approx(0.135) and bins[1]["accuracy"] == 0.5
  assert bins[2]["accuracy"] is None
  # ECE: (1 * 0.05 + 2 * |0.5 - 0.135| + 2 * |1 - 0.975|) / 5
  assert out["expected_calibration_error"] == pytest.approx((0.05 + 0.73 + 0.05) / 5)


def test_fit_needs_both_outcomes():
  with pytest.raises(ValueError, match="needs both outcomes"):
    nc.fit_calibrator([[0.5, 0.1], [0.6, 0.2]], [True, True], [False, False])


def test_artifact_round_trip_and_model_check(tmp_path):
  calibrator = nil_lib.NilCalibrator([2.0, 3.0], -1.5, 0.4,
                                     {"model_fingerprint": "abc", "fitted_on": {"dataset": "d"}})
  path = str(tmp_path / "nil.json")
  calibrator.save(path)
  loaded = nil_lib.NilCalibrator.load(path, expected_model_fingerprint="abc")
  assert (loaded.weights, loaded.bias, loaded.threshold) == ([2.0, 3.0], -1.5, 0.4)
  assert loaded.info["fitted_on"] == {"dataset": "d"}
  # p = sigmoid(-1.5 + 2 * 0.5 + 3 * 0.5) = sigmoid(1)
  assert loaded.probability([[0.5, 0.0]])[0] == pytest.approx(1 / (1 + np.exp(-1)))
  with pytest.raises(ValueError, match="fitted on the scores of model 'abc'.*refit"):
    nil_lib.NilCalibrator.load(path, expected_model_fingerprint="other")
  with open(path, "w") as f:
    json.dump({"format": nil_lib.FORMAT, "features": ["top1_score"]}, f)
  with pytest.raises(ValueError, match="nil.json: features"):
    nil_lib.NilCalibrator.load(path)
  assert nil_lib.find_calibrator(str(tmp_path)) is None  # 'auto' and no file: none
  with pytest.raises(FileNotFoundError, match="missing.json"):
    nil_lib.find_calibrator(str(tmp_path), str(tmp_path / "missing.json"))
