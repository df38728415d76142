"""Streaming, resumable KB encoding (dense_entity.retrieval.entity_encodings.encode_kb)."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.kb import schema
from dense_entity.retrieval import entity_encodings
from dense_entity.retrieval import index as index_lib
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace
from tests import testutil


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  # 300 synthetic entities in their own shard beside the tiny extraction's shard of 6.
  return build_tiny_workspace(tmp_path_factory.mktemp("ws"), extra_entities=300)


def _entities(extract_dir):
  return entity_encodings.read_entities(extract_dir)


def _name_rows(entities):
  """(entity id, name-row features) of every name row, in row order, as encode_kb lays them
  out: after the entities, by entity id, each entity's names in alias order."""
  out = []
  for i, e in enumerate(entities):
    for name in entity_encodings.entity_names(e[schema.ENTITY_TITLE], e[schema.ENTITY_ALIASES],
                                              entity_encodings.DEFAULT_MAX_NAMES_PER_ENTITY):
      out.append((i, {**e, schema.ENTITY_TITLE: name, schema.ENTITY_ALIASES: ""}))
  return out


def test_names_other_than_the_title_each_get_one_row():
  assert entity_encodings.entity_names("Place 0000", "Hamlet 0|place 0000|Old Place 0|"
                                       "Hamlet 0| |HAMLET 0", 32) == ["Hamlet 0", "Old Place 0"]
  assert entity_encodings.entity_names("A", "B|C|D", 2) == ["B", "C"]
  assert entity_encodings.entity_names("A", "B|C|D", 0) == []
  assert entity_encodings.entity_names("A", "", 32) == []


def test_rows_follow_sorted_titles_and_equal_one_batch_encoding(workspace, tmp_path):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  kb = entity_encodings.encode_kb(export, extract, str(tmp_path), batch_size=64)
  entities = _entities(extract)
  assert kb.titles == [e[schema.ENTITY_TITLE] for e in entities] == sorted(kb.titles)
  # 306 entities, then 2 name rows for each of the 30 synthetic entities with aliases.
  names = _name_rows(entities)
  assert len(names) == 60
  assert kb.encodings.shape == (366, entity_encodings.savedmodel.read_manifest(export)[
      "encoding_dim"]) and kb.encodings.dtype == np.float32
  np.testing.assert_array_equal(kb.row_entities,
                                list(range(306)) + [i for i, _ in names])
  assert entities[kb.row_entities[306]][schema.ENTITY_TITLE] == "Place 0000"
  expected = entity_encodings.encode_entities(export, entities + [f for _, f in names])
  np.testing.assert_allclose(kb.encodings, expected, atol=1e-6)
  # A name row is the entity under another title: same text and categories, another vector.
  assert np.abs(kb.encodings[306] - kb.encodings[kb.row_entities[306]]).max() > 1e-3
  with open(tmp_path / entity_encodings.ENCODINGS_MANIFEST) as f:
    manifest = json.load(f)
  assert (manifest["num_entities"], manifest["num_rows"], manifest["dtype"],
          manifest["shards"]) == (306, 366, "float32", 2)
  assert not os.path.exists(tmp_path / ".encoding")  # work in progress removed when done


def test_without_name_rows_there_is_one_row_per_entity(workspace, tmp_path):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  kb = entity_encodings.encode_kb(export, extract, str(tmp_path), max_names_per_entity=0)
  assert kb.encodings.shape[0] == 306 and kb.row_entities is None
  np.testing.assert_allclose(
      kb.encodings, entity_encodings.encode_entities(export, _entities(extract)), atol=1e-6)
  with pytest.raises(ValueError, match="max_names_per_entity"):
    entity_encodings.encode_kb(export, extract, str(tmp_path), max_names_per_entity=-1)


def test_an_interrupted_run_resumes_with_its_finished_shards(workspace, tmp_path):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  seen = []

  def stop_in_second_shard(n):
    seen.append(n)
    if sum(seen) >= 6 + 64:  # the small shard, then one batch of the big one
      raise KeyboardInterrupt

  files = sorted(os.listdir(extract))
  assert files.index("entities-00000-of-00001.tfrecord") < files.index("entities-extra.tfrecord")
  with pytest.raises(KeyboardInterrupt):
    # Shard order is file-name order: the 6-entity shard, then the 300-entity one; stop in
    # the big one after one batch, so only the small shard is finished.
    entity_encodings.encode_kb(export, extract, str(tmp_path), batch_size=64,
                               progress=stop_in_second_shard)
  with open(tmp_path / ".encoding" / "done_shards.json") as f:
    assert json.load(f) == [0]
  assert not os.path.exists(tmp_path / entity_encodings.ENCODINGS_FILE)
  counted = []
  encodings = entity_encodings.encode_kb(export, extract, str(tmp_path), batch_size=64,
                                        progress=counted.append).encodings
  assert counted[0] == 6 and sum(counted) == 306  # the finished shard is skipped, counted
  entities = _entities(extract)
  np.testing.assert_allclose(
      encodings, entity_encodings.encode_entities(export, entities + [
          f for _, f in _name_rows(entities)]), atol=1e-6)


def test_work_of_another_model_is_not_resumed(workspace, tmp_path):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  os.makedirs(tmp_path / ".encoding")
  with open(tmp_path / ".encoding" / "state.json", "w") as f:
    json.dump({"model_fingerprint": "another model"}, f)
  with open(tmp_path / ".encoding" / "done_shards.json", "w") as f:
    json.dump([0, 1], f)
  encodings = entity_encodings.encode_kb(export, extract, str(tmp_path)).encodings
  assert np.abs(np.linalg.norm(encodings, axis=1) - 1).max() < 1e-5  # every row encoded


def test_large_kbs_are_stored_as_float16(workspace, tmp_path, monkeypatch):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  monkeypatch.setattr(index_lib, "FLOAT16_STORAGE_BYTES", 0)
  encodings = entity_encodings.encode_kb(export, extract, str(tmp_path),
                                        max_names_per_entity=0).encodings
  assert encodings.dtype == np.float16
  expected = entity_encodings.encode_entities(export, _entities(extract))
  np.testing.assert_allclose(encodings.astype(np.float32), expected, atol=1e-3)


def test_storage_dtype_overrides_the_size_rule(workspace, tmp_path, monkeypatch):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  monkeypatch.setattr(index_lib, "FLOAT16_STORAGE_BYTES", 0)  # 'auto' would store float16
  encodings = entity_encodings.encode_kb(export, extract, str(tmp_path / "f32"),
                                        storage_dtype="float32").encodings
  assert encodings.dtype == np.float32
  assert entity_encodings.storage_dtype_for(10, 4, "float16") == np.float16
  assert entity_encodings.storage_dtype_for(10, 4) == np.float16  # 160 bytes > 0
  with pytest.raises(ValueError, match="storage_dtype"):
    entity_encodings.encode_kb(export, extract, str(tmp_path / "x"), storage_dtype="int8")


def test_a_duplicate_title_is_an_error_naming_it(tmp_path):
  workspace = build_tiny_workspace(tmp_path / "ws")
  extract = os.path.join(workspace, "extract")
  src = os.path.join(extract, "entities-00000-of-00001.tfrecord")
  with tf.io.TFRecordWriter(os.path.join(extract, "entities-copy.tfrecord")) as w:
    for record in tf.data.TFRecordDataset(src).take(1):
      w.write(record.numpy())
  with pytest.raises(ValueError, match="appears twice"):
    entity_encodings.encode_kb(os.path.join(workspace, "export"), extract, str(tmp_path / "i"))


# ------------------------------------------ encode_and_index: checks first, publishes together
# Bug kind: `encode_entities --kinds=bogus` over a finished index directory encoded first,
# rewrote entity_encodings.npy and encodings_manifest.json, then failed on the kind, leaving them
# inconsistent with entity_titles.txt, row_entities.npy and the indexes.


def _work_snapshot(directory):
  return testutil.snapshot(directory, skip_dirs=(".encoding",))


@pytest.fixture
def finished_index(workspace, tmp_path):
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  out = str(tmp_path / "index")
  entity_encodings.encode_and_index(export, extract, out, ["brute_force"])
  return extract, export, out


def test_an_unknown_kind_is_refused_before_any_encoding(finished_index):
  extract, export, out = finished_index
  before, encoded = _work_snapshot(out), []
  with pytest.raises(ValueError, match=r"Unknown index kinds \['bogus'\]"):
    entity_encodings.encode_and_index(export, extract, out, ["bogus"], progress=encoded.append)
  assert not encoded  # nothing was encoded
  # Byte-identical: encodings, manifest, titles, row map, index.
  assert _work_snapshot(out) == before
  assert not os.path.exists(os.path.join(out, ".encoding"))


def test_a_run_that_fails_while_indexing_leaves_the_earlier_output_and_resumes(
    finished_index, monkeypatch):
  extract, export, out = finished_index
  before = _work_snapshot(out)
  assert "row_entities.npy" in before

  def out_of_memory(*args, **kwargs):
    raise MemoryError("index build killed")

  build = index_lib.EntityIndex.build
  monkeypatch.setattr(index_lib.EntityIndex, "build", staticmethod(out_of_memory))
  with pytest.raises(MemoryError):  # a new KB layout (one row per entity), then the failure
    entity_encodings.encode_and_index(export, extract, out, ["brute_force"],
                                      max_names_per_entity=0)
  # The earlier encodings, titles, row map and index, unchanged.
  assert _work_snapshot(out) == before
  with open(os.path.join(out, ".encoding", "done_shards.json")) as f:
    assert json.load(f) == [0, 1]  # every shard encoded, kept for the next run
  # Mark the finished work: a resumed run publishes it without encoding again.
  partial = np.load(os.path.join(out, ".encoding", entity_encodings.ENCODINGS_FILE), mmap_mode="r+")
  partial[0] = 0.0
  partial.flush()
  del partial
  monkeypatch.setattr(index_lib.EntityIndex, "build", build)
  summary = entity_encodings.encode_and_index(export, extract, out, ["brute_force"],
                                              max_names_per_entity=0)
  published = np.load(os.path.join(out, entity_encodings.ENCODINGS_FILE))
  assert published.shape[0] == summary["num_rows"] == summary["num_entities"] == 306
  assert not published[0].any()  # resumed, not encoded again
  assert not os.path.exists(os.path.join(out, "row_entities.npy"))
  with open(os.path.join(out, entity_encodings.ENCODINGS_MANIFEST)) as f:
    assert json.load(f)["num_rows"] == 306
  assert sorted(os.listdir(out)) == ["brute_force", entity_encodings.ENCODINGS_MANIFEST,
                                     entity_encodings.ENCODINGS_FILE, "entity_titles.txt",
                                     "indexes.json"]


def test_another_stages_output_is_refused_before_any_encoding(workspace, tmp_path):
  # --output_dir=WS/extract (or WS/reports): index files would have been mixed into it.
  extract, export = os.path.join(workspace, "extract"), os.path.join(workspace, "export")
  before, encoded = _work_snapshot(extract), []
  with pytest.raises(FileExistsError, match=rf"--output_dir={re.escape(extract)} .*refusing to "
                                            r"write into it"):
    entity_encodings.encode_and_index(export, extract, extract, ["brute_force"],
                                      progress=encoded.append)
  assert not encoded and _work_snapshot(extract) == before
