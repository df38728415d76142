"""Tests for dense_entity.retrieval.index and index_builder: brute force, ScaNN AH, AH + tree."""

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dense_entity.retrieval import index_builder
from dense_entity.retrieval import index as index_lib
from tests import testutil

REPO_ROOT = testutil.REPO_ROOT
KINDS = index_lib.KINDS


def unit_vectors(n, dim, seed=0):
  x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered_vectors(n, dim, num_clusters, seed=0):
  """Unit vectors around `num_clusters` random centres (noise 0.3 per unit-norm centre)."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_clusters, dim))
  centres /= np.linalg.norm(centres, axis=1, keepdims=True)
  x = centres[rng.integers(num_clusters, size=n)] + rng.normal(scale=0.3 / np.sqrt(dim),
                                                               size=(n, dim)) * np.sqrt(dim)
  x = x.astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def tree_index_1000():
  x = unit_vectors(1000, 64, seed=3)
  return x, index_lib.EntityIndex.build(x, "ah_tree", "model-A")


# ---------------------------------------------------------------------------- parameters


def test_derive_config_scales_with_n():
  config = index_lib.derive_config(10_000, 64)
  assert (config.num_leaves, config.num_leaves_to_search) == (100, 20)  # sqrt(n); 2000 points.
  assert config.training_sample_size == 10_000
  assert (config.dims_per_block, config.anisotropic_quantization_threshold) == (2, 0.2)
  assert config.reorder_num_neighbors == 100
  big = index_lib.derive_config(4_000_000, 64)
  assert (big.num_leaves, big.num_leaves_to_search, big.training_sample_size) == (
      2000, 250, 250_000)  # 12.5% of the leaves
  for n in (1, 2, 7, 50, 255, 1000):
    c = index_lib.derive_config(n, 8)
    assert 1 <= c.num_leaves_to_search <= c.num_leaves <= n
    assert c.training_sample_size == n
    c.validate(n)


@pytest.mark.parametrize("kind", KINDS)
def test_large_scale_config_on_small_index_is_fitted_to_n(kind, tmp_path):
  x = unit_vectors(50, 64)
  config = index_lib.IndexConfig(num_leaves=2000, num_leaves_to_search=100,
                                 training_sample_size=250_000, reorder_num_neighbors=100)
  index = index_lib.EntityIndex.build(x, kind, "m", config)
  ids, scores = index.search(x[7], 10)
  assert ids[0] == 7 and scores[0] == pytest.approx(1.0, abs=1e-5)
  assert (index.config.num_leaves, index.config.training_sample_size) == (50, 50)
  manifest = index.save(str(tmp_path / "i"))
  assert manifest["requested_parameters"]["num_leaves"] == 2000
  assert manifest["parameters"]["num_leaves"] == 50


def test_invalid_config_is_a_clear_error():
  with pytest.raises(ValueError, match="reorder_num_neighbors must be >= 1"):
    index_lib.EntityIndex.build(unit_vectors(50, 8), "ah", "m",
                                index_lib.IndexConfig(reorder_num_neighbors=0))


# ------------------------------------------------------------------ small indexes (ix-01)


@pytest.mark.parametrize("kind", KINDS)
def test_50_vectors_with_derived_params_find_themselves(kind, tmp_path):
  x = unit_vectors(50, 64)
  index = index_lib.EntityIndex.build(x, kind, "m")
  ids, scores = index.search(x[7], 5)
  assert ids[0] == 7
  assert scores[0] == pytest.approx(1.0, abs=1e-5)
  assert np.all(np.diff(scores) <= 0)
  if kind == "ah_tree":
    assert index.effective_kind == "ah"
    assert "MIN_TREE_SIZE" in index.fallback_reason
    manifest = index.save(str(tmp_path / "i"))
    assert manifest["kind"] == "ah_tree" and manifest["effective_kind"] == "ah"
    assert "MIN_TREE_SIZE" in manifest["fallback_reason"]


@pytest.mark.parametrize("kind", ["ah", "ah_tree"])
def test_tiny_index_falls_back_to_brute_force(kind):
  x = unit_vectors(5, 8)
  index = index_lib.EntityIndex.build(x, kind, "m")
  assert index.effective_kind == "brute_force"
  assert "MIN_AH_SIZE" in index.fallback_reason
  ids, _ = index.search(x, 1)
  np.testing.assert_array_equal(ids[:, 0], np.arange(5))


def test_brute_force_hand_computed_scores_and_tie_break():
  x = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], np.float32)
  index = index_lib.EntityIndex.build(x, "brute_force", "m")
  ids, scores = index.search(np.array([[1.0, 0.0], [0.0, 2.0]], np.float32), 2)
  np.testing.assert_array_equal(ids, [[0, 2], [1, 3]])  # Equal scores: smaller row id first.
  np.testing.assert_allclose(scores, [[1, 1], [1, 0.8]], atol=1e-6)
  ids, scores = index.search(np.array([1.0, 0.0]), 4)
  np.testing.assert_array_equal(ids, [0, 2, 3, 1])
  np.testing.assert_allclose(scores, [1, 1, 0.6, 0], atol=1e-6)


# --------------------------------------------------------------------- save/load (ix-03)

_LOAD_AND_SEARCH = textwrap.dedent("""
    import sys
    import numpy as np
    from dense_entity.retrieval import index as index_lib
    directory, queries_path, out_path = sys.argv[1:]
    index = index_lib.EntityIndex.load(directory, expected_model_fingerprint="model-A",
                                       expected_dim=64)
    ids, scores = index.search(np.load(queries_path), 10)
    np.savez(out_path, ids=ids, scores=scores, kind=index.effective_kind)
""")


def test_serialize_copy_and_load_in_fresh_process(tree_index_1000, tmp_path):
  x, index = tree_index_1000
  assert index.effective_kind == "ah_tree"
  queries = x[np.arange(0, 1000, 50)] + np.random.default_rng(1).normal(
      scale=0.05, size=(20, 64)).astype(np.float32)
  ids, scores = index.search(queries, 10)
  manifest = index.save(str(tmp_path / "A"))
  assert "scann/dataset.npy" in manifest["files"]
  shutil.copytree(tmp_path / "A", tmp_path / "elsewhere" / "B")
  shutil.rmtree(tmp_path / "A")  # Absolute paths to A would now fail.
  np.save(tmp_path / "q.npy", queries)
  env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  subprocess.run([sys.executable, "-c", _LOAD_AND_SEARCH, str(tmp_path / "elsewhere" / "B"),
                  str(tmp_path / "q.npy"), str(tmp_path / "out.npz")],
                 check=True, cwd=str(tmp_path), env=env, capture_output=True, timeout=120)
  out = np.load(tmp_path / "out.npz")
  assert str(out["kind"]) == "ah_tree"
  np.testing.assert_array_equal(out["ids"], ids)
  np.testing.assert_allclose(out["scores"], scores, atol=1e-5)


def test_missing_dataset_npy_is_a_python_error_naming_the_file(tree_index_1000, tmp_path):
  _, index = tree_index_1000
  index.save(str(tmp_path / "i"))
  os.remove(tmp_path / "i" / "scann" / "dataset.npy")
  with pytest.raises(FileNotFoundError, match="dataset.npy"):
    index_lib.EntityIndex.load(str(tmp_path / "i"))


def test_truncated_or_missing_files_are_errors_naming_the_file(tmp_path):
  index = index_lib.EntityIndex.build(unit_vectors(30, 8), "brute_force", "m")
  index.save(str(tmp_path / "i"))
  path = tmp_path / "i" / "encodings.npy"
  path.write_bytes(path.read_bytes()[:-8])
  with pytest.raises(ValueError, match="encodings.npy"):
    index_lib.EntityIndex.load(str(tmp_path / "i"))
  os.remove(tmp_path / "i" / "index_manifest.json")
  with pytest.raises(FileNotFoundError, match="index_manifest.json"):
    index_lib.EntityIndex.load(str(tmp_path / "i"))


@pytest.mark.parametrize("kind", KINDS)
def test_manifest_mismatch_is_an_error(kind, tmp_path):
  x = unit_vectors(300, 16)
  index = index_lib.EntityIndex.build(x, kind, "model-A")
  index.save(str(tmp_path / "i"))
  with open(tmp_path / "i" / "index_manifest.json") as f:
    manifest = json.load(f)
  assert (manifest["kind"], manifest["num_entities"], manifest["dim"]) == (kind, 300, 16)
  assert manifest["model_fingerprint"] == "model-A" and manifest["format_version"] == 1
  with pytest.raises(ValueError, match="model-B"):
    index_lib.EntityIndex.load(str(tmp_path / "i"), expected_model_fingerprint="model-B")
  with pytest.raises(ValueError, match="dim 32"):
    index_lib.EntityIndex.load(str(tmp_path / "i"), expected_dim=32)
  loaded = index_lib.EntityIndex.load(str(tmp_path / "i"), "model-A", 16)
  np.testing.assert_array_equal(loaded.search(x[:5], 3)[0], index.search(x[:5], 3)[0])
  with pytest.raises(FileExistsError):
    index.save(str(tmp_path / "i"))
  index.save(str(tmp_path / "i"), overwrite=True)
  assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # No temp dirs left.


# -------------------------------------------------------------------- query checks (ix-04)


@pytest.fixture(scope="module", params=KINDS)
def index_100x64(request):
  x = unit_vectors(100, 64, seed=5)
  return x, index_lib.EntityIndex.build(x, request.param, "m")


def test_float64_query_is_cast_and_gives_same_ids(index_100x64):
  x, index = index_100x64
  ids32, scores32 = index.search(x[:1], 10)
  ids64, scores64 = index.search(x[:1].astype(np.float64), 10)
  np.testing.assert_array_equal(ids64, ids32)
  assert ids64.dtype == np.int32 and scores64.dtype == np.float32
  np.testing.assert_allclose(scores64, scores32, atol=1e-6)


def test_wrong_dimension_names_expected_dim(index_100x64):
  _, index = index_100x64
  with pytest.raises(ValueError, match="expected dim 64"):
    index.search(np.zeros((1, 63), np.float32) + 0.1, 10)
  with pytest.raises(ValueError, match="expected dim 64"):
    index.search(np.ones(63, np.float32), 10)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_queries_are_rejected(index_100x64, bad):
  x, index = index_100x64
  q = x[:3].copy()
  q[1, 5] = bad
  with pytest.raises(ValueError, match=r"NaN/Inf.*\[1\]"):
    index.search(q, 10)
  with pytest.raises(ValueError, match="NaN/Inf"):
    index.search(q[1], 10)


def test_single_and_batched_paths_agree(index_100x64):
  x, index = index_100x64
  batch_ids, batch_scores = index.search(x[:8], 10)
  for i in range(8):
    ids, scores = index.search(x[i], 10)
    assert ids.shape == (10,)
    np.testing.assert_array_equal(ids, batch_ids[i])
    np.testing.assert_allclose(scores, batch_scores[i], atol=1e-6)
  assert index.search(np.zeros((0, 64), np.float32), 10)[0].shape == (0, 10)
  with pytest.raises(ValueError, match="k must be"):
    index.search(x[:1], 0)


# ------------------------------------------------------------------------ k larger than n


@pytest.mark.parametrize("kind,n", [("brute_force", 20), ("ah", 20), ("ah_tree", 400)])
def test_k_larger_than_n_returns_all_n(kind, n):
  x = unit_vectors(n, 16, seed=2)
  index = index_lib.EntityIndex.build(x, kind, "m")
  assert index.effective_kind == kind
  ids, scores = index.search(x[:3], n + 100)
  assert ids.shape == scores.shape == (3, n)
  for row, row_scores, q in zip(ids, scores, x[:3]):
    assert sorted(row.tolist()) == list(range(n))
    assert not np.isnan(row_scores).any()
    np.testing.assert_allclose(row_scores, np.sort(x @ q)[::-1], atol=1e-5)
  assert index.search(x[0], 10 * n)[0].shape == (n,)


# ---------------------------------------------------------------------- zero-norm vectors


@pytest.mark.parametrize("kind", KINDS)
def test_zero_norm_database_rows_score_zero_and_zero_queries_are_rejected(kind, tmp_path):
  x = unit_vectors(300, 16, seed=4)
  x[[3, 5]] = 0.0
  index = index_lib.EntityIndex.build(x, kind, "m")
  assert index.num_zero_norm_rows == 2
  ids, scores = index.search(x[6:16], 300)
  assert not np.isnan(scores).any()
  for row, row_scores in zip(ids, scores):
    zero_positions = np.isin(row, [3, 5])
    np.testing.assert_array_equal(row_scores[zero_positions], 0.0)
  assert index.save(str(tmp_path / "i"))["num_zero_norm_rows"] == 2
  with pytest.raises(ValueError, match="zero norm"):
    index.search(x[3], 5)
  with pytest.raises(ValueError, match=r"zero norm.*\[1\]"):
    index.search(x[2:4], 5)


def test_unnormalised_encodings_are_scored_by_cosine():
  x = unit_vectors(40, 8)
  index = index_lib.EntityIndex.build(x * np.arange(1, 41, dtype=np.float32)[:, None],
                                      "brute_force", "m")
  ids, scores = index.search(3.0 * x[9], 1)
  assert ids[0] == 9 and scores[0] == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------------------------- recall


def test_ah_and_tree_recall_at_10_against_brute_force():
  x = clustered_vectors(4000, 32, num_clusters=40, seed=7)
  queries = clustered_vectors(100, 32, num_clusters=40, seed=7)  # Same centres, new noise.
  queries = queries + np.random.default_rng(8).normal(scale=0.01, size=queries.shape)
  exact, _ = index_lib.EntityIndex.build(x, "brute_force", "m").search(queries, 10)
  for kind in ("ah", "ah_tree"):
    index = index_lib.EntityIndex.build(x, kind, "m")
    assert index.effective_kind == kind
    ids, _ = index.search(queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)])
    assert recall >= 0.9, (kind, recall)


# ----------------------------------------------------------------------------- build_index


def test_build_indexes_writes_titles_indexes_and_summary(tmp_path):
  x = unit_vectors(300, 16)
  titles = [f"Entity {i}" for i in range(300)]
  summary = index_builder.build_indexes(x, titles, str(tmp_path), list(KINDS), "model-A")
  with open(tmp_path / "entity_titles.txt", encoding="utf-8") as f:
    assert f.read().splitlines() == titles
  assert set(summary["indexes"]) == set(KINDS)
  for kind in KINDS:
    info = summary["indexes"][kind]
    assert info["effective_kind"] == kind and info["index_bytes"] > x.nbytes
    loaded = index_lib.EntityIndex.load(info["path"], "model-A", 16)
    assert titles[loaded.search(x[42], 1)[0][0]] == "Entity 42"
  with open(tmp_path / "indexes.json") as f:
    assert json.load(f)["num_entities"] == 300
  with pytest.raises(ValueError, match="299 titles for 300"):
    index_builder.build_indexes(x, titles[:-1], str(tmp_path / "o"), ["ah"], "m")
  with pytest.raises(ValueError, match="Unknown index kinds"):
    index_builder.build_indexes(x, titles, str(tmp_path / "o"), ["hnsw"], "m")


# ------------------------------------------------------------------ Wikipedia-scale settings


def test_reordering_dtype_follows_the_size_of_the_float32_vectors():
  assert index_lib.derive_config(10_000, 192).reorder_dtype == "float32"
  # All English Wikipedia (4.46M entities x 192): 3.4 GB of float32 -> int8 reordering.
  assert index_lib.derive_config(4_461_430, 192).reorder_dtype == "int8"
  with pytest.raises(ValueError, match="reorder_dtype must be one of"):
    index_lib.EntityIndex.build(unit_vectors(50, 8), "ah", "m",
                                index_lib.IndexConfig(reorder_dtype="float8"))


def test_blocked_brute_force_batch_equals_one_block(monkeypatch):
  x = unit_vectors(3000, 16, seed=5)
  q = unit_vectors(40, 16, seed=6)
  index = index_lib.EntityIndex.build(x, "brute_force", "m")
  whole_ids, whole_scores = index.search(q, 25)
  # 2^10 scores per block: 1 query x 1024 entity rows at a time, merged across 3 row blocks.
  monkeypatch.setattr(index_lib, "_MAX_SCORES_PER_BLOCK", 1 << 10)
  ids, scores = index.search(q, 25)
  np.testing.assert_array_equal(ids, whole_ids)
  np.testing.assert_allclose(scores, whole_scores, rtol=1e-6)
  exact = np.argsort(-(q @ x.T), axis=1, kind="stable")[:, :25]
  np.testing.assert_array_equal(ids, exact)
  # k larger than a row block still returns every entity of the top k.
  ids, _ = index.search(q[:2], 2000)
  assert ids.shape == (2, 2000) and len(set(ids[0].tolist())) == 2000


def test_float16_storage_round_trip(monkeypatch, tmp_path):
  monkeypatch.setattr(index_lib, "FLOAT16_STORAGE_BYTES", 0)  # as if the KB were large
  x = unit_vectors(500, 32, seed=7)
  index = index_lib.EntityIndex.build(x, "brute_force", "m")
  manifest = index.save(str(tmp_path / "bf"))
  assert manifest["storage_dtype"] == "float16"
  assert manifest["files"]["encodings.npy"] == 128 + 500 * 32 * 2  # npy header + float16
  loaded = index_lib.EntityIndex.load(str(tmp_path / "bf"))
  assert loaded.encodings.dtype == np.float32
  np.testing.assert_array_equal(loaded.encodings,
                                index.encodings.astype(np.float16).astype(np.float32))
  ids, scores = loaded.search(x[:50], 1)
  np.testing.assert_array_equal(ids[:, 0], np.arange(50))
  np.testing.assert_allclose(scores[:, 0], 1.0, atol=2e-3)  # float16 rounding of each value


def test_int8_reordering_saves_no_float32_dataset_and_keeps_recall(tmp_path):
  x = clustered_vectors(4000, 32, 40, seed=8)
  config = dataclasses.replace(index_lib.derive_config(4000, 32), reorder_dtype="int8")
  index = index_lib.EntityIndex.build(x, "ah_tree", "m", config)
  manifest = index.save(str(tmp_path / "t"))
  assert "scann/int8_dataset.npy" in manifest["files"]
  assert "scann/dataset.npy" not in manifest["files"]
  loaded = index_lib.EntityIndex.load(str(tmp_path / "t"))
  q = x[:200] + np.random.default_rng(9).normal(scale=0.05, size=(200, 32)).astype(np.float32)
  ids, _ = loaded.search(q, 10)
  exact = np.argsort(-(q / np.linalg.norm(q, axis=1, keepdims=True)) @ x.T, axis=1)[:, :10]
  overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.tolist(), exact.tolist())])
  assert overlap >= 0.9
  os.remove(tmp_path / "t" / "scann" / "int8_dataset.npy")
  with pytest.raises(FileNotFoundError, match="int8_dataset.npy"):
    index_lib.EntityIndex.load(str(tmp_path / "t"))


@pytest.mark.parametrize("kind", KINDS)
def test_tower_encodings_are_scored_as_given_not_renormalised(kind, tmp_path):
  # Encodings with the lexical channel: an entity whose text has no weighted word has norm
  # sqrt(0.75); the model scores it by the plain dot product, and so must the index.
  x = clustered_vectors(600, 16, 10, seed=11)
  x[::2] *= np.float32(np.sqrt(0.75))
  index = index_lib.EntityIndex.build(x, kind, "m", normalize_rows=False)
  q = x[1] / np.linalg.norm(x[1])
  ids, scores = index_lib.EntityIndex.load(
      index.save(str(tmp_path / "i")) and str(tmp_path / "i")).search(q, 5)
  exact = np.argsort(-(x @ q))[:5]
  assert ids[0] == exact[0] == 1
  np.testing.assert_allclose(scores[0], x[1] @ q, atol=2e-2 if kind != "brute_force" else 1e-6)
  with open(tmp_path / "i" / "index_manifest.json") as f:
    assert json.load(f)["rows_normalized"] is False
  renormalised = index_lib.EntityIndex.build(x, "brute_force", "m")
  assert renormalised.search(x[0], 1)[1][0] == pytest.approx(1.0, abs=1e-5)


def _resident_bytes():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_mapped_float16_pages_are_released_after_the_float32_copy(tmp_path):
  path = str(tmp_path / "encodings.npy")
  rows = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(100_000, 256))
  rows[:] = 0.5
  rows.flush()
  del rows
  mapped = np.asarray(np.load(path, mmap_mode="r"))  # a view of the memmap, as build_indexes
  before = _resident_bytes()
  assert float(mapped[:, 0].sum(dtype=np.float32)) == 50_000.0  # pages touched
  touched = _resident_bytes()
  assert index_lib.release_mapped_pages(mapped)
  released = _resident_bytes()
  # The 51 MB mapping (one page per row of 512 bytes at least half touched) leaves the RSS.
  assert touched - before > 10_000_000
  assert released - before < (touched - before) / 4
  # The data reads as before (from the page cache or the file).
  assert float(mapped.sum(dtype=np.float32)) == 0.5 * 100_000 * 256
  assert not index_lib.release_mapped_pages(np.zeros((3, 2), np.float32))


def test_large_scann_build_reads_a_temporary_file_and_equals_the_in_memory_build(
    monkeypatch, tmp_path):
  x = clustered_vectors(4000, 32, num_clusters=40, seed=7)
  queries = x[:50] + np.random.default_rng(3).normal(scale=0.01, size=(50, 32))
  in_memory = index_lib.EntityIndex.build(x, "ah_tree", "m")
  scratch_root = tmp_path / "tmp"
  scratch_root.mkdir()
  monkeypatch.setattr(index_lib.tempfile, "tempdir", str(scratch_root))
  monkeypatch.setattr(index_lib, "FILE_BACKED_BUILD_BYTES", 0)  # as if the KB were large
  made = []
  real_build = index_lib.ScannIndex.build_searcher

  def spy(data, kind, config):
    made.append((type(data), os.listdir(scratch_root)))
    return real_build(data, kind, config)

  monkeypatch.setattr(index_lib.ScannIndex, "build_searcher", staticmethod(spy))
  file_backed = index_lib.EntityIndex.build(x, "ah_tree", "m")
  # ScaNN was handed a memory map of a file in the temp dir, and the file is gone afterwards.
  assert made[0][0] is np.memmap and len(made[0][1]) == 1
  assert os.listdir(scratch_root) == []
  assert file_backed.effective_kind == "ah_tree"
  # ScaNN's training is not bit-reproducible from run to run; both builds find each query's
  # own row first and agree with exact search as well as each other.
  exact, _ = index_lib.EntityIndex.build(x, "brute_force", "m").search(queries, 10)
  for index in (in_memory, file_backed):
    ids, _ = index.search(queries, 10)
    np.testing.assert_array_equal(ids[:, 0], np.arange(50))
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)])
    assert recall >= 0.95, recall
  # A bad row is still reported, and the temporary file is removed.
  bad = x.copy()
  bad[17, 3] = np.nan
  with pytest.raises(ValueError, match=r"NaN/Inf.*\[17\]"):
    index_lib.EntityIndex.build(bad, "ah_tree", "m")
  assert os.listdir(scratch_root) == []
  # A disk too small for the input is an error naming the directory, before any page is written
  # (a full disk under a memory map would be a SIGBUS), and leaves nothing behind.

  def no_space(fd, offset, length):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(index_lib.os, "posix_fallocate", no_space)
  with pytest.raises(OSError, match=r"cannot reserve 512,000 bytes .*scann-build-.*TMPDIR"):
    index_lib.EntityIndex.build(x, "ah_tree", "m")
  assert os.listdir(scratch_root) == []


def test_tf_searcher_state_read_from_a_saved_soar_index_finds_the_same_neighbours(
    monkeypatch, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from scann.scann_ops.py import scann_ops  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(index_lib, "INT8_REORDER_BYTES", 0)  # int8 reordering, as at full scale
  x = clustered_vectors(4000, 32, num_clusters=40, seed=7)
  queries = x[:100] + np.random.default_rng(3).normal(scale=0.01, size=(100, 32))
  queries /= np.linalg.norm(queries, axis=1, keepdims=True)
  index = index_lib.EntityIndex.build(x, "ah_tree", "m")
  assert index.config.reorder_dtype == "int8" and index.config.soar_lambda
  index.save(str(tmp_path / "ah_tree"))
  manifest, arrays = index_lib.ScannIndex.tf_state_arrays(str(tmp_path / "ah_tree"),
                                                         expected_model_fingerprint="m")
  assert manifest["num_entities"] == 4000 and arrays[2].shape == (4000,)  # primary leaves
  state = scann_ops.ScannState([tf.constant(a) for a in arrays])
  ids, _ = scann_ops.scann_search_batched(state.recreate_handle(), queries.astype(np.float32),
                                          10, 100, -1, False)
  ids = ids.numpy()
  exact, _ = index_lib.EntityIndex.build(x, "brute_force", "m").search(queries, 10)
  np.testing.assert_array_equal(ids[:, 0], np.arange(100))
  assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)]) >= 0.95
  with pytest.raises(ValueError, match="model 'other'"):
    index_lib.ScannIndex.tf_state_arrays(str(tmp_path / "ah_tree"), "other")
  index_lib.EntityIndex.build(x, "brute_force", "m").save(str(tmp_path / "bf"))
  with pytest.raises(ValueError, match="'brute_force' index"):
    index_lib.ScannIndex.tf_state_arrays(str(tmp_path / "bf"))


# ---------------------------------------------------------------------------------- name rows


def test_best_row_per_entity_keeps_each_entitys_first_row_in_score_order():
  row_entities = np.array([0, 1, 2, 0, 0, 2], np.int32)  # rows 3, 4 name entity 0; 5 entity 2
  rows = np.array([[3, 1, 0, 5, 2, 4], [1, 4, 3, 0, 2, 5]])
  scores = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]],
                    np.float32)
  ids, best, complete = index_lib.best_row_per_entity(rows, scores, row_entities, 3)
  np.testing.assert_array_equal(ids, [[0, 1, 2], [1, 0, 2]])
  np.testing.assert_allclose(best, [[0.9, 0.8, 0.6], [0.9, 0.8, 0.5]])
  assert complete.tolist() == [True, True]
  # Two rows of one entity and one of another: only 2 distinct entities among 3 rows.
  ids, _, complete = index_lib.best_row_per_entity(np.array([[3, 0, 1]]), scores[:1, :3],
                                                    row_entities, 3)
  assert complete.tolist() == [False] and ids[0, :2].tolist() == [0, 1]


def _entity_max_ranking(x, row_entities, q, k):
  """Reference: each entity's maximum cosine over its rows, entities by decreasing score."""
  scores = q @ x.T
  n = int(row_entities.max()) + 1
  best = np.full((len(q), n), -np.inf, np.float32)
  for row, entity in enumerate(row_entities):
    best[:, entity] = np.maximum(best[:, entity], scores[:, row])
  order = np.argsort(-best, axis=1, kind="stable")[:, :k]
  return order, np.take_along_axis(best, order, 1)


def test_name_rows_index_is_exact_max_over_an_entitys_rows(tmp_path):
  # 200 entities; entity 7 has 60 name rows, all near one query, so the first 2k rows hold
  # fewer than k distinct entities and the search must widen; 50 others have one name row.
  rng = np.random.default_rng(5)
  x = unit_vectors(200, 16, seed=1)
  crowd = x[7] + 0.05 * rng.normal(size=(60, 16))
  others = unit_vectors(50, 16, seed=2)
  rows = np.concatenate([x, crowd / np.linalg.norm(crowd, axis=1, keepdims=True), others])
  row_entities = np.concatenate([np.arange(200), np.full(60, 7),
                                 rng.integers(0, 200, 50)]).astype(np.int32)
  titles = [f"Entity {i}" for i in range(200)]
  summary = index_builder.build_indexes(rows, titles, str(tmp_path), ["brute_force"], "m",
                                        row_entities=row_entities)
  assert (summary["num_entities"], summary["num_rows"]) == (200, 310)
  index = index_lib.load_index(str(tmp_path), "brute_force", "m", 16)
  assert isinstance(index, index_lib.NameRowsIndex)
  assert (index.num_entities, index.num_rows, index.effective_kind) == (200, 310, "brute_force")
  queries = np.concatenate([x[7:8], unit_vectors(20, 16, seed=3)])
  ids, scores = index.search(queries, 10)
  want_ids, want_scores = _entity_max_ranking(rows, row_entities, queries, 10)
  np.testing.assert_array_equal(ids, want_ids)
  np.testing.assert_allclose(scores, want_scores, atol=1e-5)
  one_ids, one_scores = index.search(queries[0], 10)  # the single-query path
  np.testing.assert_array_equal(one_ids, want_ids[0])
  assert len(set(one_ids.tolist())) == 10 and one_ids[0] == 7
  assert index.search(queries, 500)[0].shape == (21, 200)  # k above n: every entity once


def test_a_row_map_that_does_not_fit_the_index_is_an_error_naming_the_file(tmp_path):
  x = unit_vectors(30, 8)
  titles = [f"E{i}" for i in range(20)]
  with pytest.raises(ValueError, match="row_entities names 10 entities, but there are 20"):
    index_builder.build_indexes(x, titles, str(tmp_path), ["brute_force"], "m",
                                row_entities=np.concatenate([np.arange(10)] * 3))
  index_builder.build_indexes(x, titles, str(tmp_path), ["brute_force"], "m",
                              row_entities=np.concatenate([np.arange(20), np.arange(10)]))
  np.save(tmp_path / index_lib.ROW_ENTITIES_FILENAME, np.arange(25, dtype=np.int32))
  with pytest.raises(ValueError, match="row_entities.npy"):
    index_lib.load_index(str(tmp_path), "brute_force")
  # Rebuilt with one row per entity: the stale map is removed, the index is a plain one.
  index_builder.build_indexes(x[:20], titles, str(tmp_path), ["brute_force"], "m")
  assert not os.path.exists(tmp_path / index_lib.ROW_ENTITIES_FILENAME)
  assert isinstance(index_lib.load_index(str(tmp_path), "brute_force"), index_lib.BruteForceIndex)


def test_soar_tree_config_round_trips_and_is_validated(tmp_path):
  config = index_lib.derive_config(4_465_490, 256)
  assert (config.spherical, config.soar_lambda, config.overretrieve_factor) == (True, 1.5, 2.0)
  x = clustered_vectors(2000, 16, 20)
  index = index_lib.EntityIndex.build(x, "ah_tree", "m")
  assert index.effective_kind == "ah_tree" and index.config.soar_lambda == 1.5
  index.save(str(tmp_path / "t"))
  loaded = index_lib.EntityIndex.load(str(tmp_path / "t"))
  assert loaded.config == index.config
  assert loaded.search(x[:5], 1)[0][:, 0].tolist() == [0, 1, 2, 3, 4]
  with pytest.raises(ValueError, match="soar_lambda"):
    dataclasses.replace(config, soar_lambda=0.0).validate(4_465_490)


def test_build_index_command_keeps_the_row_map_beside_the_encodings(tmp_path):
  x = unit_vectors(40, 8)
  np.save(tmp_path / "entity_encodings.npy", x)
  np.save(tmp_path / index_lib.ROW_ENTITIES_FILENAME,
          np.concatenate([np.arange(30), np.arange(10)]).astype(np.int32))
  (tmp_path / "titles.txt").write_text("".join(f"E{i}\n" for i in range(30)), encoding="utf-8")
  proc = subprocess.run(
      [sys.executable, "-m", "export.build_index", f"--encodings={tmp_path}/entity_encodings.npy",
       f"--titles={tmp_path}/titles.txt", f"--output_dir={tmp_path}/out", "--kinds=brute_force",
       "--model_fingerprint=m"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  index = index_lib.load_index(str(tmp_path / "out"), "brute_force", "m")
  assert (index.num_entities, index.num_rows) == (30, 40)
  assert index.search(x[35], 1)[0].tolist() == [5]  # row 35 is a name of entity 5
