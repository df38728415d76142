"""Encoder SavedModels: string signatures, fresh-process loading, same outputs as in process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.modeling import models
from dense_entity.kb import schema
from dense_entity.serving import savedmodel
from tests import testutil

MENTIONS = {n: [row[i] for row in testutil.MENTIONS] + [""]
            for i, n in enumerate(schema.MENTION_FEATURES)}
ENTITIES = {schema.ENTITY_TITLE: ["Lake Ore", "", "Port Alder"],
            schema.ENTITY_TEXT: ["Lake Ore is a lake.", "", ""],
            schema.ENTITY_CATEGORIES: ["Lakes|Norland", "", "Towns"]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  tf.keras.utils.set_random_seed(3)
  model = models.DualEncoder(config.get_preset("tiny").model, ["ore", "lake"])
  export_dir = str(tmp_path_factory.mktemp("ws") / "export")
  manifest = savedmodel.export_encoders(model, export_dir)
  return model, export_dir, manifest


def _in_process(model):
  m = model.mention_encoder({n: tf.constant(v) for n, v in MENTIONS.items()}).numpy()
  e = model.entity_encoder({n: tf.constant(v) for n, v in ENTITIES.items()}).numpy()
  return m, e


def test_signature_takes_named_strings_and_returns_dense_float(exported):
  _, export_dir, manifest = exported
  loaded = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR))
  fn = loaded._fn
  inputs = fn.structured_input_signature[1]
  assert sorted(inputs) == sorted(schema.MENTION_FEATURES)
  for name, spec in inputs.items():
    assert spec.dtype == tf.string and spec.shape.as_list() == [None]
  out = fn.structured_outputs[savedmodel.OUTPUT_KEY]
  assert out.dtype == tf.float32 and out.shape.as_list() == [None, manifest["encoding_dim"]]


def test_each_input_reaches_its_own_feature(exported):
  # Swapping two inputs must change the encoding: names are not matched positionally.
  model, export_dir, _ = exported
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR))
  m, _ = _in_process(model)
  np.testing.assert_allclose(encoder(MENTIONS), m, atol=1e-6)
  swapped = dict(MENTIONS)
  swapped[schema.MENTION_SPAN], swapped[schema.MENTION_SENTENCE] = (
      MENTIONS[schema.MENTION_SENTENCE], MENTIONS[schema.MENTION_SPAN])
  assert not np.allclose(encoder(swapped)[:8], m[:8], atol=1e-3)


def test_missing_input_is_a_clear_error(exported):
  _, export_dir, _ = exported
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
  with pytest.raises(ValueError, match="entity_text"):
    encoder({schema.ENTITY_TITLE: ["x"], schema.ENTITY_CATEGORIES: [""]})


@pytest.mark.parametrize("sizes", [(2, 2, 1, 3), (2, 0, 0, 6), (1, 0, 0, 3), (3, 1, 1, 1)])
def test_inputs_of_different_lengths_are_an_error_naming_the_input(exported, sizes):
  # The raw signature put the four inputs one after another and split them into equal parts:
  # lengths (2, 2, 1, 3) gave 2 encodings of the wrong strings, (3, 1, 1, 1) a split error
  # naming no input. The first input that differs is named, with its size.
  import tensorflow_text  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  _, export_dir, _ = exported
  fn = tf.saved_model.load(os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR)).signatures[
      "serving_default"]
  inputs = {n: tf.constant(["x"] * size, tf.string)
            for n, size in zip(schema.MENTION_FEATURES, sizes)}
  first_bad = next(n for n, size in zip(schema.MENTION_FEATURES, sizes) if size != sizes[0])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=f"input {first_bad} must hold as many strings as mention_span"):
    fn(**inputs)
  same = {n: tf.constant(["x"] * 2, tf.string) for n in schema.MENTION_FEATURES}
  assert fn(**same)[savedmodel.OUTPUT_KEY].shape[0] == 2


_FRESH = """
import json, sys
import numpy as np
import tensorflow as tf
export_dir, inputs_path, out_path = sys.argv[1:4]
# 1. Bare tf.saved_model.load without tensorflow_text: the tf.text ops are not registered.
try:
  tf.saved_model.load(export_dir + '/mention_encoder')
  bare = 'loaded'
except Exception as e:
  bare = type(e).__name__ + ': ' + str(e)[:200]
# 2. Our loader imports tensorflow_text first.
from dense_entity.serving import savedmodel
inputs = json.load(open(inputs_path))
m = savedmodel.load_encoder(export_dir + '/mention_encoder')(inputs['mentions'])
e = savedmodel.load_encoder(export_dir + '/entity_encoder')(inputs['entities'])
np.savez(out_path, m=m, e=e)
print(json.dumps({'bare': bare}))
"""


def test_fresh_process_loads_and_matches_in_process_outputs(exported, tmp_path):
  model, export_dir, _ = exported
  inputs = tmp_path / "inputs.json"
  inputs.write_text(json.dumps({"mentions": MENTIONS, "entities": ENTITIES}))
  out = tmp_path / "out.npz"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=testutil.REPO_ROOT)
  proc = subprocess.run([sys.executable, "-c", _FRESH, export_dir, str(inputs), str(out)],
                        env=env, capture_output=True, text=True, cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-2000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  # Without tensorflow_text the graph's ops are unknown ('Op type not registered').
  assert result["bare"] != "loaded"
  got = np.load(out)
  m, e = _in_process(model)
  np.testing.assert_allclose(got["m"], m, atol=1e-6)
  np.testing.assert_allclose(got["e"], e, atol=1e-6)
  assert got["m"].shape == (len(testutil.MENTIONS) + 1, 8)
  assert np.all(np.isfinite(got["m"])) and np.all(np.isfinite(got["e"]))


def test_failed_export_leaves_previous_export_in_place(exported, monkeypatch):
  model, export_dir, manifest = exported

  def boom(*args, **kwargs):
    raise RuntimeError("disk full")

  monkeypatch.setattr(tf.saved_model, "save", boom)
  with pytest.raises(RuntimeError):
    savedmodel.export_encoders(model, export_dir)
  assert savedmodel.read_manifest(export_dir) == manifest
  parent = os.path.dirname(export_dir)
  assert [d for d in os.listdir(parent) if ".tmp-" in d] == []


def test_packed_signature_equals_named_inputs(exported):
  """Issue 17: Encoder calls 'serving_packed' (one [inputs, batch] tensor); it must give what
  'serving_default' gives, in any batch size, and exports without it use the named inputs."""
  model, export_dir, _ = exported
  for sub, features in ((savedmodel.MENTION_ENCODER_DIR, MENTIONS),
                        (savedmodel.ENTITY_ENCODER_DIR, ENTITIES)):
    encoder = savedmodel.load_encoder(os.path.join(export_dir, sub))
    assert encoder._packed_names is not None  # pylint: disable=protected-access
    size = len(next(iter(features.values())))
    named = {n: tf.constant(features.get(n, [""] * size)) for n in encoder.input_names}
    expected = encoder._fn(**named)[savedmodel.OUTPUT_KEY].numpy()  # pylint: disable=protected-access
    np.testing.assert_array_equal(encoder(features), expected)
    np.testing.assert_allclose(encoder(features, batch_size=1), expected, atol=1e-6)
    # The flat call of the packed graph function (its string tensor built on the host, its call
    # op executed directly) gives the same, on lists or numpy arrays of str or bytes, and so
    # does the signature called by keyword when the flat call is not there.
    assert encoder._packed_call is not None  # pylint: disable=protected-access
    for kind in (str, bytes):
      arrays = {k: np.array([x if kind is str else x.encode("utf-8") for x in v])
                for k, v in features.items()}
      np.testing.assert_array_equal(encoder(arrays), expected)
    encoder._packed_call = None  # pylint: disable=protected-access
    np.testing.assert_array_equal(encoder(features), expected)
    encoder._packed_names = None  # pylint: disable=protected-access
    np.testing.assert_array_equal(encoder(features), expected)
