"""One serving SavedModel: raw mention strings in, top-k entity titles and scores out.

Paper section 5.2: a mention is encoded and its nearest entities are retrieved from the
pre-encoded KB. This module puts the exported mention encoder, the entity encodings (as the
towers made them, see index.py) and the entity titles into one SavedModel, with the search
inside the graph, so a serving team loads one directory and needs nothing of this project:

  import tensorflow as tf
  import tensorflow_text  # registers the text ops of the featurizer; needed before loading
  from scann.scann_ops.py import scann_ops  # only for a ScaNN serving model (see below)
  serve = tf.saved_model.load("WS/export/serving").signatures["serving_default"]
  out = serve(mention_span=tf.constant(["Phoenix"]),
              mention_left_context=tf.constant([""]),
              mention_right_context=tf.constant(["once again played a late"]),
              mention_sentence=tf.constant(["[MASK] once again played a late night show"]))
  out["titles"]   # tf.string [batch, k]: entity titles (the entity ids), best first
  out["scores"]   # float32 [batch, k]: cosines, decreasing along each row
  out["row_ids"]  # int32 [batch, k]: row ids (line numbers of WS/index/entity_titles.txt)
  # With a NIL calibrator (EXPORT/nil_calibrator.json; retrieval.nil):
  out["top1_probability"]  # float32 [batch]: calibrated P(titles[:, 0] is right)
  out["is_nil"]            # bool [batch]: top1_probability < the calibrator's threshold

The four inputs are the mention features of `dense_entity.kb.mention_features`
(tf.string [batch] each). Two kinds of search (`search`, recorded in the manifest):
- 'brute_force' (KBs up to index.FLOAT16_STORAGE_BYTES of float32 encodings, 1 GiB): the
  mention encoder's graph, `l2_normalize`, one matmul against the entity encodings and
  `tf.math.top_k`; no custom ops beyond tensorflow-text's. Results equal `EntityRetriever`
  with the brute-force index (same titles; equal scores are ordered by row id in both).
- 'ah_tree' (larger KBs, e.g. all of Wikipedia: 4.5M x 192 float32 would be a 3.4 GB
  variable searched by a 3.4 GB read per query): ScaNN's TensorFlow ops, AH + tree with int8
  reordering (index.derive_config parameters), whose state (int8 vectors, codes, tree) is
  variables of the SavedModel; the searcher is built from them on the first call (a fraction
  of a second for a small KB, 14 s for 5.7M rows) and kept. Loading needs ScaNN's ops registered first (the import above). The
  state is read from the workspace's saved 'ah_tree' index when there is one (the index that
  `evaluate` and `link` search, less SOAR's spilled assignments, which the TF ops do not take:
  3x the leaves are scanned instead; index.ScannIndex.tf_state_arrays), else a searcher is
  built from the encodings.

k is fixed at export time (`--k`, default 100; clamped to the number of entities); take a
prefix of each row for fewer. The entity encodings ([num_entities, dim] float32) and titles are
variables of the SavedModel, so a paper-size KB (5.7M x 300) stays out of the 2 GiB graph proto.
A mention whose encoding has zero norm (no cosine is defined; `EntityRetriever` raises for it)
gets score 0.0 for every entity and the first k row ids.

Usage:
  python -m export.serving --workspace=WS [--k=100] [--output_dir=WS/export/serving]

Writes OUTPUT_DIR (default WS/export/serving) atomically: the SavedModel plus
`serving_manifest.json` {"model_fingerprint", "k", "num_entities", "num_rows", "encoding_dim",
"inputs",
"outputs", "entity_source", "serving_fingerprint"}, written last.
"""

import hashlib
import json
import os
import shutil
import uuid
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from dense_entity.common import fileio
from dense_entity.kb import schema
from dense_entity.retrieval import index_builder
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import kb_versions
from dense_entity.retrieval import nil as nil_lib
from dense_entity.serving import savedmodel

SERVING_DIR = "serving"
MANIFEST_FILE = "serving_manifest.json"
DEFAULT_K = 100
TITLES_KEY = "titles"
SCORES_KEY = "scores"
ROW_IDS_KEY = "row_ids"
OUTPUTS = (TITLES_KEY, SCORES_KEY, ROW_IDS_KEY)
# With a NIL calibrator (retrieval.nil): P(top-1 right) float32 [batch] and NIL bool [batch].
PROBABILITY_KEY = "top1_probability"
IS_NIL_KEY = "is_nil"


BRUTE_FORCE, AH_TREE = "brute_force", "ah_tree"
# AH+tree serving with name rows searches this many rows per result (NameRowsIndex searches 2x
# and more as needed; a graph cannot loop cheaply on that, so it takes more up front).
NAME_ROWS_FACTOR = 4


class ServingModule(tf.Module):
  """Mention features -> top-k entities, as one tf.function (brute force or ScaNN AH+tree).

  Args:
    mention_encoder: a loaded mention encoder SavedModel (tf.saved_model.load of
      WS/export/mention_encoder); its variables and lookup tables become part of this module.
    encodings: float32 `[rows, dim]` encodings (zero rows allowed): the entities, then their
      name rows when `row_entities` is given.
    titles: `[num_entities]` entity titles; titles[i] is row i of `encodings`.
    k: results per mention, 1 <= k <= num_entities.
    search: 'brute_force' (the encodings are a variable, exact search) or 'ah_tree' (a ScaNN
      searcher's state is, built here with `config`).
    config: ScaNN parameters for 'ah_tree' (default index.derive_config).
    row_entities: int32 `[rows]`, the entity id of every row (index.NameRowsIndex); an
      entity scores its best row. Brute force takes the exact maximum per entity
      (unsorted_segment_max); AH+tree searches `NAME_ROWS_FACTOR` * k rows and keeps each
      entity's first, so a query whose rows name fewer than k entities gets the rest with
      score -inf. None: one row per entity.
    scann_state_arrays: for 'ah_tree', the searcher state read from a saved index
      (index.ScannIndex.tf_state_arrays, with `config` its parameters) instead of a searcher
      built here from `encodings` (which may then be None).
    nil_calibrator: a retrieval.nil.NilCalibrator: adds the outputs `top1_probability`
      (float32 [batch], P(top-1 right) from the top-1 score and the top-1 minus top-2 margin,
      as NilCalibrator.probability computes it, in float32) and `is_nil` (bool [batch],
      probability < threshold). Needs k >= 2 unless the KB has one entity.
  """

  def __init__(self, mention_encoder, encodings: Optional[np.ndarray], titles: Sequence[str],
               k: int, search: str = BRUTE_FORCE, config: Optional[index_lib.IndexConfig] = None,
               row_entities: Optional[np.ndarray] = None,
               scann_state_arrays: Optional[Sequence[np.ndarray]] = None,
               nil_calibrator: Optional[nil_lib.NilCalibrator] = None):
    super().__init__(name="entity_retrieval")
    if nil_calibrator is not None and k < 2 and len(titles) > 1:
      raise ValueError(f"k={k}: a NIL calibrator needs the top-2 scores (its margin feature); "
                       "export with k >= 2")
    self.mention_encoder = mention_encoder
    self.entity_titles = tf.Variable(list(titles), trainable=False, dtype=tf.string,
                                     name="entity_titles")
    self.k = k
    encode = mention_encoder.signatures["serving_default"]
    spec = {n: tf.TensorSpec([None], tf.string, name=n) for n in schema.MENTION_FEATURES}
    if search == BRUTE_FORCE:
      self.entity_encodings = tf.Variable(encodings, trainable=False, dtype=tf.float32,
                                          name="entity_encodings")

      def top_k(q):
        scores = tf.matmul(q, self.entity_encodings, transpose_b=True)  # [batch, rows]
        if row_entities is not None:  # [batch, entities]: each entity's best row
          scores = tf.transpose(tf.math.unsorted_segment_max(
              tf.transpose(scores), self.row_entities, num_segments=len(titles)))
        # top_k is sorted and puts the lower index first among equal values (as brute force).
        return tf.math.top_k(scores, k=self.k, sorted=True)
    elif search == AH_TREE:
      from scann.scann_ops.py import scann_ops  # pylint: disable=g-import-not-at-top
      if scann_state_arrays is not None:
        if config is None:
          raise ValueError("scann_state_arrays need the index's config")
        self.scann_state = scann_ops.ScannState([tf.constant(a) for a in scann_state_arrays])
        num_rows = scann_state_arrays[2].shape[0]  # datapoint_to_token [rows]
      else:
        config = config or index_lib.derive_config(*encodings.shape)
        self.scann_state = index_lib.ScannIndex.build_tf_searcher(
            encodings, config).serialize_to_module()
        num_rows = len(encodings)
      rows_k = self.k if row_entities is None else min(num_rows, NAME_ROWS_FACTOR * self.k)
      pre_reorder = max(index_lib.REORDER_PER_RESULT * rows_k, config.reorder_num_neighbors)

      def search(q):
        # Built from the state variables on the first call, then kept by the resource manager.
        handle = self.scann_state.recreate_handle()
        # ScaNN's own thread pool splits a batch of queries across the cores; one query runs
        # on the calling thread (a pool hand-off would only add latency).
        row_ids, scores = scann_ops.scann_search_batched(handle, q, rows_k, pre_reorder, -1,
                                                          tf.shape(q)[0] > 1)
        scores = tf.reshape(tf.cast(scores, tf.float32), [-1, rows_k])
        row_ids = tf.reshape(tf.cast(row_ids, tf.int32), [-1, rows_k])
        if row_entities is None:
          return scores, row_ids
        entities = tf.gather(self.row_entities, row_ids)  # [batch, rows_k], best row first
        same = tf.equal(entities[:, :, None], entities[:, None, :])
        earlier = tf.linalg.band_part(tf.ones([rows_k, rows_k], tf.bool), -1, 0) & ~tf.eye(
            rows_k, dtype=tf.bool)  # [i, j]: j < i
        repeated = tf.reduce_any(same & earlier[None], axis=2)
        scores = tf.where(repeated, tf.constant(-np.inf, tf.float32), scores)
        best, at = tf.math.top_k(scores, k=self.k, sorted=True)
        return best, tf.gather(entities, at, batch_dims=1)

      def top_k(q):
        # ScaNN's batched search fails on an empty batch; that one has an empty answer.
        return tf.cond(tf.shape(q)[0] > 0, lambda: search(q),
                       lambda: (tf.zeros([0, self.k], tf.float32), tf.zeros([0, self.k], tf.int32)))
    else:
      raise ValueError(f"search must be {BRUTE_FORCE!r} or {AH_TREE!r}, got {search!r}")
    if row_entities is not None:
      self.row_entities = tf.Variable(np.asarray(row_entities, np.int32), trainable=False,
                                      name="row_entities")

    # One dict argument, so the signature's inputs are named by feature (savedmodel._Encoder).
    @tf.function(input_signature=[spec])
    def serve(features):
      # Inputs of different lengths: an error naming the input (also for an export made
      # before its encoder checked them).
      features = savedmodel.same_batch(features, list(features))
      q = encode(**features)[savedmodel.OUTPUT_KEY]
      # The index normalises queries too (index.py); an encoding of zero norm stays 0.
      q = tf.math.l2_normalize(q, axis=-1, epsilon=1e-12)
      top_scores, row_ids = top_k(q)
      out = {TITLES_KEY: tf.gather(self.entity_titles, row_ids),
             SCORES_KEY: top_scores,
             ROW_IDS_KEY: row_ids}
      if nil_calibrator is not None:
        probability = _nil_probability(top_scores, nil_calibrator)
        out[PROBABILITY_KEY] = probability
        out[IS_NIL_KEY] = probability < nil_calibrator.threshold
      return out

    self.serve = serve


def _nil_probability(top_scores, calibrator: nil_lib.NilCalibrator):
  """float32 [batch]: nil.NilCalibrator.probability in the graph, from scores [batch, k]."""
  top1 = top_scores[:, 0]
  floor = tf.fill(tf.shape(top1), tf.constant(nil_lib.MIN_COSINE, tf.float32))
  second = tf.maximum(top_scores[:, 1], floor) if top_scores.shape[1] != 1 else floor
  (w_top1, w_margin), bias = calibrator.weights, calibrator.bias  # nil.FEATURES' order
  return tf.sigmoid(tf.constant(bias, tf.float32) + tf.constant(w_top1, tf.float32) * top1
                    + tf.constant(w_margin, tf.float32) * (top1 - second))


def _fingerprint(directory: str) -> str:
  """sha256 (16 hex digits) over the files under `directory`, in a stable order."""
  h = hashlib.sha256()
  for root, dirs, files in os.walk(directory):
    dirs.sort()
    for name in sorted(files):
      path = os.path.join(root, name)
      h.update(os.path.relpath(path, directory).encode())
      with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
          h.update(block)
  return h.hexdigest()[:16]


def _saved_ah_tree(directory: str) -> bool:
  """Whether `directory` holds a saved index that was built as 'ah_tree' (not a fallback)."""
  path = os.path.join(directory, index_lib.MANIFEST_FILENAME)
  if not os.path.isfile(path):
    return False
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f).get("effective_kind") == index_lib.AH_TREE
  except ValueError:
    return False  # An unreadable manifest is reported when the index is loaded, not here.


def _entity_encodings(index_dir: str, fingerprint: str, dim: int):
  """Returns (encodings [n, dim] as the towers made them, description of where they came from).

  Prefers the brute-force index (checked against the model fingerprint and dim); without one,
  reads entity_encodings.npy after checking indexes.json names the same model.
  """
  brute_force_dir = os.path.join(index_dir, index_lib.BRUTE_FORCE)
  if os.path.isdir(brute_force_dir):
    index = index_lib.EntityIndex.load(brute_force_dir, expected_model_fingerprint=fingerprint,
                                       expected_dim=dim)
    if index.effective_kind == index_lib.BRUTE_FORCE:
      return index.encodings, brute_force_dir
  summary_path = os.path.join(index_dir, index_builder.SUMMARY_FILENAME)
  path = os.path.join(index_dir, "entity_encodings.npy")
  if not os.path.isfile(summary_path) or not os.path.isfile(path):
    raise FileNotFoundError(f"{index_dir}: neither a brute_force index nor entity_encodings.npy "
                            f"with {index_builder.SUMMARY_FILENAME}; run export.encode_entities")
  with open(summary_path, encoding="utf-8") as f:
    built_from = json.load(f).get("model_fingerprint")
  if built_from != fingerprint:
    raise ValueError(f"{path} was encoded by model {built_from!r} ({summary_path}), but the "
                     f"export is model {fingerprint!r}; re-encode the entities")
  index = index_lib.EntityIndex.build(np.load(path), index_lib.BRUTE_FORCE, fingerprint,
                                      normalize_rows=False)
  if index.dim != dim:
    raise ValueError(f"{path} has dim {index.dim}, the export has encoding_dim {dim}")
  return index.encodings, path


def export_serving_model(export_dir: str, index_dir: str, output_dir: Optional[str] = None,
                         k: int = DEFAULT_K, search: str = "auto",
                         nil_calibrator: Optional[str] = "auto") -> Dict:
  """Writes the serving SavedModel and its manifest, atomically (paper section 5.2).

  Args:
    export_dir: the encoder export (WS/export, with export_manifest.json).
    index_dir: the entity index directory (WS/index): entity_titles.txt and, for 'ah_tree',
      the saved ah_tree index (read, not rebuilt) or else, as for 'brute_force', the
      brute_force index (or entity_encodings.npy + indexes.json), made by the same model.
    output_dir: destination; default EXPORT_DIR/serving. Replaced when it exists; a failed
      export leaves the previous one (or nothing) in place. Where it is the symlink a KB
      update made (WS/export/serving -> ../index/serving: retrieval.kb_versions), the model
      replaces the serving model of the KB version it was built from, behind the symlink,
      so that the symlink stays and the next `dense-entity kb` update re-exports with this
      export's k, search and calibrator (the symlink was replaced by a directory that the
      updates then left stale).
    k: results per mention, fixed in the graph; clamped to the number of entities.
    search: 'brute_force', 'ah_tree' or 'auto' (brute force up to
      index.FLOAT16_STORAGE_BYTES of float32 encodings, AH + tree above).
    nil_calibrator: a NIL calibrator's path (retrieval.nil), whose probability and NIL answer
      become outputs `top1_probability` and `is_nil`; 'auto': EXPORT/nil_calibrator.json when
      it exists; None or '': none (the outputs are then absent).

  Returns:
    The manifest written to OUTPUT_DIR/serving_manifest.json.

  Raises:
    FileNotFoundError: the export, titles or encodings are missing (the message names them).
    ValueError: k < 1, encodings of another model or dimension, or titles not matching them.
    FileExistsError: `output_dir` holds something else than a serving model (another stage's
      output, a file), said before anything is built (fileio.check_replaceable).
  """
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
    raise ValueError(f"k must be a positive integer, got {k!r}")
  manifest = savedmodel.read_manifest(export_dir)
  fingerprint, dim = manifest["model_fingerprint"], int(manifest["encoding_dim"])
  calibrator = nil_lib.find_calibrator(export_dir, nil_calibrator, fingerprint)
  index_dir = kb_versions.resolve_index_dir(index_dir)  # one KB version throughout
  output_dir = os.path.abspath(output_dir or os.path.join(export_dir, SERVING_DIR))
  if (os.path.islink(output_dir) and os.path.dirname(os.path.realpath(output_dir))
      == os.path.realpath(index_dir)):
    output_dir = os.path.realpath(output_dir)  # the KB version's serving model (docstring)
  fileio.check_replaceable(output_dir, MANIFEST_FILE)
  titles_path = os.path.join(index_dir, index_lib.TITLES_FILENAME)
  if not os.path.isfile(titles_path):
    raise FileNotFoundError(f"{titles_path} is missing; run export.encode_entities")
  titles = index_builder.read_titles(titles_path)
  row_entities = index_lib.read_row_entities(index_dir)
  if search == "auto":
    rows = len(titles) if row_entities is None else len(row_entities)
    search = AH_TREE if rows * dim * 4 > index_lib.FLOAT16_STORAGE_BYTES else BRUTE_FORCE
  if search == AH_TREE and len(titles) < index_lib.MIN_TREE_SIZE:
    raise ValueError(f"{len(titles)} entities are too few for an AH+tree serving model "
                     f"(at least {index_lib.MIN_TREE_SIZE}); use search='brute_force'")
  encodings, config, scann_state_arrays = None, None, None
  ah_tree_dir = os.path.join(index_dir, index_lib.AH_TREE)
  if search == AH_TREE and _saved_ah_tree(ah_tree_dir):
    # The evaluated AH+tree index itself, read in seconds (no rebuild, no float32 encodings).
    index_manifest, scann_state_arrays = index_lib.ScannIndex.tf_state_arrays(
        ah_tree_dir, expected_model_fingerprint=fingerprint, expected_dim=dim)
    config = index_lib.IndexConfig(**index_manifest["parameters"])
    num_rows, source = int(index_manifest["num_entities"]), ah_tree_dir
  else:
    encodings, source = _entity_encodings(index_dir, fingerprint, dim)
    num_rows = encodings.shape[0]
  if row_entities is not None:
    try:
      index_lib.check_row_map(row_entities, num_rows, len(titles))
    except ValueError as e:
      raise ValueError(f"{os.path.join(index_dir, index_lib.ROW_ENTITIES_FILENAME)} does not "
                       f"fit {source} and {titles_path}: {e}") from e
  elif len(titles) != num_rows:
    raise ValueError(f"{titles_path} has {len(titles)} titles for {num_rows} entity "
                     f"encodings ({source})")
  k = min(int(k), len(titles))

  encoder_path = os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR)
  if not os.path.isfile(os.path.join(encoder_path, "saved_model.pb")):
    raise FileNotFoundError(f"{encoder_path}: no saved_model.pb (not an exported encoder)")
  # The encoder graph holds tensorflow-text ops; this import registers them.
  import tensorflow_text  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  module = ServingModule(tf.saved_model.load(encoder_path), encodings, titles, k, search,
                         config=config, row_entities=row_entities,
                         scann_state_arrays=scann_state_arrays, nil_calibrator=calibrator)
  del encodings, scann_state_arrays  # Held by the module's variables now.

  tmp = f"{output_dir}.tmp-{uuid.uuid4().hex[:8]}"
  os.makedirs(os.path.dirname(output_dir), exist_ok=True)
  try:
    tf.saved_model.save(module, tmp, signatures={"serving_default": module.serve})
    serving_manifest = {
        "model_fingerprint": fingerprint,
        "serving_fingerprint": _fingerprint(tmp),
        "k": k,
        "num_entities": len(titles),
        "num_rows": int(num_rows),
        "encoding_dim": dim,
        "inputs": list(schema.MENTION_FEATURES),
        "outputs": {TITLES_KEY: "tf.string [batch, k]", SCORES_KEY: "float32 [batch, k]",
                    ROW_IDS_KEY: "int32 [batch, k]",
                    **({PROBABILITY_KEY: "float32 [batch]", IS_NIL_KEY: "bool [batch]"}
                       if calibrator is not None else {})},
        "nil_calibrator": calibrator.to_dict() if calibrator is not None else None,
        "search": search,
        # The saved ah_tree index the ScaNN state was read from, or the encodings it (or the
        # brute-force variable) was built from.
        "entity_source": os.path.abspath(source),
        "titles": os.path.abspath(titles_path),
        "requires": ["tensorflow", "tensorflow_text"] + (["scann"] if search == AH_TREE else []),
    }
    with open(os.path.join(tmp, MANIFEST_FILE), "w", encoding="utf-8") as f:
      json.dump(serving_manifest, f, indent=2, sort_keys=True)
      f.write("\n")
    fileio.replace_directory(tmp, output_dir, MANIFEST_FILE)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return serving_manifest


def read_manifest(serving_dir: str) -> Dict:
  """Reads serving_manifest.json; FileNotFoundError naming it when the export is incomplete."""
  path = os.path.join(serving_dir, MANIFEST_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path} is missing: {serving_dir} holds no finished serving export")
  with open(path, encoding="utf-8") as f:
    return json.load(f)
