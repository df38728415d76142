"""Fitting the NIL calibrator on a development set, and NIL metrics (issue 16, item 3).

`retrieval.nil.NilCalibrator` gives p = P(top-1 entity is right) from the retrieval scores
and says NIL when p < threshold (its docstring says why a score-based logistic regression and
not the mining task's logistic head). This module fits it: `fit_logistic` (L2-regularised
logistic regression by Newton's method, numpy), `choose_threshold` (the threshold that
maximises accuracy over all mentions, NIL counted, or NIL F1 on the development set),
`fit_calibrator` (both, on one dataset), and scores any calibrator: `nil_metrics` (NIL
precision, recall, F1; accuracy over all mentions) and `reliability` (predicted probability
against observed accuracy, in bins).

What counts as right (`metrics.top1_outcomes`): a mention with a NIL label as gold
('--NME--', 'NIL', null) is NIL; NIL precision, recall and F1 are over those (the benchmark's
definition: AIDA testa has 1,126). A linked mention is right when its top-1 entity is its gold
entity; a NIL answer is right when the gold is NIL. A mention whose gold entity is not in the
KB (renamed, or unresolvable) can be answered right by neither and counts as wrong in
`accuracy`; `accuracy_not_in_kb_as_nil` counts a NIL answer to it as right instead (TAC-KBP's
definition, NIL = not in the KB), and `num_gold_not_in_kb_predicted_nil` says how many got it.
The calibrator's target is "top-1 right" (y = 1 when the top-1 entity is the gold entity), so
p is meaningful for every mention, NIL or not.
"""

from typing import Dict, Optional, Sequence

import numpy as np

from dense_entity.retrieval import nil as nil_lib

DEFAULT_L2 = 1e-2
DEFAULT_BINS = 10


def fit_logistic(x: np.ndarray, y: Sequence[int], l2: float = DEFAULT_L2,
                 max_iterations: int = 100, tolerance: float = 1e-10):
  """Logistic regression p = sigmoid(b + w . x) by Newton's method (iteratively reweighted
  least squares) on standardised features, with an L2 penalty `l2 * |w|^2 / 2` per mention
  (not on the bias), so that a separable set gives large finite weights instead of diverging.

  Args:
    x: `[n, f]` features (raw).
    y: `[n]` labels in {0, 1}.
    l2: penalty per mention on the standardised weights, >= 0.
    max_iterations, tolerance: Newton steps; stop when the largest step is below `tolerance`.

  Returns:
    (weights `[f]` float64, bias float), on raw features.

  Raises:
    ValueError: empty input, mismatched lengths, labels not 0/1, or non-finite features.
  """
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  if x.ndim != 2 or not len(x) or len(x) != len(y):
    raise ValueError(f"need [n, f] features and [n] labels with n > 0, got {x.shape} and "
                     f"{y.shape}")
  if not np.all(np.isin(y, (0.0, 1.0))):
    raise ValueError("labels must be 0 or 1")
  if not np.all(np.isfinite(x)):
    raise ValueError("features must be finite")
  n, f = x.shape
  mean = x.mean(axis=0)
  scale = x.std(axis=0)
  # A constant feature (up to rounding, e.g. 0.4 - 0.35 vs 0.05) is left out: its weight is 0.
  constant = scale <= 1e-9 * (1.0 + np.abs(mean))
  scale[constant] = 1.0
  z = np.hstack([np.where(constant, 0.0, (x - mean) / scale), np.ones((n, 1))])
  theta = np.zeros(f + 1)
  penalty = np.full(f + 1, l2 * n)
  penalty[-1] = 0.0
  for _ in range(max_iterations):
    p = nil_lib.sigmoid(z @ theta)
    gradient = z.T @ (p - y) + penalty * theta
    hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-12 * np.eye(f + 1)
    step = np.linalg.solve(hessian, gradient)
    theta -= step
    if np.max(np.abs(step)) < tolerance:
      break
  weights = theta[:f] / scale
  bias = float(theta[f] - np.sum(theta[:f] * mean / scale))
  return weights, bias


def nil_metrics(pred_nil: Sequence[bool], top1_correct: Sequence[bool],
                gold_nil: Sequence[bool],
                gold_not_in_kb: Optional[Sequence[bool]] = None) -> Dict[str, float]:
  """NIL precision, recall and F1, and accuracy over all mentions (NIL counted).

  Args:
    pred_nil: `[n]` whether the system says NIL.
    top1_correct: `[n]` whether the top-1 entity is the gold entity (False for NIL gold).
    gold_nil: `[n]` whether the gold is a NIL label (see the module docstring).
    gold_not_in_kb: `[n]` whether a non-NIL gold names no KB entity; default all False.

  Returns:
    {"num_mentions", "num_gold_nil", "num_predicted_nil", "num_nil_correct" (predicted NIL and
     gold NIL), "num_correct", "num_gold_not_in_kb", "num_gold_not_in_kb_predicted_nil" (ints);
     "nil_precision", "nil_recall", "nil_f1", "accuracy", "accuracy_without_nil" (accuracy
     when nothing is predicted NIL: the top-1 entity always linked),
     "accuracy_not_in_kb_as_nil"}, fractions in [0, 1]; an empty denominator gives 0.0.

  Raises:
    ValueError: lengths differ, or a mention is top-1 correct and gold NIL or not in the KB.
  """
  pred_nil = np.asarray(pred_nil, bool)
  top1_correct = np.asarray(top1_correct, bool)
  gold_nil = np.asarray(gold_nil, bool)
  not_in_kb = (np.zeros_like(gold_nil) if gold_not_in_kb is None
               else np.asarray(gold_not_in_kb, bool))
  if not pred_nil.shape == top1_correct.shape == gold_nil.shape == not_in_kb.shape:
    raise ValueError(f"lengths differ: {pred_nil.shape}, {top1_correct.shape}, "
                     f"{gold_nil.shape}, {not_in_kb.shape}")
  if np.any(top1_correct & (gold_nil | not_in_kb)):
    raise ValueError("a mention whose gold is NIL or not in the KB cannot have a correct "
                     "top-1 entity")
  n = len(pred_nil)
  nil_correct = int(np.sum(pred_nil & gold_nil))
  num_pred, num_gold = int(pred_nil.sum()), int(gold_nil.sum())
  precision = nil_correct / num_pred if num_pred else 0.0
  recall = nil_correct / num_gold if num_gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  correct = nil_correct + int(np.sum(~pred_nil & top1_correct))
  not_in_kb_nil = int(np.sum(pred_nil & not_in_kb))
  return {"num_mentions": n, "num_gold_nil": num_gold, "num_predicted_nil": num_pred,
          "num_nil_correct": nil_correct, "num_correct": correct,
          "num_gold_not_in_kb": int(not_in_kb.sum()),
          "num_gold_not_in_kb_predicted_nil": not_in_kb_nil,
          "nil_precision": precision, "nil_recall": recall, "nil_f1": f1,
          "accuracy": correct / n if n else 0.0,
          "accuracy_without_nil": int(top1_correct.sum()) / n if n else 0.0,
          "accuracy_not_in_kb_as_nil": (correct + not_in_kb_nil) / n if n else 0.0}


def choose_threshold(probability: Sequence[float], top1_correct: Sequence[bool],
                     gold_nil: Sequence[bool], objective: str = "accuracy") -> float:
  """The NIL threshold (NIL when p < t) that maximises `objective` on a development set.

  Candidates: 0 (never NIL), the midpoints between consecutive distinct probabilities, and the
  midpoint between the largest one and 1 (when below 1). Ties go to the lowest threshold
  (fewest NIL answers).

  Args:
    probability: `[n]` calibrated P(top-1 right).
    top1_correct, gold_nil: `[n]` bools, as in `nil_metrics`.
    objective: 'accuracy' (over all mentions, NIL counted) or 'nil_f1'.

  Returns:
    The threshold, a float in [0, 1].

  Raises:
    ValueError: an unknown objective or no mention.
  """
  if objective not in nil_lib.OBJECTIVES:
    raise ValueError(f"objective must be one of {nil_lib.OBJECTIVES}, got {objective!r}")
  p = np.asarray(probability, np.float64)
  if not len(p):
    raise ValueError("no mention to choose a threshold on")
  distinct = np.unique(p)
  candidates = [0.0] + list((distinct[:-1] + distinct[1:]) / 2)
  if distinct[-1] < 1.0:
    candidates.append((distinct[-1] + 1.0) / 2)
  best, best_value = 0.0, -1.0
  for t in candidates:
    m = nil_metrics(p < t, top1_correct, gold_nil)
    value = m["accuracy"] if objective == "accuracy" else m["nil_f1"]
    if value > best_value + 1e-12:
      best, best_value = float(t), value
  return best


def reliability(probability: Sequence[float], correct: Sequence[bool],
                bins: int = DEFAULT_BINS) -> Dict:
  """Predicted probability against observed accuracy, in `bins` equal-width bins of [0, 1].

  Args:
    probability: `[n]` predicted P(top-1 right).
    correct: `[n]` whether the top-1 entity is right.
    bins: number of bins, >= 1.

  Returns:
    {"bins": [{"low", "high", "count", "mean_probability", "accuracy"}] (empty bins have
     count 0 and None for the two means), "expected_calibration_error": sum over bins of
     count / n * |accuracy - mean probability| (0.0 when n = 0)}.
  """
  p = np.asarray(probability, np.float64)
  c = np.asarray(correct, bool)
  edges = np.linspace(0.0, 1.0, bins + 1)
  which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
  out, ece = [], 0.0
  for b in range(bins):
    mask = which == b
    count = int(mask.sum())
    mean_p = float(p[mask].mean()) if count else None
    accuracy = float(c[mask].mean()) if count else None
    if count:
      ece += count / len(p) * abs(accuracy - mean_p)
    out.append({"low": float(edges[b]), "high": float(edges[b + 1]), "count": count,
                "mean_probability": mean_p, "accuracy": accuracy})
  return {"bins": out, "expected_calibration_error": ece}


def fit_calibrator(scores: Sequence[Sequence[float]], top1_correct: Sequence[bool],
                   gold_nil: Sequence[bool], objective: str = "accuracy",
                   l2: float = DEFAULT_L2, info: Optional[Dict] = None,
                   gold_not_in_kb: Optional[Sequence[bool]] = None
                   ) -> nil_lib.NilCalibrator:
  """Fits a NilCalibrator on a development set: logistic regression of "top-1 right" on the
  score features, then the threshold maximising `objective`.

  Args:
    scores: `[n][k]` ranked cosines of each mention, best first.
    top1_correct, gold_nil, gold_not_in_kb: `[n]` bools, as in `nil_metrics`.
    objective: 'accuracy' or 'nil_f1' (see `choose_threshold`).
    l2: logistic regression penalty (see `fit_logistic`).
    info: extra fields of the artifact (model fingerprint, dataset, ...).

  Returns:
    The calibrator; its info holds "objective", "l2", "fitted_on" counts and "dev_metrics"
    (`nil_metrics` on the development set itself, in-sample).

  Raises:
    ValueError: no mention, or every mention has the same outcome (nothing to calibrate).
  """
  y = np.asarray(top1_correct, bool)
  if not len(y):
    raise ValueError("no mention to fit the NIL calibrator on")
  if y.all() or not y.any():
    raise ValueError(f"all {len(y)} mentions have their top-1 entity "
                     f"{'right' if y.all() else 'wrong'}; a calibrator needs both outcomes")
  weights, bias = fit_logistic(nil_lib.score_features(scores), y.astype(int), l2)
  provisional = nil_lib.NilCalibrator(weights, bias, 0.0)
  p = provisional.probability(scores)
  threshold = choose_threshold(p, y, gold_nil, objective)
  info = dict(info or {})
  fitted_on = dict(info.pop("fitted_on", {}))
  fitted_on.update({"num_mentions": int(len(y)), "num_gold_nil": int(np.sum(gold_nil)),
                    "num_top1_correct": int(y.sum())})
  info.update({"objective": objective, "l2": l2, "fitted_on": fitted_on,
               "dev_metrics": nil_metrics(p < threshold, y, gold_nil, gold_not_in_kb)})
  return nil_lib.NilCalibrator(weights, bias, threshold, info)


def evaluate_calibrator(calibrator: nil_lib.NilCalibrator, scores, top1_correct,
                        gold_nil, gold_not_in_kb=None, bins: int = DEFAULT_BINS) -> Dict:
  """NIL metrics and reliability of a calibrator on one dataset (arguments as in
  `fit_calibrator`).

  Returns:
    `nil_metrics(...)` plus "threshold" and "reliability" (`reliability(...)`).
  """
  p = calibrator.probability(scores)
  result = nil_metrics(calibrator.is_nil(p), top1_correct, gold_nil, gold_not_in_kb)
  result["threshold"] = calibrator.threshold
  result["reliability"] = reliability(p, top1_correct, bins)
  return result



def evaluate_sections(calibrator: nil_lib.NilCalibrator, outcomes: Dict[str, tuple],
                      fitted_on: Optional[str] = None) -> Dict[str, Dict]:
  """`evaluate_calibrator` on every dataset with a NIL-labelled mention.

  Args:
    calibrator: the calibrator scored.
    outcomes: dataset name -> (scores, gold_nil, top1_correct, gold_not_in_kb), the scores as
      in `fit_calibrator` and the rest as `metrics.top1_outcomes` returns them.
    fitted_on: the dataset the calibrator was fitted on (its figures are in-sample), if any.

  Returns:
    name -> `evaluate_calibrator(...)` plus "in_sample", for the datasets with NIL gold only.
  """
  out = {}
  for name, (scores, gold_nil, top1_correct, not_in_kb) in outcomes.items():
    if any(gold_nil):
      nil = evaluate_calibrator(calibrator, scores, top1_correct, gold_nil, not_in_kb)
      nil["in_sample"] = name == fitted_on
      out[name] = nil
  return out
