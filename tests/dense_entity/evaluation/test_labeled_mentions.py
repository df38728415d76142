"""Entity-linking datasets as training mentions (evaluation.labeled_mentions) and training on
them as their own split (Trainer.set_labeled_mentions, train.py --train_dataset)."""

import json

import numpy as np
import pytest

from dense_entity.evaluation import labeled_mentions
from dense_entity.kb import schema
from dense_entity.modeling import config
from dense_entity.training import provenance
from dense_entity.training import trainer as trainer_lib
from tests import testutil

_DOC = "Ferries leave Port Alder daily. The Ore Stream meets the sea near Gull Town in May."


def _write_dataset(path, copies=5):
  """A jsonl dataset: per document a KB entity by its title, one by a redirect in another case
  ('ore stream' -> Ore River), a NIL and a gold missing from the KB."""
  with open(path, "w", encoding="utf-8") as f:
    for i in range(copies):
      mentions = [
          {"start": _DOC.index("Port Alder"), "end": _DOC.index("Port Alder") + 10,
           "entity": "Port_Alder"},
          {"start": _DOC.index("Ore Stream"), "end": _DOC.index("Ore Stream") + 10,
           "entity": "ore_stream"},
          {"start": _DOC.index("Gull Town"), "end": _DOC.index("Gull Town") + 9,
           "entity": "--NME--"},
          {"start": _DOC.index("May"), "end": _DOC.index("May") + 3, "entity": "May_(month)"},
      ]
      f.write(json.dumps({"id": f"doc{i}", "text": _DOC, "mentions": mentions}) + "\n")


@pytest.fixture
def extract_and_dataset(tmp_path):
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  dataset = tmp_path / "el_train.jsonl"
  _write_dataset(dataset)
  return extract, f"jsonl:{dataset}"


def test_linked_mentions_become_examples_with_the_kb_entitys_features(extract_and_dataset):
  extract, spec = extract_and_dataset
  examples, stats = labeled_mentions.load([spec], extract)
  assert stats["el_train"] == {"mentions": 20, "nil": 5, "gold_missing_from_kb": 5,
                               "used": 10, "distinct_entities": 2}
  assert stats["total"]["used"] == 10
  assert set(examples) == set(labeled_mentions.EXAMPLE_KEYS)
  assert all(len(values) == 10 for values in examples.values())
  first = {name: values[0].decode("utf-8") for name, values in examples.items()}
  assert first[schema.MENTION_SPAN] == "Port Alder"
  assert first[schema.MENTION_LEFT] == "Ferries leave"
  assert first[schema.MENTION_SENTENCE] == "Ferries leave [MASK] daily."
  # The gold entity's features come from the KB, categories '|'-joined as tf.data gives them.
  assert first[schema.ENTITY_TITLE] == "Port Alder"
  assert first[schema.ENTITY_TEXT] == "Port Alder is a harbor town."
  assert first[schema.ENTITY_CATEGORIES] == "Towns|Ports"
  assert first[schema.SOURCE_PAGE] == "el_train:doc0"
  second = {name: values[1].decode("utf-8") for name, values in examples.items()}
  assert (second[schema.MENTION_SPAN], second[schema.ENTITY_TITLE]) == ("Ore Stream",
                                                                        "Ore River")


def test_a_dataset_naming_no_kb_entity_is_an_error(tmp_path):
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  path = tmp_path / "elsewhere.jsonl"
  path.write_text(json.dumps({"text": "In May.", "mentions": [
      {"start": 3, "end": 6, "entity": "May_(month)"}]}) + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"names an entity of the KB .*nothing to train on"):
    labeled_mentions.load([f"jsonl:{path}"], extract)


def test_training_mixes_labeled_batches_at_the_fraction_and_records_the_stage(
    extract_and_dataset, tmp_path):
  extract, spec = extract_and_dataset
  examples, stats = labeled_mentions.load([spec], extract)
  cfg = config.get_preset("tiny")
  cfg.train.train_steps = 2
  model_dir = str(tmp_path / "model")
  trainer = trainer_lib.Trainer(cfg, extract, model_dir)
  with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\], got 0.0"):
    trainer.set_labeled_mentions(examples, 0.0)
  short = {name: values[:3] for name, values in examples.items()}
  with pytest.raises(ValueError, match="3 labeled mentions, fewer than one batch of 8"):
    trainer.set_labeled_mentions(short, 1.0)

  trainer.set_labeled_mentions(examples, 1.0)  # a fine-tuning stage: labeled batches only
  assert set(testutil.batch_sources(trainer, 5)) == {"el_train"}
  trainer.set_labeled_mentions(examples, 0.5)
  sources = testutil.batch_sources(trainer, 24)
  assert 4 <= sources.count("el_train") <= 20  # ~12 of 24 expected; the rest Wikipedia's
  assert set(sources) == {"el_train", "1"}  # extraction mention ids are '<page id>:<i>'

  before = [np.asarray(v).copy() for v in trainer.model.trainable_variables]
  metrics = trainer.train()
  assert metrics["step"] == 2
  assert any(not np.array_equal(a, np.asarray(b))
             for a, b in zip(before, trainer.model.trainable_variables))
  provenance.record_labeled_mentions(model_dir, {"datasets": [spec], "fraction": 0.5,
                                                 "from_step": 0, "to_step": 2,
                                                 "counts": stats})
  record = provenance.read_trained_on(model_dir)
  assert record["extraction"]  # the Wikipedia extraction's identity is kept
  assert record["labeled_mentions"][0]["counts"]["total"]["used"] == 10
