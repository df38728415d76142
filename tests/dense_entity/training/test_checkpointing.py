"""model_dir state: vocabulary file, checkpoint keys, restore errors that name the checkpoint."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.modeling import models
from dense_entity.training import checkpointing
from dense_entity.training import optimizers


def test_vocabulary_round_trips_and_is_empty_without_a_file(tmp_path):
  assert checkpointing.read_vocabulary(str(tmp_path)) == []
  checkpointing.write_vocabulary(str(tmp_path), ["the", "river", "zug"])
  assert checkpointing.read_vocabulary(str(tmp_path)) == ["the", "river", "zug"]
  assert sorted(os.listdir(tmp_path)) == [checkpointing.VOCAB_FILE]  # no temp file left


def test_restore_model_without_a_checkpoint_names_the_directory(tmp_path):
  config.save(config.get_preset("tiny"), str(tmp_path))
  with pytest.raises(FileNotFoundError, match="no checkpoint in .*checkpoints"):
    checkpointing.restore_model(str(tmp_path))


def test_checkpoint_keys_restore_into_a_new_program(tmp_path):
  # The object graph keys ('model', 'optimizer', 'step', 'mining_round') are what existing
  # checkpoints hold; a fresh model restores every variable, and restore_model reads the model.
  cfg = config.get_preset("tiny")
  model_dir = str(tmp_path)
  config.save(cfg, model_dir)

  def state():
    model = models.DualEncoder(cfg.model, [])
    optimizer = optimizers.make_optimizer(cfg.train)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    mining_round = tf.Variable(0, dtype=tf.int64)
    return checkpointing.checkpoint_manager(model_dir, model, optimizer, step, mining_round)

  checkpoint, manager = state()
  assert checkpointing.restore_latest(checkpoint, manager) is None
  checkpoint.step.assign(7)
  checkpoint.mining_round.assign(2)
  checkpoint.model.scale.assign(3.5)
  manager.save(checkpoint_number=7)
  names = {name.split("/")[0] for name, _ in tf.train.list_variables(manager.latest_checkpoint)}
  assert {"model", "optimizer", "step", "mining_round"} <= names

  restored, _ = state()
  path = checkpointing.restore_latest(restored, tf.train.CheckpointManager(
      restored, os.path.join(model_dir, checkpointing.CHECKPOINT_DIR), max_to_keep=1))
  assert path.endswith("ckpt-7")
  assert (int(restored.step.numpy()), int(restored.mining_round.numpy())) == (7, 2)
  model, _ = checkpointing.restore_model(model_dir)
  np.testing.assert_array_equal(np.asarray(model.scale), 3.5)


def test_checkpoint_without_the_mining_round_is_refused_naming_it(tmp_path):
  cfg = config.get_preset("tiny")
  model = models.DualEncoder(cfg.model, [])
  old = tf.train.Checkpoint(model=model, step=tf.Variable(0, dtype=tf.int64))
  path = old.save(os.path.join(str(tmp_path), checkpointing.CHECKPOINT_DIR, "ckpt"))
  checkpoint, manager = checkpointing.checkpoint_manager(
      str(tmp_path), models.DualEncoder(cfg.model, []), optimizers.make_optimizer(cfg.train),
      tf.Variable(0, dtype=tf.int64), tf.Variable(0, dtype=tf.int64))
  with pytest.raises(ValueError, match=re.escape(f"checkpoint {path} does not hold every")):
    checkpointing.restore_latest(checkpoint, manager)
