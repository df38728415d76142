"""NIL prediction: a calibrated probability that the top-ranked entity is the right one.

A retriever always ranks some entity first, also for a mention whose entity is not in the KB
(a NIL mention: AIDA's '--NME--'). `NilCalibrator` turns the retrieval scores of a mention into
p = P(top-1 entity is right) and says NIL when p < threshold; `EntityRetriever.link`,
`dense-entity link` and the serving SavedModel apply it. It is fitted by
`dense_entity.evaluation.nil_calibration` on a development set with NIL mentions
(`python -m dense_entity.evaluate ... --fit_nil_calibrator=PATH`).

Which probability, and why (issue 16): logistic regression (Platt scaling, Platt 1999) over
two features of the retrieval scores, fitted on a development set with NIL gold:
- `top1_score`: the cosine of the top entity;
- `margin`: top-1 minus top-2 cosine (how much the top entity stands out; the second score is
  taken as max(s2, -1), the cosine's minimum, and as -1 when the KB has one entity).
The paper's logistic head of the mining task (section 4.3, g(a_h * cos + b_h)) is not used: it
is fitted on (gold, hard negative) pairs of training mentions, whose balance of positives and
negatives says nothing about how often a real mention's top entity is right or its entity is
missing from the KB, it never sees a NIL mention, and models trained without mining rounds do
not have one. A calibrator fitted on mentions with NIL gold estimates exactly the probability
wanted, needs only the scores (so the serving graph computes it too), and has 3 parameters, so
a development set of a few thousand mentions fits it without overfitting. Scores only: the
alias-table prior would need the alias table in every reader (the serving SavedModel has none).

Artifact (JSON, `NIL_CALIBRATOR_FILE` in the export directory by default):
  {"format": FORMAT, "features": ["top1_score", "margin"], "weights": [w1, w2], "bias": b,
   "threshold": t, "objective": "accuracy" | "nil_f1", "model_fingerprint": "...",
   "index": "brute_force", "num_entities": N, "fitted_on": {"dataset", "path",
   "num_mentions", "num_gold_nil", "num_top1_correct", ...}, "dev_metrics": {...}}
p = sigmoid(b + w1 * top1_score + w2 * margin) on raw (unstandardised) features.
"""

import json
import math
import os
from typing import Dict, Optional, Sequence

import numpy as np

from dense_entity.common import fileio

FORMAT = "dense_entity.nil_calibrator/1"
NIL_CALIBRATOR_FILE = "nil_calibrator.json"
FEATURES = ("top1_score", "margin")
OBJECTIVES = ("accuracy", "nil_f1")
# The cosine's minimum: the second score of a one-entity KB, and the floor of a second score
# that an index fills with -inf.
MIN_COSINE = -1.0


def score_features(scores) -> np.ndarray:
  """The calibrator's features of each mention's ranked scores.

  Args:
    scores: `[num_mentions, k]` cosines, best first (k >= 1; a list of rows is fine, rows may
      differ in length but none may be empty).

  Returns:
    float64 `[num_mentions, len(FEATURES)]`: top-1 cosine and top-1 minus max(top-2, -1)
    (top-2 read as -1 when a row has one score).

  Raises:
    ValueError: an empty row, or a top-1 score that is not finite.
  """
  out = np.zeros((len(scores), len(FEATURES)), np.float64)
  for i, row in enumerate(scores):
    if len(row) == 0:
      raise ValueError(f"mention {i}: no scores; the calibrator needs the top-1 score")
    top1 = float(row[0])
    if not math.isfinite(top1):
      raise ValueError(f"mention {i}: top-1 score {top1} is not finite")
    second = max(float(row[1]), MIN_COSINE) if len(row) > 1 else MIN_COSINE
    out[i] = (top1, top1 - second)
  return out


def sigmoid(z: np.ndarray) -> np.ndarray:
  """Logistic function, stable for large |z|."""
  z = np.asarray(z, np.float64)
  return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))),
                  np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


class NilCalibrator:
  """p(top-1 right) = sigmoid(bias + weights . score_features(scores)); NIL when p < threshold.

  Attributes:
    weights: `[len(FEATURES)]` floats, on raw features.
    bias: float.
    threshold: float in [0, 1].
    info: the rest of the artifact (model fingerprint, what it was fitted on).
  """

  def __init__(self, weights: Sequence[float], bias: float, threshold: float,
               info: Optional[Dict] = None):
    weights = [float(w) for w in weights]
    if len(weights) != len(FEATURES) or not all(math.isfinite(w) for w in weights):
      raise ValueError(f"weights must be {len(FEATURES)} finite numbers ({FEATURES}), got "
                       f"{weights}")
    if not math.isfinite(float(bias)):
      raise ValueError(f"bias must be finite, got {bias}")
    if not 0.0 <= float(threshold) <= 1.0:
      raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    self.weights = weights
    self.bias = float(bias)
    self.threshold = float(threshold)
    self.info = dict(info or {})

  @property
  def model_fingerprint(self) -> Optional[str]:
    return self.info.get("model_fingerprint")

  def probability(self, scores) -> np.ndarray:
    """float64 `[num_mentions]`: P(top-1 entity is right) from ranked scores `[n, k]`."""
    x = score_features(scores)
    return sigmoid(self.bias + x @ np.asarray(self.weights, np.float64))

  def is_nil(self, probability) -> np.ndarray:
    """bool `[num_mentions]`: probability < threshold."""
    return np.asarray(probability, np.float64) < self.threshold

  def to_dict(self) -> Dict:
    return {**self.info, "format": FORMAT, "features": list(FEATURES),
            "weights": self.weights, "bias": self.bias, "threshold": self.threshold}

  def save(self, path: str) -> None:
    """Writes the artifact atomically (temp file + rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fileio.write_text_atomically(path, json.dumps(self.to_dict(), indent=2, sort_keys=True)
                                 + "\n")

  @classmethod
  def from_dict(cls, record: Dict, where: str = "nil calibrator") -> "NilCalibrator":
    """Builds a calibrator from its artifact; ValueError naming `where` when malformed."""
    if not isinstance(record, dict) or record.get("format") != FORMAT:
      raise ValueError(f"{where}: not a NIL calibrator (expected \"format\": {FORMAT!r})")
    if list(record.get("features", ())) != list(FEATURES):
      raise ValueError(f"{where}: features {record.get('features')} are not {list(FEATURES)}; "
                       "refit it with this version")
    info = {k: v for k, v in record.items()
            if k not in ("format", "features", "weights", "bias", "threshold")}
    try:
      return cls(record["weights"], record["bias"], record["threshold"], info)
    except (KeyError, TypeError, ValueError) as e:
      raise ValueError(f"{where}: malformed NIL calibrator: {e!r}") from e

  @classmethod
  def load(cls, path: str, expected_model_fingerprint: Optional[str] = None) -> "NilCalibrator":
    """Reads an artifact; checks it was fitted on the scores of the model in use.

    Raises:
      FileNotFoundError: naming `path`.
      ValueError: naming `path`, when it is malformed or was fitted for another model.
    """
    if not os.path.isfile(path):
      raise FileNotFoundError(f"{path}: no NIL calibrator there (fit one with "
                              "python -m dense_entity.evaluate --fit_nil_calibrator=PATH)")
    with open(path, encoding="utf-8") as f:
      try:
        record = json.load(f)
      except ValueError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    calibrator = cls.from_dict(record, path)
    fitted_for = calibrator.model_fingerprint
    if expected_model_fingerprint and fitted_for != expected_model_fingerprint:
      raise ValueError(f"{path} was fitted on the scores of model {fitted_for!r}, but the model "
                       f"in use is {expected_model_fingerprint!r}; refit it (python -m "
                       "dense_entity.evaluate --fit_nil_calibrator) or remove it")
    return calibrator


def find_calibrator(export_dir: str, path: Optional[str] = "auto",
                    expected_model_fingerprint: Optional[str] = None
                    ) -> Optional[NilCalibrator]:
  """The calibrator a reader applies: `path`, or with 'auto' EXPORT/NIL_CALIBRATOR_FILE when it
  exists (else None: no NIL prediction, results as without a calibrator); None/'' for none.

  Raises:
    FileNotFoundError / ValueError: as `NilCalibrator.load` (an explicit `path` must exist).
  """
  if not path:
    return None
  if path == "auto":
    path = os.path.join(export_dir, NIL_CALIBRATOR_FILE)
    if not os.path.isfile(path):
      return None
  return NilCalibrator.load(path, expected_model_fingerprint)
