"""index_builder.build_indexes publishes titles, row map and indexes together, only after every
index is built, into its own kind of directory; read_titles names a bad line (bug kind: a
failed run left a finished index directory half-replaced, or wrote into another stage's
output)."""

import json
import os
import re

import numpy as np
import pytest

from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder
from tests import testutil


def unit_vectors(n, dim, seed=0):
  x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def finished(tmp_path):
  """A finished index directory: 40 entities, 10 name rows, a brute-force index."""
  out = str(tmp_path / "index")
  rows = np.concatenate([np.arange(40), np.arange(10)]).astype(np.int32)
  index_builder.build_indexes(unit_vectors(50, 8), [f"Old {i}" for i in range(40)], out,
                              ["brute_force"], "model-old", row_entities=rows)
  return out


def test_an_unknown_kind_is_refused_before_anything_is_written(finished):
  # The user asks for --kinds=bogus over a finished index directory.
  before = testutil.snapshot(finished)
  with pytest.raises(ValueError, match=r"Unknown index kinds \['bogus'\]"):
    index_builder.build_indexes(unit_vectors(30, 8, seed=1), [f"New {i}" for i in range(30)],
                                finished, ["brute_force", "bogus"], "model-new")
  assert testutil.snapshot(finished) == before


def test_a_build_that_fails_leaves_the_earlier_index_as_it_was(finished, monkeypatch):
  # The second kind's build fails (out of memory, a ScaNN error) after the first is built.
  before = testutil.snapshot(finished)
  build = index_lib.EntityIndex.build

  def fail_on_ah(encodings, kind, *args, **kwargs):
    if kind == "ah":
      raise MemoryError("no memory for ah")
    return build(encodings, kind, *args, **kwargs)

  monkeypatch.setattr(index_lib.EntityIndex, "build", staticmethod(fail_on_ah))
  with pytest.raises(MemoryError):
    index_builder.build_indexes(unit_vectors(30, 8, seed=1), [f"New {i}" for i in range(30)],
                                finished, ["brute_force", "ah"], "model-new")
  assert testutil.snapshot(finished) == before  # titles, row map, brute_force and indexes.json
  assert not [n for n in os.listdir(finished) if n.startswith(".staging-")]


def test_a_finished_build_replaces_everything_together(finished, tmp_path):
  extra = tmp_path / "encodings_manifest.json"
  extra.write_text('{"model_fingerprint": "model-new"}')
  summary = index_builder.build_indexes(unit_vectors(30, 8, seed=1),
                                        [f"New {i}" for i in range(30)], finished,
                                        ["brute_force"], "model-new",
                                        publish_with={"encodings_manifest.json": str(extra)})
  assert index_builder.read_titles(os.path.join(finished, "entity_titles.txt"))[0] == "New 0"
  assert not os.path.exists(os.path.join(finished, "row_entities.npy"))  # stale map removed
  assert summary["indexes"]["brute_force"]["path"] == os.path.join(finished, "brute_force")
  with open(os.path.join(finished, "indexes.json")) as f:
    assert json.load(f)["model_fingerprint"] == "model-new"
  with open(os.path.join(finished, "encodings_manifest.json")) as f:
    assert json.load(f) == {"model_fingerprint": "model-new"}
  assert index_lib.load_index(finished, "brute_force", "model-new", 8).num_entities == 30
  assert sorted(os.listdir(finished)) == ["brute_force", "encodings_manifest.json",
                                          "entity_titles.txt", "indexes.json"]


def test_another_stages_directory_is_refused_and_left_as_it_was(tmp_path):
  # --output_dir=WS/extract: index files would have been mixed into the extraction.
  extract = tmp_path / "extract"
  extract.mkdir()
  (extract / "MANIFEST.json").write_text('{"record_files": {}, "counts": {}}')
  (extract / "entities-00000-of-00001.tfrecord").write_bytes(b"records")
  before = testutil.snapshot(extract)
  with pytest.raises(FileExistsError, match=rf"--output_dir={re.escape(str(extract))} holds an "
                                            r"extraction "
                                            r"\(MANIFEST.json"):
    index_builder.build_indexes(unit_vectors(5, 4), list("abcde"), str(extract),
                                ["brute_force"], "m")
  assert testutil.snapshot(extract) == before


def test_titles_that_are_not_utf8_are_named_by_file_and_line(tmp_path):
  path = tmp_path / "titles.txt"
  path.write_bytes(b"Alpha\nBeta\nGam\xffma\n")
  with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: not UTF-8 text"):
    index_builder.read_titles(str(path))
  path.write_bytes(b"Alpha\r\nBeta\r\n")  # Windows line ends read as before
  assert index_builder.read_titles(str(path)) == ["Alpha", "Beta"]
