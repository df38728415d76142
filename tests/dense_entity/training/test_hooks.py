"""Training hooks: TensorBoard scalars under their tags; no held-out files give nan."""

import glob
import math
import os

import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.training import hooks


def test_summaries_write_each_metric_under_its_tag_in_order(tmp_path):
  summaries = hooks.Summaries(str(tmp_path))
  metrics = {"step": 5, "loss": 0.5, "train_in_batch_recall@1": 0.25, "scale": 10.0,
             "heldout_in_batch_recall@1": 0.75, "heldout_in_batch_auc": 0.875}
  summaries.write(5, metrics, hooks.TRAIN_SCALARS)
  summaries.write(5, metrics, hooks.HELDOUT_SCALARS)
  summaries.flush()
  (path,) = glob.glob(os.path.join(str(tmp_path), hooks.SUMMARIES_DIR, "events.*"))
  written = [(e.step, v.tag, float(tf.make_ndarray(v.tensor)))
             for e in tf.compat.v1.train.summary_iterator(path) for v in e.summary.value]
  assert written == [(5, "loss", 0.5), (5, "train_in_batch_recall_at_1", 0.25),
                     (5, "scale", 10.0), (5, "heldout_in_batch_recall_at_1", 0.75),
                     (5, "heldout_in_batch_auc", 0.875)]


def test_evaluation_without_heldout_files_is_nan():
  evaluator = hooks.HeldoutEvaluator(None, [], config.get_preset("tiny").train)
  recall, auc = evaluator.evaluate()
  assert math.isnan(recall) and math.isnan(auc)
