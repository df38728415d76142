"""Hard negative mining: the selection rule, and a mining round over a tiny workspace."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from beam_pipelines.pipelines import beam_io
from beam_pipelines.pipelines import extraction
from beam_pipelines.pipelines import mining
from dense_entity.modeling import config
from dense_entity.modeling import models
from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.training import trainer as trainer_lib
from dense_entity.retrieval import entity_encodings
from dense_entity.serving import savedmodel
from tests import testutil

TOP10 = [f"E{i}" for i in range(10)]


def test_gold_ranked_first_gives_no_negatives():
  assert mining.select_hard_negatives(TOP10, "E0") == []


def test_gold_at_rank_4_gives_the_3_above_it():
  assert mining.select_hard_negatives(TOP10, "E3") == ["E0", "E1", "E2"]


def test_gold_absent_from_top_10_gives_all_10():
  assert mining.select_hard_negatives(TOP10, "Gold") == TOP10


def test_gold_rank_is_its_place_among_the_k_or_k_when_absent():
  assert mining.gold_rank(TOP10, "E0") == 0
  assert mining.gold_rank(TOP10, "E3") == 3
  assert mining.gold_rank(TOP10, "Gold") == 10
  # Through redirects, as select_hard_negatives reads them: the redirect is the gold itself.
  assert mining.gold_rank(["Port Alder", "Ore Stream"], "Ore River",
                          {"Ore Stream": "Ore River"}) == 1


def test_pair_records_are_serialized_in_key_order():
  """A pair record's feature map is written in key order (deterministic serialization): the
  plain one follows the map's hash order, which changes with each process's hash seed, so two
  runs of one round wrote different bytes for the same pairs."""
  mention = {n: f"{n} value" for n in schema.MENTION_FEATURES}
  mention.update({schema.ENTITY_TITLE: "Gold", schema.MENTION_ID: "7:0"})
  element = ("Negative", {"entity": [("text", ["Cat"], ["Alias"])],
                          "negative": [(mention, 1, 3)]})
  [(key, (round_, record))] = list(mining._join(element))  # pylint: disable=protected-access
  assert (key, round_) == ("7:0\tNegative", 1)
  parsed = tf.train.Example.FromString(record)
  assert record == parsed.SerializeToString(deterministic=True)
  assert parsed.features.feature[schema.GOLD_RANK].int64_list.value == [3]


def test_redirect_to_gold_is_never_a_negative():
  # 'Ore Stream' redirects to the gold 'Ore River': it is the gold entity, not a negative.
  ranked = ["Ore Stream", "Port Alder", "Ore River"]
  redirects = {"Ore Stream": "Ore River"}
  assert mining.select_hard_negatives(ranked, "Ore River", redirects) == []
  assert mining.select_hard_negatives(["Port Alder", "Ore Stream"], "Ore River",
                                      redirects) == ["Port Alder"]


def test_spelling_variants_of_the_gold_are_not_negatives():
  # A plural, case or accent variant of the gold title is most likely a redirect to it whose
  # redirect page is missing from the dump; it is skipped and counted, and the titles around
  # it are kept in order.
  ranked = ["Aqueous solutions", "Solvent", "Gōzō Shioda", "Aqueous Solution", "Aqueous solution"]
  skipped = {}
  assert mining.select_hard_negatives(ranked, "Aqueous solution", skipped=skipped) == [
      "Solvent", "Gōzō Shioda"]
  assert skipped == {"spelling_variant_of_gold": 2}
  assert mining.spelling_key("Gōzō Shioda") == mining.spelling_key("Gozo shioda")
  # Different entities sharing a word stay negatives of each other.
  assert mining.select_hard_negatives(["Georgia (country)", "Georgia (U.S. state)"],
                                      "Georgia (U.S. state)") == ["Georgia (country)"]
  assert mining.spelling_key("Bus") != mining.spelling_key("Bu")


@pytest.fixture(scope="module")
def tiny_workspace(tmp_path_factory):
  root = tmp_path_factory.mktemp("ws")
  extract = str(root / "extract")
  testutil.write_tiny_extraction(extract)
  tf.keras.utils.set_random_seed(5)
  model = models.DualEncoder(config.get_preset("tiny").model)
  savedmodel.export_encoders(model, str(root / "export"))
  entity_encodings.encode_and_index(str(root / "export"), extract, str(root / "index"))
  return root


def _pairs(directory):
  files = tf.io.gfile.glob(os.path.join(directory, schema.NEGATIVES_PREFIX + "-*"))
  out = []
  for record in tf.data.TFRecordDataset(files):
    ex = tf.train.Example.FromString(record.numpy())
    f = ex.features.feature
    out.append((f[schema.MENTION_ID].bytes_list.value[0].decode(),
                f[schema.ENTITY_TITLE].bytes_list.value[0].decode(),
                f[schema.GOLD_ENTITY].bytes_list.value[0].decode(),
                f[schema.MINING_ROUND].int64_list.value[0],
                f[schema.PAIR_LABEL].int64_list.value[0],
                f[schema.GOLD_RANK].int64_list.value[0]))
  return out


def test_mining_rounds_append_and_deduplicate(tiny_workspace):
  root = tiny_workspace
  args = (str(root / "export"), str(root / "index"), str(root / "extract"))
  # A round killed earlier (its process gone) left its staging directory: removed by this one
  # (issue 14, item 6), as is the owner record of this round's own staging.
  killed = root / "neg" / ".staging-round_1-deadbeef"
  killed.mkdir(parents=True)
  finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                            capture_output=True, text=True, check=True)
  (killed / extraction.STAGING_OWNER_FILE).write_text(json.dumps(
      dict(extraction.staging_owner(), pid=int(finished.stdout))))
  stats1 = mining.run(*args, str(root / "neg" / "round_1"), 1)
  assert not killed.exists()
  assert not (root / "neg" / "round_1" / extraction.STAGING_OWNER_FILE).exists()
  pairs1 = _pairs(str(root / "neg" / "round_1"))
  # A random model ranks most golds below others: every train mention is mined.
  assert stats1["mentions_mined"] == len(testutil.MENTIONS) * 4
  assert stats1["pairs"] == len(pairs1) > 0
  assert len(set((m, e) for m, e, *_ in pairs1)) == len(pairs1)
  for mention_id, entity, gold, round_, label, rank in pairs1:
    assert entity != gold and round_ == 1 and label == 0 and 0 < rank <= 10
  # Every negative of a mention whose gold was outside the 10 searched is counted apart: the
  # pairs with rank 10 are exactly those.
  assert (stats1.get("negative_pairs_gold_not_in_top_k", 0)
          == sum(p[-1] == 10 for p in pairs1))
  assert stats1["negative_pairs_found"] == len(pairs1)
  with open(root / "neg" / "round_1" / schema.MANIFEST_FILE) as f:
    assert json.load(f)["pairs"] == len(pairs1)
  # Round 2 with the same model finds the same pairs: they are kept once, from round 1.
  stats2 = mining.run(*args, str(root / "neg" / "round_2"), 2,
                      previous_dir=str(root / "neg" / "round_1"))
  pairs2 = _pairs(str(root / "neg" / "round_2"))
  assert sorted(pairs2) == sorted(pairs1)
  assert stats2["pairs_already_mined"] == len(pairs1)


def test_a_round_whose_shard_writer_lost_records_publishes_nothing(tiny_workspace,
                                                                   monkeypatch):
  # The shard writer counts the records into and out of its shuffle (beam_io.FLOW_NAMESPACE;
  # issue 17: Beam's local multi_processing runner lost records there): a round whose counts
  # differ is an error naming the shuffle, and its output directory is not made.
  root = tiny_workspace
  counters = beam_io.counters
  seen = {}

  def lossy(result, namespace):
    counts = counters(result, namespace)
    if namespace == beam_io.FLOW_NAMESPACE:
      seen.update(counts)
      counts[f"{schema.NEGATIVES_PREFIX}/shards/out"] -= 1
    return counts
  monkeypatch.setattr(beam_io, "counters", lossy)
  out = root / "neg_lossy" / "round_1"
  with pytest.raises(RuntimeError, match=f"shuffle {schema.NEGATIVES_PREFIX}/shards: "
                                         r"(\d+) values in, (?!\1)\d+ out"):
    mining.run(str(root / "export"), str(root / "index"), str(root / "extract"), str(out), 1)
  assert not out.exists()
  assert not [p for p in os.listdir(out.parent) if p.startswith(".staging")]
  # A run that loses nothing: the records into the shuffle are those written.
  assert seen[f"{schema.NEGATIVES_PREFIX}/shards/in"] == seen[
      f"{schema.NEGATIVES_PREFIX}/written"] > 0


def test_workers_share_one_loaded_index(tiny_workspace):
  # Beam gives each thread of a worker its own copy of the DoFn, unpickled from the graph's:
  # the copies of one process hold the same encoder and index objects, so a 6M-entity index
  # is loaded once per worker, not once per thread.
  from apache_beam.internal import pickler  # pylint: disable=g-import-not-at-top
  root = tiny_workspace
  fn = mining.MineFn(str(root / "export"), str(root / "index"), "brute_force", 10, 1, None)
  first, second = pickler.loads(pickler.dumps(fn)), pickler.loads(pickler.dumps(fn))
  assert first is not second
  first.setup()
  second.setup()
  assert first._model is second._model  # pylint: disable=protected-access
  assert first._model.index is second._model.index  # pylint: disable=protected-access


def test_training_keeps_the_pairs_of_found_golds_only_when_asked(tiny_workspace, tmp_path):
  root = tiny_workspace
  # 3 nearest of the 8 entities: the random model finds some golds and misses others.
  out = str(tmp_path / "round_1")
  stats = mining.run(str(root / "export"), str(root / "index"), str(root / "extract"), out, 1,
                     k=3)
  pairs = _pairs(out)
  found = sum(p[-1] < 3 for p in pairs)
  assert 0 < found < len(pairs)
  assert stats["negative_pairs_gold_not_in_top_k"] == len(pairs) - found
  files = tf.io.gfile.glob(os.path.join(out, "hard_negatives-*"))
  cfg = config.get_preset("tiny")
  cfg.train.train_steps = 2
  t = trainer_lib.Trainer(cfg, str(root / "extract"), str(tmp_path / "model"))
  # 32 training mentions, batch 8: pairs per step follow the kept pairs only.
  t.set_hard_negatives(files, 1, max_gold_rank=2)
  assert t.pair_batch_size == min(8, -(-8 * found // 32))
  t.set_hard_negatives(files, 1)
  assert t.pair_batch_size == min(8, -(-8 * len(pairs) // 32))
  with pytest.raises(ValueError, match="no hard negative pairs with max_gold_rank"):
    t.set_hard_negatives(files, 1, max_gold_rank=0)
  # Pairs mined before the gold rank was recorded are refused by a limit, kept without one.
  old = tmp_path / "old.tfrecord"
  with tf.io.TFRecordWriter(str(old)) as writer:
    for record in tf.data.TFRecordDataset(files).take(3):
      ex = tf.train.Example.FromString(record.numpy())
      del ex.features.feature[schema.GOLD_RANK]
      writer.write(ex.SerializeToString())
  with pytest.raises(ValueError, match="carry no gold rank"):
    t.set_hard_negatives([str(old)], 1, max_gold_rank=2)
  t.set_hard_negatives([str(old)], 1)
  assert t.pair_batch_size == 1


def test_training_keeps_the_pairs_of_described_negatives_only_when_asked(tiny_workspace,
                                                                        tmp_path):
  root = tiny_workspace
  out = str(tmp_path / "round_1")
  mining.run(str(root / "export"), str(root / "index"), str(root / "extract"), out, 1, k=3)
  files = tf.io.gfile.glob(os.path.join(out, "hard_negatives-*"))
  # A copy whose first 3 pairs have a title-only negative (no description): those are left
  # out, the rest kept.
  described = tmp_path / "described.tfrecord"
  total = kept = 0
  with tf.io.TFRecordWriter(str(described)) as writer:
    for record in tf.data.TFRecordDataset(files):
      ex = tf.train.Example.FromString(record.numpy())
      if total < 3:
        ex.features.feature[schema.ENTITY_TEXT].bytes_list.value[:] = [b""]
      kept += bool(ex.features.feature[schema.ENTITY_TEXT].bytes_list.value[0])
      total += 1
      writer.write(ex.SerializeToString())
  assert 0 < kept <= total - 3
  cfg = config.get_preset("tiny")
  t = trainer_lib.Trainer(cfg, str(root / "extract"), str(tmp_path / "model"))
  t.set_hard_negatives([str(described)], 1, described_only=True, weight=0.25)
  # 32 training mentions, batch 8.
  assert t.pair_batch_size == min(8, -(-8 * kept // 32))
  assert t._steps.pair_weight == 0.25  # pylint: disable=protected-access
  batches = list(records.mention_dataset([str(described)], 64, described_only=True))
  assert sum(len(b[schema.ENTITY_TITLE]) for b in batches) == kept
  assert all(len(text) for b in batches for text in b[schema.ENTITY_TEXT].numpy())
  for weight in (0.0, -1.0, float("nan")):
    with pytest.raises(ValueError, match="weight must be positive"):
      t.set_hard_negatives([str(described)], 1, weight=weight)


def _pair_record(negative_title: str) -> bytes:
  return tf.train.Example(features=tf.train.Features(feature={
      schema.ENTITY_TITLE: tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[negative_title.encode("utf-8")]))})).SerializeToString()


def test_drop_negatives_leaves_out_the_pairs_of_the_excluded_entities():
  pairs = tf.data.Dataset.from_tensor_slices(
      [_pair_record(t) for t in ("Paris", "United States", "Paris, Texas", "United States",
                                 "Mercury (planet)")])
  excluded = records.entity_ids(tf.constant(["United States", "Mercury (planet)",
                                             "Not a negative"])).numpy()
  kept = [tf.train.Example.FromString(r.numpy()).features.feature[schema.ENTITY_TITLE]
          .bytes_list.value[0].decode() for r in records.drop_negatives(pairs, excluded)]
  assert kept == ["Paris", "Paris, Texas"]
  # None or no ids: every pair; the ids are those training gives gold entities.
  assert len(list(records.drop_negatives(pairs, None))) == 5
  assert len(list(records.drop_negatives(pairs, np.zeros([0], np.int64)))) == 5
  assert (records.entity_ids(tf.constant(["Paris"])).numpy()
          == trainer_lib.steps_lib.TrainSteps.gold_fingerprints(tf.constant(["Paris"])).numpy())


def test_training_leaves_out_negatives_that_are_frequent_training_golds(tiny_workspace,
                                                                         tmp_path):
  root = tiny_workspace
  out = str(tmp_path / "round_1")
  mining.run(str(root / "export"), str(root / "index"), str(root / "extract"), out, 1, k=3)
  files = sorted(tf.io.gfile.glob(os.path.join(out, "hard_negatives-*")))
  negatives = [tf.train.Example.FromString(r.numpy()).features.feature[schema.ENTITY_TITLE]
               .bytes_list.value[0].decode() for r in tf.data.TFRecordDataset(files)]
  golds = {}
  train = tf.io.gfile.glob(os.path.join(str(root / "extract"), schema.TRAIN_MENTIONS_PREFIX + "-*"))
  for r in tf.data.TFRecordDataset(train):
    title = tf.train.Example.FromString(r.numpy()).features.feature[schema.ENTITY_TITLE] \
        .bytes_list.value[0].decode()
    golds[title] = golds.get(title, 0) + 1
  cfg = config.get_preset("tiny")
  t = trainer_lib.Trainer(cfg, str(root / "extract"), str(tmp_path / "model"))
  ids, counts = t.training_gold_counts()
  assert sorted(counts.tolist()) == sorted(golds.values()) and sum(counts) == 32
  # In the tiny KB every entity is the gold of 4 or 8 of the 32 training mentions, so every
  # negative is a training gold: at most 0 keeps no pair, at most 4 those of 4-mention golds.
  assert set(golds.values()) == {4, 8}
  with pytest.raises(ValueError, match="whose negative is the gold of at most 0 training"):
    t.set_hard_negatives(files, 1, max_negative_golds=0)
  expected = [n for n in negatives if golds[n] == 4]
  assert 0 < len(expected) < len(negatives)
  t.set_hard_negatives(files, 1, max_negative_golds=4)
  assert len(t.excluded_negatives) == sum(1 for c in golds.values() if c == 8)
  assert t.pair_batch_size == min(8, -(-8 * len(expected) // 32))
  batches = list(records.mention_dataset(files, 64, excluded_negatives=t.excluded_negatives))
  assert sorted(title.decode() for b in batches for title in b[schema.ENTITY_TITLE].numpy()) \
      == sorted(expected)
  t.set_hard_negatives(files, 1)  # the paper's rule again: every pair
  assert t.excluded_negatives is None
  assert t.pair_batch_size == min(8, -(-8 * len(negatives) // 32))


def test_training_with_hard_negatives_uses_the_logistic_task(tiny_workspace, tmp_path):
  root = tiny_workspace
  out = str(root / "neg" / "round_1")
  if not os.path.exists(out):
    mining.run(str(root / "export"), str(root / "index"), str(root / "extract"), out, 1)
  cfg = config.get_preset("tiny")
  cfg.train.train_steps = 5
  cfg.train.eval_every = 5
  t = trainer_lib.Trainer(cfg, str(root / "extract"), str(tmp_path / "model"))
  t.train()
  a_h, b_h = float(t.model.hard_negative_scale.numpy()), float(t.model.hard_negative_bias.numpy())
  t.set_hard_negatives(tf.io.gfile.glob(os.path.join(out, "hard_negatives-*")), 1)
  t.cfg.train.train_steps = 10
  metrics = t.train()
  assert np.isfinite(metrics["loss"]) and metrics["mining_round"] == 1
  assert 0.0 <= metrics["heldout_in_batch_auc"] <= 1.0
  # a_h and b_h only get gradients from the logistic task.
  assert float(t.model.hard_negative_scale.numpy()) != a_h
  assert float(t.model.hard_negative_bias.numpy()) != b_h
  # The mining round is part of the checkpoint.
  t2 = trainer_lib.Trainer(cfg, str(root / "extract"), str(tmp_path / "model"))
  assert int(t2.mining_round.numpy()) == 1


def test_a_rounds_settings_are_checked_before_the_pipeline_starts(tmp_path):
  # These used to surface inside the running pipeline as a worker traceback (k, index kind)
  # or not at all (round -1 was recorded; a reports directory was taken as the previous round).
  for args, message in (((0, None, "brute_force", 10), "--round must be >= 1"),
                        ((-1, None, "brute_force", 10), "--round must be >= 1"),
                        ((1, None, "brute_force", 0), "--k must be >= 1, got 0"),
                        ((1, None, "bogus", 10), "--index_kind='bogus' is not one of")):
    with pytest.raises(ValueError, match=message):
      mining.check_inputs(*args)
  reports = tmp_path / "reports"
  reports.mkdir()
  (reports / "eval.json").write_text("{}")
  with pytest.raises(FileNotFoundError, match=r"--previous_dir=.*reports holds no finished "
                                               r"mining round"):
    mining.check_inputs(2, str(reports), "brute_force", 10)
  round_1 = tmp_path / "round_1"
  round_1.mkdir()
  (round_1 / "MANIFEST.json").write_text(json.dumps({"round": 1}))
  (round_1 / "hard_negatives-00000-of-00001.tfrecord").write_bytes(b"")
  mining.check_inputs(2, str(round_1), "ah_tree", 10)  # a finished earlier round is accepted
  with pytest.raises(ValueError, match="is round 1, not a round before --round=1"):
    mining.check_inputs(1, str(round_1), "brute_force", 10)
  with pytest.raises(ValueError, match="--round must be >= 1"):  # before any output is made
    mining.run("e", "i", "x", str(tmp_path / "out"), 0)
  assert not (tmp_path / "out").exists()
  # An extraction also has a MANIFEST.json: it is another stage's output, never replaced.
  extract = tmp_path / "extract"
  extract.mkdir()
  (extract / "MANIFEST.json").write_text(json.dumps({"record_files": {}, "counts": {}}))
  with pytest.raises(FileExistsError, match=r"holds an extraction \(MANIFEST.json"):
    mining.run("e", "i", "x", str(extract), 1)
  assert sorted(os.listdir(extract)) == ["MANIFEST.json"]


def test_only_the_link_sources_training_keeps_are_mined(tmp_path):
  root = tmp_path
  extract = str(root / "extract")
  # Mention i is a table cell when i % 4 == 1 (8 of 32), else prose.
  testutil.write_tiny_extraction(extract, link_source=lambda i: "table" if i % 4 == 1 else "prose")
  tf.keras.utils.set_random_seed(5)
  model = models.DualEncoder(config.get_preset("tiny").model)
  savedmodel.export_encoders(model, str(root / "export"))
  entity_encodings.encode_and_index(str(root / "export"), extract, str(root / "index"))
  args = (str(root / "export"), str(root / "index"), extract)
  stats = mining.run(*args, str(root / "round_1"), 1, link_sources=("prose",))
  assert stats["mentions_mined"] == 24 and stats["mentions_skipped_link_source"] == 8
  mined = {int(m.split(":")[1]) for m, *_ in _pairs(str(root / "round_1"))}
  assert mined and all(i % 4 != 1 for i in mined)
  with open(root / "round_1" / schema.MANIFEST_FILE) as f:
    assert json.load(f)["link_sources"] == ["prose"]
  assert mining.run(*args, str(root / "all"), 1)["mentions_mined"] == 32
