"""What the training loop does between chunks of steps: held-out evaluation and summaries.

- HeldoutEvaluator: in-batch recall@1 and pair AUC of held-out mentions (the extraction's
  `mentions_heldout` shards) over the first `eval_batches` global batches, always the same ones,
  so figures of different steps and runs compare;
- Summaries: TensorBoard scalars in `model_dir/summaries` (loss, train and held-out in-batch
  recall@1, held-out AUC, the softmax scale).
"""

import os
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.modeling import config as config_lib
from dense_entity.training import steps as steps_lib

SUMMARIES_DIR = "summaries"
# Metric name (as Trainer.train returns it) -> TensorBoard tag.
TRAIN_SCALARS = {"loss": "loss", "train_in_batch_recall@1": "train_in_batch_recall_at_1",
                 "scale": "scale"}
HELDOUT_SCALARS = {"heldout_in_batch_recall@1": "heldout_in_batch_recall_at_1",
                   "heldout_in_batch_auc": "heldout_in_batch_auc"}


class HeldoutEvaluator:
  """Held-out in-batch recall@1 and AUC of the model that `train_steps` steps.

  The eval tf.function and the dataset are built on the first call, then reused.

  Args:
    train_steps: steps_lib.TrainSteps; its `eval_step` scores a batch.
    files: held-out mention shards (may be empty).
    train_config: `eval_batches` is read at each call; batch_size and seed by the dataset.
  """

  def __init__(self, train_steps: steps_lib.TrainSteps, files: List[str],
               train_config: config_lib.TrainConfig):
    self._steps = train_steps
    self._files = files
    self._train_config = train_config
    self._eval_fn = self._dataset = None

  def evaluate(self) -> Tuple[float, float]:
    """(recall@1, AUC), each the mean over the first `eval_batches` held-out batches and the
    replicas; (nan, nan) when there are no held-out files or fewer mentions than one batch."""
    if not self._files:
      return float("nan"), float("nan")
    strategy = self._steps.strategy
    if self._eval_fn is None:
      self._eval_fn = tf.function(lambda b: strategy.run(self._steps.eval_step, args=(b,)))
      self._dataset = steps_lib.distributed_dataset(strategy, self._files, self._train_config,
                                                    repeat=False, shuffle=False)
    recalls, aucs = [], []
    for batch in self._dataset:
      if len(recalls) >= self._train_config.eval_batches:
        break
      recall, auc = self._eval_fn(batch)
      recalls.append(float(strategy.reduce(tf.distribute.ReduceOp.MEAN, recall, None)))
      aucs.append(float(strategy.reduce(tf.distribute.ReduceOp.MEAN, auc, None)))
    return (float(np.mean(recalls)) if recalls else float("nan"),
            float(np.mean(aucs)) if aucs else float("nan"))


class Summaries:
  """Writes metrics as TensorBoard scalars to `model_dir/summaries`."""

  def __init__(self, model_dir: str):
    self.writer = tf.summary.create_file_writer(os.path.join(model_dir, SUMMARIES_DIR))

  def write(self, step: int, metrics: Dict[str, float], names: Dict[str, str]) -> None:
    """Writes `metrics[name]` under tag `names[name]` at `step`, for each of `names` in order
    (TRAIN_SCALARS, HELDOUT_SCALARS)."""
    with self.writer.as_default(step=step):
      for name, tag in names.items():
        tf.summary.scalar(tag, metrics[name])

  def flush(self) -> None:
    self.writer.flush()
