"""A training process killed with SIGKILL resumes with step, optimizer state and mining round."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from beam_pipelines.pipelines import mining
from dense_entity.modeling import config
from dense_entity.kb import schema
from dense_entity.training import trainer as trainer_lib
from tests import testutil


def _write_round(directory, round_, extract_dir):
  """A mining round's output: pair records of the tiny KB and its MANIFEST.json."""
  os.makedirs(directory)
  rows = testutil.MENTIONS
  path = os.path.join(directory, f"{schema.NEGATIVES_PREFIX}-00000-of-00001.tfrecord")
  pairs = 0
  with tf.io.TFRecordWriter(path) as w:
    for i, (span, left, right, sentence, gold, _, _) in enumerate(rows):
      negative = rows[(i + 1) % len(rows)]
      if negative[4] == gold:
        continue
      mention = {schema.MENTION_SPAN: span, schema.MENTION_LEFT: left,
                 schema.MENTION_RIGHT: right, schema.MENTION_SENTENCE: sentence,
                 schema.ENTITY_TITLE: gold, schema.MENTION_ID: f"1:{i}"}
      w.write(mining.pair_example(mention, negative[4], negative[5], negative[6],
                                  round_).SerializeToString())
      pairs += 1
  with open(os.path.join(directory, schema.MANIFEST_FILE), "w") as f:
    json.dump({"round": round_, "pairs": pairs}, f)
  return pairs


def _checkpoint_values(path):
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(path)
          if not name.startswith("save_counter") and name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _checkpoints(model_dir):
  state = tf.train.get_checkpoint_state(os.path.join(model_dir, trainer_lib.CHECKPOINT_DIR))
  return list(state.all_model_checkpoint_paths) if state else []


def test_sigkill_mid_run_resumes_from_the_last_checkpoint(tmp_path):
  extract, model_dir = str(tmp_path / "extract"), str(tmp_path / "model")
  testutil.write_tiny_extraction(extract)
  negatives = str(tmp_path / "negatives" / "round_1")
  _write_round(negatives, 1, extract)
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen(
      [sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
       f"--model_dir={model_dir}", "--preset=tiny", "--train_steps=100000000",
       "--eval_every=5", f"--hard_negatives={negatives}"],
      cwd=testutil.REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  try:
    deadline = time.time() + 240
    while len(_checkpoints(model_dir)) < 3:
      assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
      assert time.time() < deadline, "no checkpoints written in time"
      time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
  finally:
    proc.kill()
    proc.wait()
    proc.stderr.close()
  assert proc.returncode == -signal.SIGKILL

  latest = tf.train.latest_checkpoint(os.path.join(model_dir, trainer_lib.CHECKPOINT_DIR))
  saved = _checkpoint_values(latest)
  saved_step = int(latest.rsplit("-", 1)[1])
  assert saved_step >= 10 and saved_step % 5 == 0

  # A save stopped midway leaves TensorFlow's temporary shard directory (212 MB for the small
  # preset), which no save of another step removed: the resumed run removes it.
  partial = os.path.join(model_dir, trainer_lib.CHECKPOINT_DIR, f"ckpt-{saved_step + 5}_temp")
  os.makedirs(partial, exist_ok=True)
  with open(os.path.join(partial, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
    f.write(b"\0" * 1024)
  cfg = config.get_preset("tiny")
  trainer = trainer_lib.Trainer(cfg, extract, model_dir)
  assert not os.path.exists(partial)
  assert int(trainer.step.numpy()) == saved_step
  assert int(trainer.mining_round.numpy()) == 1
  # Every saved value (weights, optimizer slots and iteration count, scales, step, round) is
  # back exactly: writing the restored state gives the same checkpoint.
  rewritten = trainer.checkpoint.write(str(tmp_path / "rewritten" / "ckpt"))
  restored = _checkpoint_values(rewritten)
  assert set(restored) == set(saved)
  optimizer_keys = [k for k in saved if k.startswith("optimizer/")]
  assert optimizer_keys and any(np.any(saved[k] != 0) for k in optimizer_keys)
  for key, value in saved.items():
    np.testing.assert_array_equal(restored[key], value, err_msg=key)

  # The round's negatives cannot be swapped for an older round's, and training goes on from
  # the saved step on the same round.
  with pytest.raises(ValueError, match="already trained on round 1"):
    trainer.set_hard_negatives([], 0)
  trainer.set_hard_negatives(
      tf.io.gfile.glob(os.path.join(negatives, schema.NEGATIVES_PREFIX + "-*")), 1)
  trainer.cfg.train.train_steps = saved_step + 5
  assert trainer.train()["step"] == saved_step + 5
  assert int(trainer.mining_round.numpy()) == 1
