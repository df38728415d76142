"""One serving SavedModel: raw mention strings in, top-k entity titles and scores out.

Paper section 5.2: a mention is encoded and its nearest entities by cosine are retrieved from
the pre-encoded KB. This module puts the exported mention encoder, the (L2-normalised) entity
encodings and the entity titles into one SavedModel, with exact (brute-force) search inside the
graph, so a serving team loads one directory and needs nothing of this project:

  import tensorflow as tf
  import tensorflow_text  # registers the text ops of the featurizer; needed before loading
  serve = tf.saved_model.load("WS/export/serving").signatures["serving_default"]
  out = serve(mention_span=tf.constant(["Phoenix"]),
              mention_left_context=tf.constant([""]),
              mention_right_context=tf.constant(["once again played a late"]),
              mention_sentence=tf.constant(["[MASK] once again played a late night show"]))
  out["titles"]   # tf.string [batch, k]: entity titles (the entity ids), best first
  out["scores"]   # float32 [batch, k]: cosines, decreasing along each row
  out["row_ids"]  # int32 [batch, k]: row ids (line numbers of WS/index/entity_titles.txt)
  # With a NIL calibrator (EXPORT/nil_calibrator.json or --nil_calibrator):
  out["top1_probability"]  # float32 [batch]: calibrated P(titles[:, 0] is right)
  out["is_nil"]            # bool [batch]: top1_probability < the calibrator's threshold

The four inputs are the mention features of `dense_entity.kb.mention_features.mention_features`
(tf.string [batch] each). The search in the graph (`--search`, recorded in the manifest):
- brute_force: `l2_normalize`, one matmul against the entity encodings and `tf.math.top_k`; no
  custom ops beyond tensorflow-text's. Results equal `EntityRetriever` with the brute-force index
  (same titles; equal scores are ordered by row id in both; scores within float32 rounding).
- ah_tree: ScaNN's TF ops (import `scann.scann_ops.py.scann_ops` before loading), the state read
  from the saved WS/index/ah_tree (no rebuild) or, without one, built from the encodings.
- auto (default): brute force up to 1 GiB of float32 encodings, AH+tree above (all of
  Wikipedia). See `dense_entity.retrieval.serving_model`.

k is fixed at export time (`--k`, default 100; clamped to the number of entities); take a
prefix of each row for fewer. Encodings, ScaNN state and titles are variables of the
SavedModel, so a paper-size KB (5.7M x 300) stays out of the 2 GiB graph proto. A mention whose
encoding has zero norm (no cosine is defined; `EntityRetriever` raises for it) gets score 0.0
for every entity and the first k row ids.

Usage:
  python -m export.serving --workspace=WS [--k=100] [--search=auto|brute_force|ah_tree]
      [--output_dir=WS/export/serving]

Writes OUTPUT_DIR (default WS/export/serving) atomically: the SavedModel plus
`serving_manifest.json` {"model_fingerprint", "k", "num_entities", "encoding_dim", "inputs",
"outputs", "entity_source", "serving_fingerprint"}, written last.
"""

import os
from absl import flags
from dense_entity.common import entry

FLAGS = flags.FLAGS


def main(argv):
  del argv
  from dense_entity.retrieval import serving_model  # pylint: disable=g-import-not-at-top
  export_dir = FLAGS.export_dir or os.path.join(FLAGS.workspace, "export")
  index_dir = FLAGS.index_dir or os.path.join(FLAGS.workspace, "index")
  output_dir = FLAGS.output_dir or os.path.join(export_dir, serving_model.SERVING_DIR)
  calibrator = None if FLAGS.nil_calibrator == "none" else FLAGS.nil_calibrator
  manifest = serving_model.export_serving_model(export_dir, index_dir, output_dir, FLAGS.k,
                                                search=FLAGS.search, nil_calibrator=calibrator)
  print(f"{output_dir}: top-{manifest['k']} over {manifest['num_entities']} entities "
        f"({manifest['search']}, from {manifest['entity_source']}), model "
        f"{manifest['model_fingerprint']} (serving {manifest['serving_fingerprint']})")


if __name__ == "__main__":
  entry.quiet_native_logs()  # before TensorFlow loads (serving_model imports it)
  from dense_entity.retrieval import serving_model  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("workspace", None, "Workspace directory (WORKSPACE.md).")
  flags.DEFINE_string("export_dir", None, "Encoder export; default WS/export.")
  flags.DEFINE_string("index_dir", None, "Entity index directory; default WS/index.")
  flags.DEFINE_string("output_dir", None, "Serving SavedModel directory; default "
                      "EXPORT_DIR/serving.")
  flags.DEFINE_integer("k", serving_model.DEFAULT_K,
                       "Entities returned per mention (fixed in the graph).")
  flags.DEFINE_enum("search", "auto", ["auto", serving_model.BRUTE_FORCE, serving_model.AH_TREE],
                    "Search in the graph: exact brute force, ScaNN AH+tree (read from the saved "
                    "WS/index/ah_tree when there is one), or auto: brute force up to 1 GiB of "
                    "float32 encodings, AH+tree above.")

  flags.DEFINE_string("nil_calibrator", "auto", "NIL calibrator JSON (python -m "
                      "dense_entity.evaluate --fit_nil_calibrator) whose P(top-1 right) and NIL "
                      "answer become outputs top1_probability and is_nil; 'auto': "
                      "EXPORT_DIR/nil_calibrator.json when present; 'none'.")

  def _check(values):
    return bool(values["workspace"]) or bool(values["export_dir"] and values["index_dir"])

  flags.register_multi_flags_validator(["workspace", "export_dir", "index_dir"], _check,
                                       "give --workspace, or both --export_dir and --index_dir")
  entry.run(main, "python -m export.serving")
