"""NIL answers: `EntityRetriever.link`, `dense-entity link` and the serving SavedModel say NIL
when the calibrated P(top-1 right) is below the threshold, and link as before without one."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from dense_entity import cli
from dense_entity.retrieval import nil as nil_lib
from dense_entity.retrieval import retriever as retriever_lib
from dense_entity.retrieval import serving_model
from dense_entity.kb import mention_features
from dense_entity.kb import schema
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace

TEXTS = [
    ("The Ore River meets the sea.", 4, 13),
    ("A ferry near Port Alder at dusk.", 13, 23),
    ("They sailed to Birch Cove in May.", 15, 25),
    ("Zug is small", 0, 3),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  """A tiny workspace (random model, no training) with a hand-made calibrator in
  WS/export/nil_calibrator.json that puts the mentions of the two lowest top-1 scores to NIL."""
  root = build_tiny_workspace(tmp_path_factory.mktemp("ws"), extra_entities=20)
  plain = retriever_lib.EntityRetriever.load(root)
  top1 = sorted(row[0][1] for row in plain.retrieve(TEXTS, k=2))
  assert top1[1] < top1[2], "the tiny model should give distinct top-1 scores"
  # p = sigmoid(200 * (top1 - middle)): below 0.5 exactly for the two lowest top-1 scores.
  middle = (top1[1] + top1[2]) / 2
  calibrator = nil_lib.NilCalibrator([200.0, 0.0], -200.0 * middle, 0.5,
                                     {"model_fingerprint": plain.model_fingerprint})
  calibrator.save(os.path.join(root, "export", nil_lib.NIL_CALIBRATOR_FILE))
  return root, plain


@pytest.fixture(scope="module")
def retriever(workspace):
  return retriever_lib.EntityRetriever.load(workspace[0])  # finds EXPORT/nil_calibrator.json


def test_link_says_nil_below_the_threshold(workspace, retriever):
  _, plain = workspace
  assert retriever.nil_calibrator is not None
  expected = plain.retrieve(TEXTS, k=3)
  results = retriever.link(TEXTS, k=3)
  top1 = np.array([row[0][1] for row in expected])
  assert [r.is_nil for r in results] == list(top1 < np.sort(top1)[2])
  assert sum(r.is_nil for r in results) == 2
  for result, row in zip(results, expected):
    assert result.entities == row  # the candidates are kept for a NIL answer too
    assert result.entity == (None if result.probability < 0.5 else row[0][0])
  np.testing.assert_allclose([r.probability for r in results],
                             retriever.nil_calibrator.probability([[s for _, s in row]
                                                                   for row in expected]))
  # k = 1 still searches the second entity for the margin: the same answers.
  assert [(r.entity, r.probability) for r in retriever.link(TEXTS, k=1)] == [
      (r.entity, r.probability) for r in results]


def test_without_a_calibrator_link_always_answers_the_top_entity(workspace):
  _, plain = workspace
  assert plain.nil_calibrator is None  # loaded before the calibrator was written
  results = plain.link(TEXTS, k=2)
  assert [r.entity for r in results] == [row[0][0] for row in plain.retrieve(TEXTS, k=2)]
  assert all(r.probability is None and not r.is_nil for r in results)


def test_a_calibrator_of_another_model_is_refused(workspace, tmp_path):
  root, _ = workspace
  path = str(tmp_path / "other.json")
  nil_lib.NilCalibrator([1.0, 1.0], 0.0, 0.5, {"model_fingerprint": "0123"}).save(path)
  with pytest.raises(ValueError, match="other.json was fitted on the scores of model '0123'"):
    retriever_lib.EntityRetriever.load(root, nil_calibrator=path)


def test_link_command_prints_nil_and_the_probability(workspace, retriever, capsys,
                                                    monkeypatch):
  root, plain = workspace
  assert cli.main(["link", "--workspace", root, "--k", "2", "--json"]
                  + [f"{t[:s]}[[{t[s:e]}]]{t[e:]}" for t, s, e in TEXTS]) == 0
  records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  results = retriever.link(TEXTS, k=2)
  assert [r["nil"] for r in records] == [r.is_nil for r in results]
  assert [r["entity"] for r in records] == [r.entity for r in results]
  np.testing.assert_allclose([r["probability"] for r in records],
                             [r.probability for r in results], atol=1e-6)
  # Loading is covered above; the loaded retrievers are reused (with or without calibrator).
  asked = []

  def load(cls, path, kind, nil_calibrator="auto"):
    asked.append(nil_calibrator)
    return plain if nil_calibrator is None else retriever
  monkeypatch.setattr(retriever_lib.EntityRetriever, "load", classmethod(load))
  assert cli.main(["link", "--workspace", root, "--nil_calibrator", "none", "--json",
                   "The [[Ore River]] meets the sea."]) == 0
  assert asked == [None]
  assert "nil" not in json.loads(capsys.readouterr().out)
  assert cli.main(["link", "--workspace", root, "[[Zug]] is small"]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[1].startswith("  -> ") and "P(top-1 right) = " in out[1]


def test_serving_model_outputs_the_probability_and_nil(workspace, retriever, tmp_path):
  root, _ = workspace
  with pytest.raises(ValueError, match="needs the top-2 scores"):
    serving_model.export_serving_model(os.path.join(root, "export"),
                                       os.path.join(root, "index"), str(tmp_path / "k1"), k=1)
  out_dir = str(tmp_path / "serving")
  manifest = serving_model.export_serving_model(os.path.join(root, "export"),
                                                os.path.join(root, "index"), out_dir, k=3)
  assert manifest["outputs"][serving_model.IS_NIL_KEY] == "bool [batch]"
  assert manifest["nil_calibrator"]["threshold"] == 0.5
  serve = tf.saved_model.load(out_dir).signatures["serving_default"]
  features = [mention_features.mention_features(*t) for t in TEXTS]
  out = serve(**{n: tf.constant([f[n] for f in features]) for n in schema.MENTION_FEATURES})
  results = retriever.link(TEXTS, k=3)
  assert out[serving_model.IS_NIL_KEY].numpy().tolist() == [r.is_nil for r in results]
  np.testing.assert_allclose(out[serving_model.PROBABILITY_KEY].numpy(),
                             [r.probability for r in results], atol=1e-3)
