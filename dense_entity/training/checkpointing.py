"""Checkpoints and vocabulary of a model_dir: what a training run saves and an export restores.

A model_dir holds `config.json` (config_lib.save), `vocab.txt` (VOCAB_FILE: the GloVe words of
the unigram rows, one per line; empty without GloVe) and `checkpoints/` (CHECKPOINT_DIR): the
model, optimizer slots, step and mining round under the keys 'model', 'optimizer', 'step' and
'mining_round', written every `eval_every` steps and at the end of a run. A new run with the same
model_dir resumes from the latest checkpoint; a checkpoint that lacks a variable of the program
is refused with an error naming it, never half-restored.
"""

import glob
import os
import shutil
from typing import List, Optional, Tuple

import tensorflow as tf

from dense_entity.modeling import config as config_lib
from dense_entity.modeling import models
from dense_entity.training import optimizers

VOCAB_FILE = "vocab.txt"
CHECKPOINT_DIR = "checkpoints"
MAX_TO_KEEP = 3


def read_vocabulary(model_dir: str) -> List[str]:
  """The words of `model_dir/vocab.txt`, in row order; [] when there is no such file."""
  path = os.path.join(model_dir, VOCAB_FILE)
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path) as f:
    return [w for w in f.read().split("\n") if w]


def write_vocabulary(model_dir: str, words: List[str]) -> None:
  """Writes `model_dir/vocab.txt` atomically (temp file + rename), one word per line."""
  path = os.path.join(model_dir, VOCAB_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write("".join(w + "\n" for w in words))
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def remove_partial_saves(model_dir: str) -> List[str]:
  """Removes the temporary directories of checkpoint saves that did not finish
  (`model_dir/checkpoints/ckpt-N_temp*`: TensorFlow writes a save's shards there before it
  moves them into place; a run stopped during a save left one, 212 MB for the small preset,
  which no later save of another step removed). Returns their paths."""
  removed = []
  for path in glob.glob(os.path.join(model_dir, CHECKPOINT_DIR, "ckpt-*_temp*")):
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed


def checkpoint_manager(model_dir: str, model: models.DualEncoder,
                       optimizer: optimizers.LazyOptimizer, step: tf.Variable,
                       mining_round: tf.Variable
                       ) -> Tuple[tf.train.Checkpoint, tf.train.CheckpointManager]:
  """The training state's checkpoint and its manager in `model_dir/checkpoints`.

  Args:
    model_dir: the run's directory.
    model: the dual encoder.
    optimizer: its optimizer (slot variables are checkpointed).
    step: int64 scalar variable, the global step.
    mining_round: int64 scalar variable, the last hard negative mining round trained on.

  Returns:
    (checkpoint, manager); the manager keeps the MAX_TO_KEEP latest checkpoints.
  """
  remove_partial_saves(model_dir)
  checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step,
                                   mining_round=mining_round)
  manager = tf.train.CheckpointManager(
      checkpoint, os.path.join(model_dir, CHECKPOINT_DIR), max_to_keep=MAX_TO_KEEP)
  return checkpoint, manager


def restore_latest(checkpoint: tf.train.Checkpoint,
                   manager: tf.train.CheckpointManager) -> Optional[str]:
  """Restores every variable of `checkpoint` from the manager's latest checkpoint.

  Returns:
    the restored checkpoint's path; None (nothing restored) when there is none yet.

  Raises:
    ValueError: naming the checkpoint when it lacks variables the program has.
  """
  latest = manager.latest_checkpoint
  if latest:
    _restore_all(checkpoint.restore(latest), latest)
  return latest


def restore_model(model_dir: str) -> Tuple[models.DualEncoder, config_lib.ExperimentConfig]:
  """Rebuilds the dual encoder of `model_dir` and restores its latest checkpoint.

  Raises:
    FileNotFoundError: when `model_dir` has no config or no checkpoint.
    ValueError: naming the checkpoint when it lacks variables of the model.
  """
  cfg = config_lib.load(model_dir)
  model = models.DualEncoder(cfg.model, read_vocabulary(model_dir))
  latest = tf.train.latest_checkpoint(os.path.join(model_dir, CHECKPOINT_DIR))
  if latest is None:
    raise FileNotFoundError(f"no checkpoint in {os.path.join(model_dir, CHECKPOINT_DIR)}")
  # Optimizer slots are in the checkpoint too; every model variable must be restored.
  _restore_all(tf.train.Checkpoint(model=model).read(latest).expect_partial(), latest)
  return model, cfg


def _restore_all(status, path: str) -> None:
  """Raises ValueError naming `path` when the checkpoint lacks variables the program has."""
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(
        f"checkpoint {path} does not hold every variable of this model (written by another "
        f"version of the program or another config?); train into a new model_dir. {e}") from e
