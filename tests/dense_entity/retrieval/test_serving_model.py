"""Serving SavedModel: fresh-process load with tensorflow + tensorflow_text only, same top-k as
EntityRetriever (brute force), manifest, atomic write."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.kb import mention_features
from dense_entity.retrieval import retriever as retriever_lib
from dense_entity.kb import schema
from dense_entity.serving import savedmodel
from dense_entity.retrieval import serving_model
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace
from tests.dense_entity.retrieval.test_retriever import copy_index_of_another_model

K = 4
TEXTS = [
    ("The Ore River meets the sea.", 4, 13),
    ("A ferry near Port Alder at dusk.", 13, 23),
    ("Norland has rivers and a lake called Lake Ore.", 37, 45),
    ("Zug", 0, 3),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  # With the lexical context-description channel: 'Zug' alone has no context word, so its
  # encoding is not unit-norm and only normalisation keeps serving and retriever equal.
  root = build_tiny_workspace(tmp_path_factory.mktemp("ws"), extra_entities=20,
                              context_match_dim=16)
  manifest = serving_model.export_serving_model(os.path.join(root, "export"),
                                          os.path.join(root, "index"), k=K)
  return root, manifest


_FRESH = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the featurizer's text ops
serving_dir, inputs_path = sys.argv[1:3]
fn = tf.saved_model.load(serving_dir).signatures['serving_default']
features = json.load(open(inputs_path))
out = fn(**{name: tf.constant(values) for name, values in features.items()})
empty = fn(**{name: tf.constant([], tf.string) for name in features})
single = [fn(**{name: tf.constant(values[i:i + 1]) for name, values in features.items()})
          ['row_ids'].numpy()[0].tolist() for i in range(len(next(iter(features.values()))))]
signature = {
    'inputs': {n: [s.dtype.name, s.shape.as_list()]
               for n, s in fn.structured_input_signature[1].items()},
    'outputs': {n: [s.dtype.name, s.shape.as_list()] for n, s in fn.structured_outputs.items()},
    'empty_shape': empty['titles'].shape.as_list()}
project = sorted(m for m in sys.modules if m.split('.')[0] in ('dense_entity', 'export', 'scann'))
print(json.dumps({'titles': [[t.decode() for t in row] for row in out['titles'].numpy()],
                  'scores': out['scores'].numpy().tolist(),
                  'row_ids': out['row_ids'].numpy().tolist(), 'single_row_ids': single,
                  'project_modules': project, 'signature': signature}))
"""


def test_fresh_process_gives_the_same_top_k_as_the_retriever(workspace, tmp_path):
  root, _ = workspace
  feats = [mention_features.mention_features(*t) for t in TEXTS]
  inputs = tmp_path / "inputs.json"
  inputs.write_text(json.dumps({n: [f[n] for f in feats] for n in schema.MENTION_FEATURES}))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("PYTHONPATH", None)
  # The fresh process runs while this one loads the retriever.
  proc = subprocess.Popen([sys.executable, "-c", _FRESH, os.path.join(root, "export", "serving"),
                           str(inputs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=str(tmp_path))
  retriever = retriever_lib.EntityRetriever.load(root)
  expected = retriever.retrieve(TEXTS, k=K)
  stdout, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 0, stderr[-2000:]
  got = json.loads(stdout.strip().splitlines()[-1])
  assert got["project_modules"] == []

  assert got["titles"] == [[t for t, _ in row] for row in expected]
  np.testing.assert_allclose(got["scores"], [[s for _, s in row] for row in expected],
                             atol=1e-5)
  assert got["row_ids"] == [[retriever.titles.index(t) for t, _ in row] for row in expected]

  signature = got["signature"]
  assert signature["inputs"] == {n: ["string", [None]] for n in schema.MENTION_FEATURES}
  assert signature["outputs"] == {"titles": ["string", [None, K]],
                                  "scores": ["float32", [None, K]],
                                  "row_ids": ["int32", [None, K]]}
  assert signature["empty_shape"] == [0, K]


def test_manifest(workspace):
  root, manifest = workspace
  assert serving_model.read_manifest(os.path.join(root, "export", "serving")) == manifest
  export_manifest = savedmodel.read_manifest(os.path.join(root, "export"))
  assert manifest["model_fingerprint"] == export_manifest["model_fingerprint"]
  assert manifest["k"] == K and manifest["num_entities"] == 26
  assert manifest["num_rows"] == 30  # 2 of the 20 synthetic entities have 2 name rows each
  assert manifest["encoding_dim"] == export_manifest["encoding_dim"]
  assert manifest["inputs"] == list(schema.MENTION_FEATURES)


def test_k_is_clamped_to_the_kb_and_failed_export_keeps_the_previous(workspace, tmp_path,
                                                                       monkeypatch):
  root, manifest = workspace
  export_dir, index_dir = os.path.join(root, "export"), os.path.join(root, "index")
  saved = []
  # Writing the SavedModel itself is covered above; here only the manifest and the directories.
  monkeypatch.setattr(tf.saved_model, "save", lambda module, path, **kwargs: saved.append(
      (module.k, os.makedirs(path))))
  clamped = serving_model.export_serving_model(export_dir, index_dir, str(tmp_path / "s"), k=1000)
  assert clamped["k"] == 26 and saved[0][0] == 26
  assert sorted(os.listdir(tmp_path)) == ["s"]

  def boom(*args, **kwargs):
    raise RuntimeError("disk full")

  monkeypatch.setattr(tf.saved_model, "save", boom)
  serving_dir = os.path.join(export_dir, "serving")
  before = sorted(os.listdir(serving_dir))
  with pytest.raises(RuntimeError, match="disk full"):
    serving_model.export_serving_model(export_dir, index_dir, k=3)
  assert serving_model.read_manifest(serving_dir) == manifest
  assert sorted(os.listdir(serving_dir)) == before
  assert sorted(os.listdir(export_dir)) == ["entity_encoder", "export_manifest.json",
                                            "mention_encoder", "serving"]


def test_an_output_dir_of_something_else_is_refused_before_building(workspace, tmp_path,
                                                                    monkeypatch):
  # `--output_dir=WS/extract` was refused only after the whole model was built.
  root, _ = workspace
  other = tmp_path / "extract"
  other.mkdir()
  (other / "stats.json").write_text("{}\n")

  def not_built(*args, **kwargs):
    raise AssertionError("the model was built before the output directory was checked")

  monkeypatch.setattr(serving_model, "ServingModule", not_built)
  with pytest.raises(FileExistsError, match="not a finished output of this stage"):
    serving_model.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                       str(other))
  assert os.listdir(other) == ["stats.json"]


def test_bad_inputs_are_clear_errors(workspace, tmp_path):
  root, _ = workspace
  with pytest.raises(ValueError, match="k must be"):
    serving_model.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                 str(tmp_path / "s"), k=0)
  with pytest.raises(FileNotFoundError, match="entity_titles.txt"):
    serving_model.export_serving_model(os.path.join(root, "export"), str(tmp_path),
                                 str(tmp_path / "s"))
  other = copy_index_of_another_model(root, tmp_path / "other_index")
  with pytest.raises(ValueError, match="rebuild the index"):
    serving_model.export_serving_model(os.path.join(root, "export"), other, str(tmp_path / "s"))
  assert not os.path.exists(tmp_path / "s")


def test_inputs_of_different_lengths_are_an_error_naming_the_input(workspace):
  # (['Paris', 'Georgia'], ['', ''], ['x'], ['a', 'b', 'c']) answered 'Paris (mythology)' for
  # Paris: the encoder split the inputs into equal parts of the wrong strings.
  import tensorflow_text  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  root, _ = workspace
  fn = tf.saved_model.load(os.path.join(root, "export", "serving")).signatures[
      "serving_default"]
  sizes = dict(zip(schema.MENTION_FEATURES, (2, 2, 1, 3)))
  with pytest.raises(tf.errors.InvalidArgumentError, match="must hold as many strings as"):
    fn(**{n: tf.constant(["x"] * size, tf.string) for n, size in sizes.items()})


_FRESH_SCANN = _FRESH.replace(
    "import tensorflow_text  # registers the featurizer's text ops",
    "import tensorflow_text  # registers the featurizer's text ops\n"
    "from scann.scann_ops.py import scann_ops  # registers ScaNN's ops")


def test_ah_tree_serving_model_agrees_with_the_ah_tree_index(tmp_path):
  """A KB too large for a brute-force variable is served with ScaNN's TF ops (AH + tree)."""
  root = build_tiny_workspace(tmp_path / "ws", kinds=("brute_force", "ah_tree"),
                              extra_entities=400, context_match_dim=16)
  index_dir = os.path.join(root, "index")
  feats = [mention_features.mention_features(*t) for t in TEXTS]
  inputs = tmp_path / "inputs.json"
  inputs.write_text(json.dumps({n: [f[n] for f in feats] for n in schema.MENTION_FEATURES}))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("PYTHONPATH", None)
  exact = retriever_lib.EntityRetriever.load(root).retrieve(TEXTS, k=K)
  # First from the saved ah_tree index (its state read, not rebuilt), then, with that index
  # gone, from a searcher built from the encodings.
  for name in ("serving", "serving_rebuilt"):
    serving_dir = os.path.join(root, "export", name)
    manifest = serving_model.export_serving_model(os.path.join(root, "export"), index_dir,
                                                  output_dir=serving_dir, k=K, search="ah_tree")
    assert manifest["search"] == "ah_tree" and "scann" in manifest["requires"]
    assert os.path.basename(manifest["entity_source"]) == (
        "ah_tree" if name == "serving" else "brute_force")
    assert not any("entity_encodings" in f for f in os.listdir(serving_dir))
    proc = subprocess.run([sys.executable, "-c", _FRESH_SCANN, serving_dir, str(inputs)],
                          env=env, capture_output=True, text=True, cwd=str(tmp_path), timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # Approximate search: the best entity is the exact one; scores are reordered cosines.
    assert [row[0] for row in got["titles"]] == [row[0][0] for row in exact]
    np.testing.assert_allclose([row[0] for row in got["scores"]], [row[0][1] for row in exact],
                               atol=2e-2)
    assert got["signature"]["outputs"]["titles"] == ["string", [None, K]]
    # A batch is searched on ScaNN's thread pool, one query on the calling thread: same answers.
    assert len(got["row_ids"]) == len(TEXTS) > 1
    assert got["single_row_ids"] == got["row_ids"]
    shutil.rmtree(os.path.join(index_dir, "ah_tree"), ignore_errors=True)
  with pytest.raises(ValueError, match="too few"):
    small = build_tiny_workspace(tmp_path / "small")
    serving_model.export_serving_model(os.path.join(small, "export"),
                                       os.path.join(small, "index"), search="ah_tree")
