"""Trainer: learns on a tiny extraction, checkpoints, resumes, rejects bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.training import checkpointing
from dense_entity.training import initialization
from dense_entity.training import optimizers
from dense_entity.training import trainer as trainer_lib
from tests import testutil


def _cfg(steps):
  cfg = config.get_preset("tiny")
  cfg.train.train_steps = steps
  cfg.train.eval_every = 10
  return cfg


def test_trains_resumes_and_keeps_config(tmp_path, caplog):
  extract = str(tmp_path / "extract")
  model_dir = str(tmp_path / "model")
  testutil.write_tiny_extraction(extract)
  t = trainer_lib.Trainer(_cfg(20), extract, model_dir)
  first = t.train()
  assert first["step"] == 20
  assert 0.0 <= first["heldout_in_batch_recall@1"] <= 1.0
  assert np.isfinite(first["loss"])
  with open(os.path.join(model_dir, config.CONFIG_FILE)) as f:
    assert json.load(f)["train"]["train_steps"] == 20

  # A new trainer on the same model_dir resumes at step 20 with the same weights; asked for
  # no more steps, it says it has nothing to train (it exited 0 silently).
  t2 = trainer_lib.Trainer(_cfg(20), extract, model_dir)
  assert int(t2.step.numpy()) == 20
  with caplog.at_level("WARNING"):
    assert t2.train()["step"] == 20
  assert f"{model_dir} is at step 20, not below train_steps 20: nothing to train" in caplog.text
  for a, b in zip(t.model.trainable_variables, t2.model.trainable_variables):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  slots = [s.numpy() for group in t2.optimizer.slots for s in group]
  assert any(np.any(s != 0) for s in slots)  # optimizer state restored, not re-initialised
  t2.cfg.train.train_steps = 30
  assert t2.train()["step"] == 30
  model, _ = trainer_lib.restore_model(model_dir)
  np.testing.assert_array_equal(np.asarray(model.embedding.embeddings),
                                np.asarray(t2.model.embedding.embeddings))


def test_loss_decreases_on_tiny_data(tmp_path):
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  cfg = _cfg(60)
  t = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  losses = []
  t.train(lambda n, m: losses.append(m["loss"]))
  assert losses[-1] < losses[0]


def test_missing_extraction_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="MANIFEST.json"):
    trainer_lib.Trainer(_cfg(5), str(tmp_path / "nothing"), str(tmp_path / "model"))


def test_empty_extraction_is_refused_before_anything_is_written(tmp_path):
  extract = tmp_path / "extract"
  testutil.write_tiny_extraction(str(extract))
  (extract / "MANIFEST.json").write_text(
      json.dumps({"counts": {"mentions_train": 0}, "pages_skipped": 1}))
  with pytest.raises(ValueError, match="0 training mentions"):
    trainer_lib.Trainer(_cfg(5), str(extract), str(tmp_path / "model"))
  assert not (tmp_path / "model").exists()


def test_cli_reports_bad_input_without_traceback(tmp_path, capsys):
  from dense_entity import cli  # pylint: disable=g-import-not-at-top
  ws = tmp_path / "ws"
  assert cli.main(["demo", "--workspace", str(ws), "--input", "/nonexistent/*.bz2"]) == 2
  err = capsys.readouterr().err
  assert "no input files match" in err and "Traceback" not in err
  assert not ws.exists()


def test_hard_negative_pairs_are_drawn_at_the_rate_of_their_mentions(tmp_path):
  # 32 training mentions, batch 8: with 12 pairs, 8 * 12 / 32 = 3 pairs per step; never
  # fewer than 1 nor more than a batch.
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  t = trainer_lib.Trainer(_cfg(5), extract, str(tmp_path / "model"))
  assert t.num_train_mentions == 32
  for pairs, per_step in ((12, 3), (13, 4), (1, 1), (1000, 8)):
    t.set_hard_negatives([], 1, num_pairs=pairs)
    assert t.pair_batch_size == per_step, pairs
  with pytest.raises(ValueError, match="already trained on round 1"):
    t.set_hard_negatives([], 0, num_pairs=1)


def test_the_same_span_is_told_apart_by_its_context(tmp_path):
  # 'Alder' is the harbor town in one context and the tree in another: only the context
  # features can separate them, so this fails if the context path of the mention encoder is
  # not wired into the encoding.
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  rows = [
      ("Alder", "ships leave", "daily for the harbor", "ships leave [MASK] daily for the harbor",
       "Port Alder", "Port Alder is a harbor town.", ["Towns"]),
      ("Alder", "the", "tree has catkins in the forest",
       "the [MASK] tree has catkins in the forest", "Alder", "Alder is a tree.", ["Trees"]),
  ] + [r for r in testutil.MENTIONS if r[4] not in ("Port Alder", "Ore River")]
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract, repeats=8, mentions=rows)
  cfg = _cfg(300)
  cfg.train.eval_every = 300
  t = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  t.train()
  titles = sorted({r[4] for r in rows})
  entities = {r[4]: r for r in rows}
  encoded = t.model.entity_encoder({
      schema.ENTITY_TITLE: tf.constant(titles),
      schema.ENTITY_TEXT: tf.constant([entities[x][5] for x in titles]),
      schema.ENTITY_CATEGORIES: tf.constant(["|".join(entities[x][6]) for x in titles])})
  mentions = t.model.mention_encoder({
      schema.MENTION_SPAN: tf.constant(["Alder", "Alder"]),
      schema.MENTION_LEFT: tf.constant([rows[0][1], rows[1][1]]),
      schema.MENTION_RIGHT: tf.constant([rows[0][2], rows[1][2]]),
      schema.MENTION_SENTENCE: tf.constant([rows[0][3], rows[1][3]])})
  best = np.argmax(np.asarray(mentions) @ np.asarray(encoded).T, axis=1)
  assert [titles[i] for i in best] == ["Port Alder", "Alder"]


def test_checkpoint_missing_a_variable_is_a_clear_error(tmp_path):
  # A checkpoint written without the mining round (an older version of the trainer) names
  # itself instead of failing with TensorFlow's AssertionError.
  extract, model_dir = str(tmp_path / "extract"), str(tmp_path / "model")
  testutil.write_tiny_extraction(extract)
  t = trainer_lib.Trainer(_cfg(5), extract, model_dir)
  old = tf.train.Checkpoint(model=t.model, optimizer=t.optimizer, step=t.step)
  manager = tf.train.CheckpointManager(
      old, os.path.join(model_dir, trainer_lib.CHECKPOINT_DIR), max_to_keep=1)
  manager.save(checkpoint_number=5)
  with pytest.raises(ValueError, match="ckpt-5 does not hold every variable"):
    trainer_lib.Trainer(_cfg(5), extract, model_dir)


def test_context_match_idf_comes_from_entity_texts_and_survives_resume_and_export(tmp_path):
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  extract = str(tmp_path / "extract")
  model_dir = str(tmp_path / "model")
  num_entities = len(testutil.write_tiny_extraction(extract))
  cfg = _cfg(10)
  cfg.model.context_match_dim = 16
  t = trainer_lib.Trainer(cfg, extract, model_dir)
  featurize = lambda text: t.model.text_featurizer(tf.constant([text]))[0].numpy()[0]
  idf = t.model.context_match.term_weights.numpy()
  # 'switzerland' is in one entity's text (Zug), 'norland' in two (Ore River's text, Norland's
  # title and text); 'fish' only in a mention context, so it can match no entity: weight 0.
  np.testing.assert_allclose(idf[featurize("switzerland")], np.log((1 + num_entities) / 2) + 1,
                             rtol=1e-6)
  np.testing.assert_allclose(idf[featurize("norland")], np.log((1 + num_entities) / 3) + 1,
                             rtol=1e-6)
  assert idf[featurize("fish")][0] == 0.0
  t.train()
  resumed = trainer_lib.Trainer(cfg, extract, model_dir)  # the same model (test_provenance)
  np.testing.assert_array_equal(resumed.model.context_match.term_weights.numpy(), idf)
  restored, _ = trainer_lib.restore_model(model_dir)  # what export.export_model loads
  np.testing.assert_array_equal(restored.context_match.term_weights.numpy(), idf)
  manifest = savedmodel.export_encoders(resumed.model, str(tmp_path / "export"))
  assert manifest["encoding_dim"] == cfg.model.encoding_dim + 16


def test_bad_context_match_settings_are_refused_before_model_dir_is_written(tmp_path):
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  for dim, weight, message in ((-1, 0.25, "context_match_dim"), (16, 1.5, "context_match_weight")):
    cfg = _cfg(5)
    cfg.model.context_match_dim, cfg.model.context_match_weight = dim, weight
    with pytest.raises(ValueError, match=message):
      trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
    assert not (tmp_path / "model" / config.CONFIG_FILE).exists()


def test_names_moved_to_the_parts_stay_importable_from_trainer():
  # Callers (export.export_model, the retriever's tests, demo) import these from trainer.
  assert trainer_lib.restore_model is checkpointing.restore_model
  assert trainer_lib.read_vocabulary is checkpointing.read_vocabulary
  assert (trainer_lib.VOCAB_FILE, trainer_lib.CHECKPOINT_DIR) == ("vocab.txt", "checkpoints")
  assert trainer_lib.read_glove is initialization.read_glove
  assert trainer_lib.document_frequencies is initialization.document_frequencies
  assert trainer_lib.make_optimizer is optimizers.make_optimizer


def _dedup_softmax_loss(mentions, entities, titles, scale):
  """Per-row in-batch softmax loss on the de-duplicated batch, in plain numpy: each distinct
  entity once (its first column's encoding), row i's label its own entity."""
  distinct = list(dict.fromkeys(titles))
  table = np.stack([entities[titles.index(t)] for t in distinct])
  losses = []
  for row, title in enumerate(titles):
    logits = scale * (mentions[row] @ table.T)
    top = logits.max()
    losses.append(top + np.log(np.sum(np.exp(logits - top))) - logits[distinct.index(title)])
  return np.array(losses)


def test_training_step_counts_each_distinct_entity_once_per_row(tmp_path):
  # Bug bank ex-03 through the trainer: the first batch of the tiny extraction is 'Ore River',
  # 'Port Alder', 'Ore River' (mention 'the river'), 'Birch Cove'. The step's loss must be the
  # loss of the de-duplicated batch, computed here without the project's mask.
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.modeling import tasks  # pylint: disable=g-import-not-at-top
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract, repeats=1)
  cfg = _cfg(1)
  cfg.train.batch_size = 4
  t = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  batch = next(iter(records.mention_dataset(t.train_files, 4)))
  titles = [v.decode() for v in batch[schema.ENTITY_TITLE].numpy()]
  assert titles == ["Ore River", "Port Alder", "Ore River", "Birch Cove"]
  steps = t._steps  # pylint: disable=protected-access
  logits, labels, mentions, entities, mask = steps.replica_logits(batch)
  mentions, entities = mentions.numpy(), entities.numpy()
  np.testing.assert_allclose(entities[2], entities[0], atol=1e-6)  # one entity, one encoding
  expected = _dedup_softmax_loss(mentions, entities, titles, float(t.model.scale.numpy()))
  np.testing.assert_allclose(tasks.in_batch_softmax_loss(logits, labels).numpy(), expected,
                             rtol=1e-5, atol=1e-6)
  # Rows 1 and 3 see 'Ore River' once; rows 0 and 2 never see each other's copy.
  assert mask.numpy().tolist() == [[False, False, True, False], [False, False, True, False],
                                   [True, False, False, False], [False, False, True, False]]
  # The step that trains (before its update) reports the mean of the same losses.
  loss, _ = steps.train_step(batch)
  np.testing.assert_allclose(float(loss), expected.mean(), rtol=1e-5)
