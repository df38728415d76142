"""The sampling-bias (log q) correction of the in-batch softmax (TrainConfig.logq_correction)."""

import math

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import config
from dense_entity.training import steps as steps_lib
from dense_entity.training import trainer as trainer_lib
from tests import testutil


@pytest.fixture
def extract(tmp_path):
  path = str(tmp_path / "extract")
  testutil.write_tiny_extraction(path)
  return path


def _q(trainer, title):
  return trainer.gold_probabilities()[int(
      steps_lib.TrainSteps.gold_fingerprints(tf.constant([title])).numpy()[0])]


def test_gold_probabilities_follow_the_sources_at_their_fractions(extract, tmp_path):
  cfg = config.get_preset("tiny")
  cfg.train.logq_correction = True
  trainer = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  # The tiny extraction's 8 mentions: Ore River and Port Alder are the gold of 2 each.
  assert math.isclose(sum(trainer.gold_probabilities().values()), 1.0, rel_tol=1e-9)
  assert math.isclose(_q(trainer, "Ore River"), 2 / 8)
  assert math.isclose(_q(trainer, "Zug"), 1 / 8)
  labeled = {key: [b""] * 8 for key in records.MENTION_SPEC}
  labeled[schema.ENTITY_TITLE] = [b"Zug"] * 6 + [b"Elsewhere"] * 2
  trainer.set_labeled_mentions(labeled, 0.5, name="labeled")
  # Half the batches from the extraction, half from a split that is 3/4 Zug.
  assert math.isclose(_q(trainer, "Zug"), 0.5 / 8 + 0.5 * 6 / 8)
  assert math.isclose(_q(trainer, "Elsewhere"), 0.5 * 2 / 8)
  assert math.isclose(_q(trainer, "Ore River"), 0.5 * 2 / 8)
  assert math.isclose(sum(trainer.gold_probabilities().values()), 1.0, rel_tol=1e-9)


def test_corrected_logits_subtract_log_q_of_each_column_and_only_in_training(extract, tmp_path):
  cfg = config.get_preset("tiny")
  cfg.train.logq_correction = True
  trainer = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  batch = next(iter(records.mention_dataset(trainer.train_files, 8)))
  steps = trainer._steps  # pylint: disable=protected-access
  plain, labels, _, _, mask = steps.replica_logits(batch)
  steps.log_q = trainer._log_q_table()  # pylint: disable=protected-access
  corrected, _, _, _, _ = steps.replica_logits(batch, correct=True)
  again, _, _, _, _ = steps.replica_logits(batch)  # evaluation: never corrected
  np.testing.assert_allclose(again.numpy(), plain.numpy())
  log_q = np.log([_q(trainer, t.decode()) for t in batch[schema.ENTITY_TITLE].numpy()])
  keep = ~mask.numpy()
  np.testing.assert_allclose(corrected.numpy()[keep],
                             (plain.numpy() - log_q[np.newaxis, :])[keep], rtol=1e-5)
  assert (corrected.numpy()[~keep] < -1e8).all()  # duplicates stay masked
  assert labels.shape == (8,)
  metrics = trainer.train()
  assert metrics["step"] == cfg.train.train_steps and np.isfinite(metrics["loss"])
