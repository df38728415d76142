"""Mention and entity encoder SavedModels taking raw strings, and their loader.

Each SavedModel has the signature 'serving_default':
- mention encoder: inputs `mention_span`, `mention_left_context`, `mention_right_context`,
  `mention_sentence`, each tf.string `[batch]`;
- entity encoder: inputs `entity_title`, `entity_text`, `entity_categories` ('|'-joined
  category names) and `entity_aliases` ('|'-joined redirect titles and other names; '' for
  none), each tf.string `[batch]` (the manifest's 'entity_inputs' lists them);
- every input of one call holds one string per example: inputs of different lengths are an
  InvalidArgumentError naming the input (same_batch);
- output `encodings`: float32 `[batch, encoding_dim]`, L2-normalised (an input with no tokens at
  all encodes to a finite vector, possibly zero). With the lexical context-description channel
  (config.ModelConfig.context_match_dim) an encoding is [sqrt(1 - w) * learned, sqrt(w) *
  lexical], of norm 1, or sqrt(1 - w) when its text holds no word of any entity's text; the
  indexes normalise rows and queries, which leaves each query's ranking unchanged.
Since issue 17 it also has 'serving_packed' (PACKED_SIGNATURE): the same encoder with all inputs
in one tf.string `[inputs, batch]` tensor `packed_features`, rows in the order saved as the
variable `packed_input_names`; `Encoder` calls it (one input to convert and bind per call instead
of three or four: a single mention costs less), and exports without it still load.
Featurization is inside the graph (tensorflow-text ops), so a serving process needs only
`import tensorflow_text` before loading; `load_encoder` does that.
"""

import hashlib
import json
import os
import shutil
import uuid
from typing import Dict

import numpy as np
import tensorflow as tf

from dense_entity.common import fileio
from dense_entity.modeling import layers
from dense_entity.modeling import models
from dense_entity.kb import schema

MENTION_ENCODER_DIR = "mention_encoder"
ENTITY_ENCODER_DIR = "entity_encoder"
MANIFEST_FILE = "export_manifest.json"
OUTPUT_KEY = "encodings"
# The second signature (exports since issue 17) and its input, tf.string `[inputs, batch]`.
PACKED_SIGNATURE = "serving_packed"
PACKED_INPUT = "packed_features"


def same_batch(features: Dict[str, tf.Tensor], names) -> Dict[str, tf.Tensor]:
  """`features` (tf.string `[batch]` each, by name) after a check, in the graph, that every
  one of `names` holds as many strings as the first: the towers put a batch's features one
  after another and split them back into equal parts, so inputs of different lengths gave
  encodings of the wrong strings without an error (lengths 2, 2, 1, 3: 2 encodings, cosine
  0.75 with the right ones), or a split error naming no input.

  Raises (when the graph runs):
    tf.errors.InvalidArgumentError: naming the input that differs, the first input and their
      sizes.
  """
  first = names[0]
  checks = [tf.debugging.assert_equal(
      tf.size(features[name]), tf.size(features[first]),
      message=f"input {name} must hold as many strings as {first} (one per example)")
            for name in names[1:]]
  with tf.control_dependencies(checks):
    return {name: tf.identity(features[name]) for name in names}


class _Encoder(tf.Module):
  """Wraps a tower with a string-in, encodings-out signature."""

  def __init__(self, tower, feature_names):
    super().__init__()
    self.tower = tower
    self.feature_names = tuple(feature_names)
    # One dict argument: the signature's inputs are then named by feature (positional
    # arguments would be matched to names in sorted order, silently permuting features).
    spec = {n: tf.TensorSpec([None], tf.string, name=n) for n in self.feature_names}

    @tf.function(input_signature=[spec])
    def serve(features):
      return {OUTPUT_KEY: self.tower(same_batch(features, self.feature_names))}

    # The same, all inputs in one tensor (rows in `feature_names` order): one input to convert
    # and bind per call instead of four, which is most of a single mention's cost (issue 17).
    @tf.function(input_signature=[tf.TensorSpec([len(self.feature_names), None], tf.string,
                                                name=PACKED_INPUT)])
    def serve_packed(packed):
      columns = tf.unstack(packed, num=len(self.feature_names))
      return {OUTPUT_KEY: self.tower(dict(zip(self.feature_names, columns)))}

    self.serve = serve
    self.serve_packed = serve_packed
    # Saved with the model: the row order of serve_packed's input.
    self.packed_input_names = tf.Variable(list(self.feature_names), trainable=False,
                                          dtype=tf.string, name="packed_input_names")


def _fingerprint(directories) -> str:
  """sha256 over the files of the SavedModels (graph and variables), in a stable order."""
  h = hashlib.sha256()
  for directory in directories:
    for root, dirs, files in os.walk(directory):
      dirs.sort()
      for name in sorted(files):
        path = os.path.join(root, name)
        h.update(os.path.relpath(path, directory).encode())
        with open(path, "rb") as f:
          for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
  return h.hexdigest()[:16]


def export_encoders(model: models.DualEncoder, export_dir: str, extra: Dict = None) -> dict:
  """Writes both SavedModels and `export_manifest.json` into `export_dir`, atomically.

  The files are written to a temporary sibling directory which replaces `export_dir` only when
  complete, so a failed export leaves the previous one (or nothing) in place.

  Returns:
    The manifest: {'model_fingerprint', 'encoding_dim', 'mention_inputs', 'entity_inputs', ...}.
  """
  export_dir = os.path.abspath(export_dir)
  tmp = f"{export_dir}.tmp-{uuid.uuid4().hex[:8]}"
  os.makedirs(tmp)
  try:
    for sub, tower, names in ((MENTION_ENCODER_DIR, model.mention_encoder,
                               schema.MENTION_FEATURES),
                              (ENTITY_ENCODER_DIR, model.entity_encoder,
                               schema.ENTITY_FEATURES)):
      module = _Encoder(tower, names)
      # Embedding means by one fused op (layers.serving_lookups), traced here on save.
      with layers.serving_lookups():
        tf.saved_model.save(module, os.path.join(tmp, sub),
                            signatures={"serving_default": module.serve,
                                        PACKED_SIGNATURE: module.serve_packed})
    manifest = {
        "model_fingerprint": _fingerprint([os.path.join(tmp, MENTION_ENCODER_DIR),
                                           os.path.join(tmp, ENTITY_ENCODER_DIR)]),
        "encoding_dim": int(model.encoding_dim),
        "mention_inputs": list(schema.MENTION_FEATURES),
        "entity_inputs": list(schema.ENTITY_FEATURES),
        "output": OUTPUT_KEY,
        **(extra or {}),
    }
    with open(os.path.join(tmp, MANIFEST_FILE), "w") as f:
      json.dump(manifest, f, indent=2, sort_keys=True)
    fileio.replace_directory(tmp, export_dir, MANIFEST_FILE)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return manifest


def read_manifest(export_dir: str) -> dict:
  """Reads `export_manifest.json`; FileNotFoundError naming it when the export is incomplete."""
  path = os.path.join(export_dir, MANIFEST_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} is missing: {export_dir} holds no finished export")
  with open(path) as f:
    return json.load(f)


# Inputs a caller may leave out: the entity's aliases (schema.ENTITY_ALIASES, read by the name
# channel only), so callers that pass the paper's three entity features keep working.
OPTIONAL_INPUTS = frozenset({schema.ENTITY_ALIASES})


class Encoder:
  """A loaded encoder SavedModel: `encoder(features) -> float32 np.ndarray [batch, dim]`.

  Args (of __call__):
    features: dict from input name to a list / array of `batch` strings; every input of the
      signature is required except those of OPTIONAL_INPUTS (the entity's aliases), which
      read as '' when absent.

  Raises:
    ValueError: naming the missing inputs or when inputs differ in length.
  """

  def __init__(self, path: str):
    # The graph holds tensorflow-text ops; registering them is what this import does.
    import tensorflow_text  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
    self.path = path
    self._loaded = tf.saved_model.load(path)
    self._fn = self._loaded.signatures["serving_default"]
    self.input_names = sorted(self._fn.structured_input_signature[1])
    # The packed signature and its row order (exports before issue 17 have neither).
    self._packed = self._loaded.signatures.get(PACKED_SIGNATURE)
    order = getattr(self._loaded, "packed_input_names", None)
    self._packed_names = None
    if self._packed is not None and order is not None:
      names = [x.decode("utf-8") for x in order.numpy()]
      if sorted(names) == self.input_names:
        self._packed_names = names
    self._packed_call = self._flat_call() if self._packed_names else None

  def _flat_call(self):
    """The packed signature's graph function as a call on `[inputs][batch]` strings, or None.

    A signature call binds its keyword arguments to the function's structured inputs and packs
    the outputs into a dict; `tf.constant` converts a nested list by way of the eager device
    placement, and the graph function's own `call_flat` enters three context managers before
    it executes the call op: together 0.1-0.2 ms of Python per call, a third of a single
    mention's encoding on 2 cores (issue 17). This call builds the string tensor on the host
    CPU device directly and executes the function's call op through what `call_flat` calls
    underneath (the eager context's `call_function`: its function-call attributes and
    cancellation context as `call_flat`'s), none of which is public API. Used only where all
    of it exists and gives the signature's own output on a probe; otherwise (another
    TensorFlow version) None, and calls go through the signature.
    """
    function = getattr(self._packed, "_inference_function", None)
    captured = list(getattr(self._packed, "captured_inputs", None) or ())
    try:
      # pylint: disable=g-import-not-at-top
      from tensorflow.python.eager import context
      from tensorflow.python.framework import ops
      name = function.name
      num_outputs = len(function.function_type.flat_outputs)
      host = tf.config.list_logical_devices("CPU")[0].name
      string_dtype = tf.string.as_datatype_enum
      ctx = context.context()
    except Exception:  # pylint: disable=broad-except
      return None

    def call(rows):
      packed = ops.EagerTensor(rows, host, string_dtype)
      return ctx.call_function(name, [packed] + captured, num_outputs)[0]

    probe = [["Probe text, ünïcode 1."] * 2] * len(self._packed_names)
    try:
      fast = call(probe).numpy()
    except Exception:  # pylint: disable=broad-except
      return None
    slow = self._packed(**{PACKED_INPUT: tf.constant(probe, tf.string)})[OUTPUT_KEY].numpy()
    return call if fast.shape == slow.shape and np.array_equal(fast, slow) else None

  def __call__(self, features: Dict[str, object], batch_size: int = 1024) -> np.ndarray:
    missing = [n for n in self.input_names
               if n not in features and n not in OPTIONAL_INPUTS]
    if missing:
      raise ValueError(f"{self.path}: missing inputs {missing}; expected {self.input_names}")
    given = [n for n in self.input_names if n in features]
    sizes = {len(features[n]) for n in given}
    if len(sizes) != 1:
      raise ValueError(f"{self.path}: inputs have different lengths {sorted(sizes)}")
    n = sizes.pop()
    features = {**{name: [""] * n for name in self.input_names if name not in features},
                **features}
    packed = self._packed_names is not None and not any(
        isinstance(features[name], tf.Tensor) for name in self.input_names)
    out = []
    for start in range(0, n, batch_size):
      if packed:
        rows = [list(features[name][start:start + batch_size]) for name in self._packed_names]
        out.append(self._packed_call(rows) if self._packed_call is not None
                   else self._packed(**{PACKED_INPUT: tf.constant(rows, tf.string)})[OUTPUT_KEY])
        continue
      batch = {name: tf.constant(list(features[name][start:start + batch_size]), tf.string)
               if not isinstance(features[name], tf.Tensor)
               else features[name][start:start + batch_size] for name in self.input_names}
      out.append(self._fn(**batch)[OUTPUT_KEY])
    if not out:
      return np.zeros((0, int(self._fn.structured_outputs[OUTPUT_KEY].shape[-1])), np.float32)
    if len(out) == 1:
      return out[0].numpy()
    return np.concatenate([o.numpy() for o in out], axis=0)


def load_encoder(path: str) -> Encoder:
  """Loads a mention or entity encoder SavedModel (importing tensorflow_text first)."""
  if not os.path.exists(os.path.join(path, "saved_model.pb")):
    raise FileNotFoundError(f"{path}: no saved_model.pb (not an exported encoder)")
  return Encoder(path)
