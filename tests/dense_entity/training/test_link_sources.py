"""Training on the mentions of some link sources only (TrainConfig.link_sources)."""

import collections
import math

import pytest
import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import config
from dense_entity.training import steps as steps_lib
from dense_entity.training import trainer as trainer_lib
from tests import testutil

# Training mention i of the tiny extraction (8 rows x 4 repeats) is a table cell when i % 4 == 1
# (8 of 32), a template value when i % 4 == 2 (8), else prose (16).
SOURCES = {0: "prose", 1: "table", 2: "template", 3: "prose"}


@pytest.fixture
def extract(tmp_path):
  path = str(tmp_path / "extract")
  testutil.write_tiny_extraction(path, link_source=lambda i: SOURCES[i % 4])
  return path


def _cfg(link_sources):
  cfg = config.get_preset("tiny")
  cfg.train.link_sources = link_sources
  return cfg


def test_link_sources_parse_and_refuse_unknown_names():
  cfg = config.get_preset("tiny")
  assert config.link_sources(cfg.train) == ()
  cfg.train.link_sources = " prose, template,prose "
  assert config.link_sources(cfg.train) == ("prose", "template")
  cfg.train.link_sources = "prose,tables"
  with pytest.raises(ValueError, match=r"\['tables'\] unknown"):
    config.validate(cfg)


def test_records_are_kept_by_their_link_source(extract):
  files = records.record_files(extract, schema.TRAIN_MENTIONS_PREFIX)
  assert records.count_link_sources(files) == {"prose": 16, "table": 8, "template": 8}
  ids = [int(b.decode().split(":")[1]) for batch in records.mention_dataset(
      files, 32, link_sources=("prose", "template")) for b in batch[schema.MENTION_ID].numpy()]
  assert ids == [i for i in range(32) if i % 4 != 1]
  assert len([r for r in records.keep_link_sources(tf.data.TFRecordDataset(files), ())]) == 32


def test_training_never_sees_a_left_out_source_and_q_counts_only_the_kept(extract, tmp_path):
  cfg = _cfg("prose,template")
  cfg.train.logq_correction = True
  trainer = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  assert trainer.num_train_mentions == 24
  seen = collections.Counter()
  iterator = iter(trainer._train_dataset())  # pylint: disable=protected-access
  for _ in range(12):
    for mention_id in next(iterator)[schema.MENTION_ID].numpy():
      seen[int(mention_id.decode().split(":")[1]) % 4] += 1
  assert set(seen) == {0, 2, 3} and seen[1] == 0
  # q over the 24 kept mentions: row r of the 8 is mention r, r + 8, ... (source r % 4), so
  # rows 1 and 5 (table cells) are gone: their golds get no probability, the others' grow.
  q = trainer.gold_probabilities()
  kept = collections.Counter(row[4] for r, row in enumerate(testutil.MENTIONS) if r % 4 != 1)
  for title in {row[4] for row in testutil.MENTIONS}:
    key = int(steps_lib.TrainSteps.gold_fingerprints(tf.constant([title])).numpy()[0])
    assert math.isclose(q.get(key, 0.0), kept[title] / 6), title
  assert math.isclose(sum(q.values()), 1.0, rel_tol=1e-9)
  assert trainer.train()["step"] == cfg.train.train_steps


def test_a_filter_that_keeps_too_few_mentions_names_the_sources_found(extract, tmp_path):
  with pytest.raises(ValueError, match=r"keeps 0 of the training mentions.*prose: 16, "
                                       r"table: 8, template: 8"):
    trainer_lib.Trainer(_cfg("gallery"), extract, str(tmp_path / "model"))
  assert not (tmp_path / "model").exists()  # refused before anything is written


def test_an_older_extraction_without_link_sources_is_refused_by_a_filter(tmp_path):
  path = str(tmp_path / "old")
  testutil.write_tiny_extraction(path)
  with pytest.raises(ValueError, match=r"none \(older extraction\): 32"):
    trainer_lib.Trainer(_cfg("prose"), path, str(tmp_path / "model"))
  # ... and trained on whole without one.
  assert trainer_lib.Trainer(_cfg(""), path, str(tmp_path / "m2")).num_train_mentions == 32
