"""Redirects as context-free training mentions (kb.redirect_examples), trained on as their own
split beside other labeled splits (Trainer.set_labeled_mentions with a name)."""

import collections

import numpy as np
import pytest

from dense_entity.kb import redirect_examples
from dense_entity.kb import schema
from dense_entity.modeling import config
from dense_entity.training import trainer as trainer_lib
from tests import testutil

_ALIASES = {"Ore River": ["Ore Stream", "River Ore", "The Ore", "Oreriver", "Ore river (Norland)",
                          "Norland's river"],
            "Port Alder": ["Alder Port", "Alder harbour", "Portalder", "Alder (port)"]}


@pytest.fixture
def extract(tmp_path):
  path = str(tmp_path / "extract")
  testutil.write_tiny_extraction(path, aliases=_ALIASES)
  return path


def _decoded(examples, i):
  return {name: values[i].decode("utf-8") for name, values in examples.items()}


def test_every_redirect_becomes_a_context_free_mention_of_its_target(extract):
  examples, stats = redirect_examples.load(extract, max_examples=100)
  assert stats == {"entities": 6, "entities_with_redirects": 2, "redirects": 10, "used": 10,
                   "distinct_entities": 2}
  assert set(examples) == set(redirect_examples.EXAMPLE_KEYS)
  pairs = set()
  for i in range(10):
    ex = _decoded(examples, i)
    pairs.add((ex[schema.MENTION_SPAN], ex[schema.ENTITY_TITLE]))
    assert (ex[schema.MENTION_LEFT], ex[schema.MENTION_RIGHT]) == ("", "")
    assert ex[schema.MENTION_SENTENCE] == "[MASK]"
    assert ex[schema.SOURCE_PAGE] == "redirect"
    # The redirect used as the span is left out of the entity's aliases; the others stay.
    others = ex[schema.ENTITY_ALIASES].split("|")
    assert ex[schema.MENTION_SPAN] not in others
    assert len(others) == len(_ALIASES[ex[schema.ENTITY_TITLE]]) - 1
    if ex[schema.ENTITY_TITLE] == "Ore River":
      assert ex[schema.ENTITY_TEXT] == "The Ore River is a river in Norland."
      assert ex[schema.ENTITY_CATEGORIES] == "Rivers"
  assert pairs == {(a, t) for t, names in _ALIASES.items() for a in names}
  assert len({_decoded(examples, i)[schema.MENTION_ID] for i in range(10)}) == 10
  kept, _ = redirect_examples.load(extract, max_examples=100, hold_out_span=False)
  assert all(v.decode().split("|") == _ALIASES[t.decode()] for t, v in
             zip(kept[schema.ENTITY_TITLE], kept[schema.ENTITY_ALIASES]))


def _batches(sizes, per_batch=3):
  """Entity batches as records.entity_dataset yields them: entity i has sizes[i] redirects."""
  rows = [(f"E{i}".encode(), b"|".join(b"r%d.%d" % (i, j) for j in range(n)))
          for i, n in enumerate(sizes)]
  for start in range(0, len(rows), per_batch):
    chunk = rows[start:start + per_batch]
    yield {schema.ENTITY_TITLE: np.array([t for t, _ in chunk], dtype=object),
           schema.ENTITY_ALIASES: np.array([a for _, a in chunk], dtype=object),
           schema.ENTITY_TEXT: np.array([b""] * len(chunk), dtype=object),
           schema.ENTITY_CATEGORIES: np.array([b""] * len(chunk), dtype=object)}


def test_the_draw_is_uniform_over_pairs_and_fixed_by_the_seed(extract):
  first, _ = redirect_examples.load(extract, max_examples=5, seed=3)
  again, _ = redirect_examples.load(extract, max_examples=5, seed=3)
  assert first == again
  # 4 entities with 1, 0, 6 and 3 redirects (10 pairs), batches of 3, memory pruned at 2 x 2:
  # each pair is kept with probability 2/10, whichever entity or batch it comes from.
  sizes = [1, 0, 6, 3]
  seen = collections.Counter()
  for seed in range(1000):
    pairs, counts = redirect_examples.sample_pairs(_batches(sizes), 2, seed)
    assert counts == {"entities": 4, "entities_with_redirects": 3, "redirects": 10}
    assert len(pairs) == 2 and pairs[0][0] != pairs[1][0]
    seen.update(p[0] for p in pairs)
  # ~200 each (binomial sd ~13); a draw biased by entity, batch or pruning gives >> 40 off.
  assert len(seen) == 10
  assert all(150 <= n <= 250 for n in seen.values()), seen
  # The other redirects of the pair's entity ride along as its aliases.
  pairs, _ = redirect_examples.sample_pairs(_batches([3]), 3, seed=0)
  assert {p[5] for p in pairs} == {b"r0.0|r0.1|r0.2"}
  assert sorted((p[0], p[4]) for p in pairs) == [(b"r0.0", b"r0.1|r0.2"), (b"r0.1", b"r0.0|r0.2"),
                                                 (b"r0.2", b"r0.0|r0.1")]


def test_a_kb_without_redirects_or_an_empty_draw_is_an_error(tmp_path, extract):
  bare = str(tmp_path / "bare")
  testutil.write_tiny_extraction(bare)
  with pytest.raises(ValueError, match=r"no entity of the KB in .*bare has a redirect \(6 "
                                       r"entities\); nothing to train on"):
    redirect_examples.load(bare)
  with pytest.raises(ValueError, match="max_examples must be >= 1, got 0"):
    redirect_examples.load(extract, max_examples=0)


def test_named_splits_are_drawn_at_their_fractions_beside_the_extractions(extract, tmp_path):
  pairs, _ = redirect_examples.load(extract)
  other = dict(pairs)
  other[schema.MENTION_ID] = [b"other:%d" % i for i in range(len(pairs[schema.MENTION_ID]))]
  cfg = config.get_preset("tiny")
  cfg.train.train_steps = 2
  trainer = trainer_lib.Trainer(cfg, extract, str(tmp_path / "model"))
  trainer.set_labeled_mentions(pairs, 0.25, name="redirects")
  trainer.set_labeled_mentions(other, 0.5, name="other")
  with pytest.raises(ValueError, match=r"redirects fraction 0.6 with the other labeled splits' "
                                       r"0.5 sums over 1"):
    trainer.set_labeled_mentions(pairs, 0.6, name="redirects")
  counts = collections.Counter(testutil.batch_sources(trainer, 80))
  # Expected 20 / 40 / 20 of 80 (extraction mention ids are '<page id>:<i>').
  assert set(counts) == {"redirect", "other", "1"}
  assert 8 <= counts["redirect"] <= 32 and 28 <= counts["other"] <= 52, counts
  trainer.set_labeled_mentions(pairs, 0.5, name="redirects")  # replaces; now sums to 1
  assert set(testutil.batch_sources(trainer, 20)) == {"redirect", "other"}
  assert trainer.train()["step"] == 2
