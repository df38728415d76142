"""Serving SavedModel: fresh-process load with tensorflow + tensorflow_text only, same top-k as
EntityRetriever (brute force), manifest, atomic write."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from dense_entity import mention_features
from dense_entity import retriever as retriever_lib
from dense_entity import schema
from export import savedmodel
from export import serving
from tests.dense_entity.test_retriever import build_tiny_workspace
from tests.dense_entity.test_retriever import copy_index_of_another_model

K = 4
TEXTS = [
    ("The Ore River meets the sea.", 4, 13),
    ("A ferry near Port Alder at dusk.", 13, 23),
    ("Norland has rivers and a lake called Lake Ore.", 37, 45),
    ("Zug", 0, 3),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  root = build_tiny_workspace(tmp_path_factory.mktemp("ws"), extra_entities=20)
  manifest = serving.export_serving_model(os.path.join(root, "export"),
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
project = sorted(m for m in sys.modules if m.split('.')[0] in ('dense_entity', 'export', 'scann'))
print(json.dumps({'titles': [[t.decode() for t in row] for row in out['titles'].numpy()],
                  'scores': out['scores'].numpy().tolist(),
                  'row_ids': out['row_ids'].numpy().tolist(),
                  'project_modules': project}))
"""


def test_fresh_process_gives_the_same_top_k_as_the_retriever(workspace, tmp_path):
  root, _ = workspace
  feats = [mention_features.mention_features(*t) for t in TEXTS]
  inputs = tmp_path / "inputs.json"
  inputs.write_text(json.dumps({n: [f[n] for f in feats] for n in schema.MENTION_FEATURES}))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("PYTHONPATH", None)
  proc = subprocess.run([sys.executable, "-c", _FRESH, os.path.join(root, "export", "serving"),
                         str(inputs)], env=env, capture_output=True, text=True,
                        cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-2000:]
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got["project_modules"] == []

  retriever = retriever_lib.EntityRetriever.load(root)
  expected = retriever.retrieve(TEXTS, k=K)
  assert got["titles"] == [[t for t, _ in row] for row in expected]
  np.testing.assert_allclose(got["scores"], [[s for _, s in row] for row in expected],
                             atol=1e-5)
  assert got["row_ids"] == [[retriever.titles.index(t) for t, _ in row] for row in expected]


def test_signature_and_manifest(workspace):
  root, manifest = workspace
  serving_dir = os.path.join(root, "export", "serving")
  assert serving.read_manifest(serving_dir) == manifest
  export_manifest = savedmodel.read_manifest(os.path.join(root, "export"))
  assert manifest["model_fingerprint"] == export_manifest["model_fingerprint"]
  assert manifest["k"] == K and manifest["num_entities"] == 26
  assert manifest["encoding_dim"] == export_manifest["encoding_dim"]
  import tensorflow_text  # pylint: disable=unused-import
  fn = tf.saved_model.load(serving_dir).signatures["serving_default"]
  inputs = fn.structured_input_signature[1]
  assert sorted(inputs) == sorted(schema.MENTION_FEATURES)
  assert all(s.dtype == tf.string and s.shape.as_list() == [None] for s in inputs.values())
  outputs = fn.structured_outputs
  assert outputs["titles"].dtype == tf.string and outputs["titles"].shape.as_list() == [None, K]
  assert outputs["scores"].dtype == tf.float32 and outputs["scores"].shape.as_list() == [None, K]
  empty = fn(**{n: tf.constant([], tf.string) for n in schema.MENTION_FEATURES})
  assert empty["titles"].shape == (0, K)


def test_k_is_clamped_to_the_kb_and_failed_export_keeps_the_previous(workspace, tmp_path,
                                                                       monkeypatch):
  root, _ = workspace
  out = str(tmp_path / "serving")
  manifest = serving.export_serving_model(os.path.join(root, "export"),
                                          os.path.join(root, "index"), out, k=1000)
  assert manifest["k"] == 26

  def boom(*args, **kwargs):
    raise RuntimeError("disk full")

  monkeypatch.setattr(tf.saved_model, "save", boom)
  with pytest.raises(RuntimeError, match="disk full"):
    serving.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                 out, k=3)
  assert serving.read_manifest(out) == manifest
  assert sorted(os.listdir(tmp_path)) == ["serving"]


def test_bad_inputs_are_clear_errors(workspace, tmp_path):
  root, _ = workspace
  with pytest.raises(ValueError, match="k must be"):
    serving.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                 str(tmp_path / "s"), k=0)
  with pytest.raises(FileNotFoundError, match="entity_titles.txt"):
    serving.export_serving_model(os.path.join(root, "export"), str(tmp_path),
                                 str(tmp_path / "s"))
  other = copy_index_of_another_model(root, tmp_path / "other_index")
  with pytest.raises(ValueError, match="rebuild the index"):
    serving.export_serving_model(os.path.join(root, "export"), other, str(tmp_path / "s"))
  assert not os.path.exists(tmp_path / "s")
