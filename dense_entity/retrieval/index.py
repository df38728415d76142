"""Nearest-neighbour indexes over entity encodings (paper section 5.2, Table 3).

The paper retrieves entities by maximum inner product search over pre-computed, L2-normalised
entity encodings, comparing exact brute force with ScaNN asymmetric hashing (AH) and AH + tree.
This module builds, searches, saves and loads those three index kinds:

- 'brute_force': exact; one float32 matmul + partial sort in numpy.
- 'ah': ScaNN AH (2 dimensions per block, anisotropic quantization threshold 0.2) scoring all
  entities, then exact re-scoring ("reorder") of the best `reorder_num_neighbors` candidates.
- 'ah_tree': a k-means tree (about sqrt(n) leaves) picks `num_leaves_to_search` leaves, AH scores
  the entities in them, exact reordering ranks the candidates.

Parameters are derived from the number of entities `n` (`derive_config`), so one command works
for 50 entities and for millions. Small indexes fall back, and the manifest records it:
'ah_tree' with n < MIN_TREE_SIZE (or when ScaNN cannot train the tree) is built as 'ah';
'ah' / 'ah_tree' with n < MIN_AH_SIZE (fewer points than the 16 AH centres per block) is built as
'brute_force'. The requested kind stays in `kind`, the built one is `effective_kind`.

Scores are cosines (paper section 3): non-zero database rows and queries are L2-normalised here.
Encodings made by this project's towers are used as they are (`normalize_rows=False`, as
retrieval.entity_encodings builds them): the towers normalise them already, and with the
lexical channel (modeling.layers.ContextMatchEncoder) an entity whose text has no weighted word
has norm sqrt(1 - w) < 1 by design; scaling it up to 1 here would rank such entities above the
score the model trained with. Zero-norm database rows (e.g. an entity with no features) cannot
be normalised; they are kept as zero vectors, so they score exactly 0.0 against every query
(never NaN) and rank below every entity with a positive score; their count is in the manifest. A zero-norm query has no cosine
with anything, so `search` raises ValueError naming its row rather than returning arbitrary ids.

The index stores only integer row ids (row i of the encodings); mapping ids to entity titles is
the caller's job (`index_builder.build_indexes` writes `entity_titles.txt` beside the indexes).

On disk (`EntityIndex.save`), a directory holds `index_manifest.json` (format version, kind,
effective kind, n, dim, parameters, model fingerprint, files with sizes) plus either
`encodings.npy` (brute force) or `scann/` (ScaNN assets, serialized with relative paths so the
directory can be copied or moved). `EntityIndex.load` checks every listed file before calling
into ScaNN, whose loader aborts the process on a missing asset (e.g. `dataset.npy`, needed for
exact reordering).
"""

import contextlib
import dataclasses
import json
import logging
import math
import mmap
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

from dense_entity.common import fileio

FORMAT_VERSION = 1
MANIFEST_FILENAME = "index_manifest.json"
TITLES_FILENAME = "entity_titles.txt"
BRUTE_FORCE_FILENAME = "encodings.npy"
SCANN_DIRNAME = "scann"
SCANN_ASSETS_FILENAME = "scann_assets.pbtxt"
SCANN_DATASET_FILENAME = "dataset.npy"
# The dataset ScaNN keeps for reordering, by reorder dtype (what `serialize` writes).
REORDER_DATASET_FILENAMES = {"float32": SCANN_DATASET_FILENAME,
                             "bfloat16": "bfloat16_dataset.npy", "int8": "int8_dataset.npy"}
REORDER_DTYPES = tuple(REORDER_DATASET_FILENAMES)
# Brute-force encodings are kept in memory as float32; on disk as float32, or as float16 when
# they would take more than this many bytes in float32 (loading converts back).
FLOAT16_STORAGE_BYTES = 1 << 30
# Above this many float32 bytes the ScaNN reordering dataset is stored as int8 (4x smaller).
INT8_REORDER_BYTES = 1 << 30
# Above this many float32 bytes a ScaNN build reads its input from a temporary file whose pages
# are kept out of resident memory (ScaNN copies the input; a second in-memory float32 copy of
# all of Wikipedia would cost 5.9 GB of the peak). The file goes to tempfile.gettempdir().
FILE_BACKED_BUILD_BYTES = 1 << 30

BRUTE_FORCE = "brute_force"
AH = "ah"
AH_TREE = "ah_tree"
KINDS = (BRUTE_FORCE, AH, AH_TREE)

# Below this many entities the tree is not worth training (leaves of ~16 points) and ScaNN's
# partitioner may fail; 'ah_tree' is then built as 'ah'.
MIN_TREE_SIZE = 256
# AH trains 16 centres per block (LUT16); with fewer points ScaNN fails to initialize.
MIN_AH_SIZE = 16
MAX_TRAINING_SAMPLE_SIZE = 250_000
# ScaNN search re-scores this many AH candidates per result asked for (at least
# reorder_num_neighbors).
REORDER_PER_RESULT = 3
# Leaves scanned by ScaNN's TF ops (no SOAR) per leaf of a SOAR config (build_tf_searcher).
TF_OPS_LEAVES_FACTOR = 3
# Brute-force scoring is done in query blocks of at most this many scores (64 MiB float32).
_MAX_SCORES_PER_BLOCK = 1 << 24


@dataclasses.dataclass(frozen=True)
class IndexConfig:
  """ScaNN parameters of an index (paper section 5.2); see `derive_config` for the defaults.

  Attributes:
    num_neighbors: default k the ScaNN searcher is built for; `search(k)` may ask for more.
    num_leaves: tree leaves (k-means partitions) for 'ah_tree'; <= n.
    num_leaves_to_search: leaves scanned per query for 'ah_tree'; <= num_leaves.
    training_sample_size: points sampled to train the tree and AH codebooks; <= n.
    dims_per_block: dimensions per AH block (2 in the paper's ScaNN setting).
    anisotropic_quantization_threshold: AH noise-shaping threshold (score-aware loss).
    reorder_num_neighbors: AH candidates re-scored exactly; raised to k at query time.
    reorder_dtype: precision of the vectors kept for reordering: 'float32' (exact cosines),
      'bfloat16' or 'int8' (per-dimension scaled, 4x smaller than float32).
    spherical: train the tree with spherical k-means (centres on the unit sphere, as the rows).
    soar_lambda: with a value, SOAR spilling (Sun et al., NeurIPS 2023, "SOAR: improved
      indexing for approximate nearest neighbor search"): every row is also assigned to a
      second leaf chosen so that its residual is near-orthogonal to the first's, weighted by
      this lambda; None: one leaf per row.
    overretrieve_factor: with SOAR, how many more candidates the leaves return before
      duplicates (rows found in both their leaves) are removed.
  """
  num_neighbors: int = 10
  num_leaves: int = 1
  num_leaves_to_search: int = 1
  training_sample_size: int = 1
  dims_per_block: int = 2
  anisotropic_quantization_threshold: float = 0.2
  reorder_num_neighbors: int = 100
  reorder_dtype: str = "float32"
  spherical: bool = False
  soar_lambda: Optional[float] = None
  overretrieve_factor: Optional[float] = None

  def clamped(self, n: int) -> "IndexConfig":
    """Returns a copy fitted to `n` entities: num_leaves and training_sample_size <= n,
    num_leaves_to_search <= num_leaves (a config copied from a large index stays usable)."""
    num_leaves = min(self.num_leaves, n)
    return dataclasses.replace(
        self, num_leaves=num_leaves,
        num_leaves_to_search=min(self.num_leaves_to_search, num_leaves),
        training_sample_size=min(self.training_sample_size, n))

  def validate(self, n: int) -> None:
    """Raises ValueError when a parameter is out of range for an index of `n` entities."""
    checks = [
        (self.num_neighbors >= 1, "num_neighbors must be >= 1"),
        (1 <= self.num_leaves <= n, f"num_leaves must be in [1, n={n}]"),
        (1 <= self.num_leaves_to_search <= self.num_leaves,
         "num_leaves_to_search must be in [1, num_leaves]"),
        (1 <= self.training_sample_size <= n, f"training_sample_size must be in [1, n={n}]"),
        (self.dims_per_block >= 1, "dims_per_block must be >= 1"),
        (self.reorder_num_neighbors >= 1, "reorder_num_neighbors must be >= 1"),
        (self.soar_lambda is None or self.soar_lambda > 0, "soar_lambda must be > 0"),
        (self.overretrieve_factor is None or self.overretrieve_factor >= 1,
         "overretrieve_factor must be >= 1"),
        (self.reorder_dtype in REORDER_DTYPES,
         f"reorder_dtype must be one of {REORDER_DTYPES}"),
    ]
    for ok, message in checks:
      if not ok:
        raise ValueError(f"Invalid IndexConfig {self}: {message}.")


def derive_config(n: int, dim: int, num_neighbors: int = 10,
                  leaves_to_search_fraction: float = 0.125,
                  min_points_to_search: int = 2000) -> IndexConfig:
  """Derives ScaNN parameters from the index size (paper section 5.2).

  num_leaves = round(sqrt(n)) (at least 1, at most n); num_leaves_to_search = the larger of
  ceil(fraction * num_leaves) and the leaves holding about `min_points_to_search` entities
  (ceil(min_points_to_search * num_leaves / n)), at most num_leaves (so small indexes scan
  every leaf); training_sample_size = min(n, 250,000); AH with 2 dimensions per block and
  anisotropic threshold 0.2; reorder_num_neighbors = max(4 * num_neighbors, 100); reordering
  in float32, or int8 when the float32 vectors would exceed INT8_REORDER_BYTES (1 GiB: a KB of
  all Wikipedia, 4.5M x 192, keeps 0.86 GB of int8 instead of 3.5 GB). Tuned on GloVe 50-d
  (benchmarks/ann_benchmark.py): recall@10 >= 0.95 against exact search at 10k and 100k
  entities. The tree is spherical with SOAR spilling (lambda 1.5, overretrieve 2): measured on
  all of Wikipedia (4.47M entities, 256-d mention queries of AIDA testa, exact recall@100
  0.810), 10% of the leaves reach recall@100 0.792 in 10 ms per query where the plain k-means
  tree reaches 0.706 (and needs half the leaves for 0.798): mention encodings are far from every
  entity, so one leaf per row misses near neighbours across leaf borders. Building takes about
  twice as long. 12.5% of the leaves: with name rows (5.74M rows, exact recall@100 0.863 on
  AIDA testa) 160 / 200 / 240 / 300 of 2,395 leaves reach 0.840 / 0.845 / 0.850 / 0.855, so 10%
  lost 1.3 points and 12.5% loses 0.8 (README, "All of Wikipedia").

  Args:
    n: number of entities (rows of the encodings), >= 1.
    dim: encoding dimension, >= 1.
    num_neighbors: the k the searcher is mostly queried with.
    leaves_to_search_fraction: fraction of leaves scanned per query, in (0, 1].
    min_points_to_search: entities the scanned leaves should hold on average.

  Returns:
    An IndexConfig valid for `n` entities.

  Raises:
    ValueError: n, dim or num_neighbors < 1, or the fraction outside (0, 1].
  """
  if n < 1 or dim < 1 or num_neighbors < 1:
    raise ValueError(f"n, dim and num_neighbors must be >= 1, got {n}, {dim}, {num_neighbors}.")
  if not 0.0 < leaves_to_search_fraction <= 1.0:
    raise ValueError(f"leaves_to_search_fraction must be in (0, 1], got "
                     f"{leaves_to_search_fraction}.")
  num_leaves = min(n, max(1, int(round(math.sqrt(n)))))
  to_search = max(int(math.ceil(leaves_to_search_fraction * num_leaves)),
                  int(math.ceil(min_points_to_search * num_leaves / n)))
  return IndexConfig(
      num_neighbors=num_neighbors,
      num_leaves=num_leaves,
      num_leaves_to_search=min(num_leaves, to_search),
      training_sample_size=min(n, MAX_TRAINING_SAMPLE_SIZE),
      dims_per_block=2,
      anisotropic_quantization_threshold=0.2,
      reorder_num_neighbors=max(4 * num_neighbors, 100),
      reorder_dtype="int8" if 4 * n * dim > INT8_REORDER_BYTES else "float32",
      spherical=True, soar_lambda=1.5, overretrieve_factor=2.0)


def _tree_arguments(config: IndexConfig) -> Dict[str, Any]:
  """ScaNN `tree()` keyword arguments of a config."""
  args = dict(num_leaves=config.num_leaves, num_leaves_to_search=config.num_leaves_to_search,
              training_sample_size=config.training_sample_size, spherical=config.spherical)
  if config.soar_lambda is not None:
    args.update(soar_lambda=config.soar_lambda, overretrieve_factor=config.overretrieve_factor)
  return args


def _build_with_ah_and_reordering(builder: Any, config: IndexConfig) -> Any:
  """Adds AH scoring and exact reordering of `config` to a ScaNN builder (pybind or TF ops,
  with or without a tree) and builds the searcher."""
  from scann.scann_ops.py import scann_builder  # pylint: disable=g-import-not-at-top
  builder = builder.score_ah(
      config.dims_per_block,
      anisotropic_quantization_threshold=config.anisotropic_quantization_threshold,
      training_sample_size=config.training_sample_size)
  quantize = {"float32": scann_builder.ReorderType.FLOAT32,
              "bfloat16": scann_builder.ReorderType.BFLOAT16,
              "int8": scann_builder.ReorderType.INT8}[config.reorder_dtype]
  return builder.reorder(config.reorder_num_neighbors, quantize=quantize).build()


def _import_scann_pybind():
  """Imports ScaNN's pybind wrapper lazily (it imports TensorFlow, seconds of start-up)."""
  from scann.scann_ops.py import scann_ops_pybind  # pylint: disable=g-import-not-at-top
  return scann_ops_pybind


def _normalize_rows(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """Returns (x with non-zero rows L2-normalised, boolean mask of zero-norm rows)."""
  norms = np.linalg.norm(x, axis=-1, keepdims=True)
  zero = norms[..., 0] == 0.0
  safe = np.where(norms == 0.0, 1.0, norms)
  return (x / safe).astype(np.float32), zero


def _encodings_shape(encodings: Any) -> Tuple[int, int]:
  """Shape [n, d] of database encodings (array-like).

  Raises:
    TypeError: non-numeric encodings.
    ValueError: not 2-D or empty.
  """
  x = encodings if isinstance(encodings, np.ndarray) else np.asarray(encodings)
  if x.dtype.kind not in "fiu":
    raise TypeError(f"Entity encodings must be real numbers, got dtype {x.dtype}.")
  if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
    raise ValueError(f"Entity encodings must have shape [n >= 1, dim >= 1], got {x.shape}.")
  return x.shape


def _check_encodings(encodings: Any, normalize: bool = True,
                     out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, int]:
  """Validates database encodings; returns (float32 [n, d], normalised when `normalize`,
  zero-norm row count).

  Works in blocks of rows, so the peak memory is the float32 result plus one block (a 4.5M x
  192 float16 input needs 3.5 GB, not three float32 copies). `out` (float32 [n, d], e.g. a
  `_ScratchMatrix` array) receives the result instead of a new in-memory array; the pages of a
  file-backed `out` are dropped from resident memory as it is written.
  """
  _encodings_shape(encodings)
  x = encodings if isinstance(encodings, np.ndarray) else np.asarray(encodings)
  if out is None:
    out = np.empty(x.shape, np.float32)
  elif out.shape != x.shape or out.dtype != np.float32:
    raise ValueError(f"out must be float32 {x.shape}, got {out.dtype} {out.shape}.")
  file_backed = isinstance(out, np.memmap)
  block = max(1, (1 << 22) // x.shape[1])
  num_zero, bad, first_zero = 0, [], []
  for start in range(0, x.shape[0], block):
    if file_backed and start and start % (64 * block) == 0:  # Every 1 GiB written.
      out.flush()
      release_mapped_pages(out)
    chunk = out[start:start + block]
    chunk[...] = x[start:start + block]
    finite = np.isfinite(chunk).all(axis=1)
    if not finite.all():
      bad.extend((np.flatnonzero(~finite) + start)[:5].tolist())
      continue
    if normalize:
      chunk[...], zero = _normalize_rows(chunk)
    else:
      zero = ~chunk.any(axis=1)
    if zero.any():
      num_zero += int(zero.sum())
      first_zero.extend((np.flatnonzero(zero) + start)[:5].tolist())
  if bad:
    raise ValueError(f"Entity encodings contain NaN/Inf (after casting to float32), first rows "
                     f"{bad[:5]}.")
  if num_zero:
    logging.warning("%d of %d entity encodings have zero norm; they score 0.0 against every "
                    "query (first rows %s).", num_zero, x.shape[0], first_zero[:5])
  release_mapped_pages(x)
  if file_backed:
    out.flush()
    release_mapped_pages(out)
  return out, num_zero


class _ScratchMatrix:
  """A float32 [n, d] matrix in a temporary .npy file whose pages are kept out of this
  process's resident memory (the input of a large ScaNN build, see FILE_BACKED_BUILD_BYTES).

  Use as a context manager; the file is deleted on exit. While `releasing()` is active a
  background thread drops the mapped pages every `period_s` seconds: ScaNN reads the input
  once into its own dataset, and pages it touches again are read back from the page cache.
  """

  def __init__(self, shape: Tuple[int, int]):
    """Raises OSError naming the directory when the disk cannot hold the file (the space is
    reserved up front: writing a memory map of a sparse file on a full disk kills the process
    with SIGBUS instead of raising)."""
    self._dir = tempfile.mkdtemp(prefix="scann-build-")
    path = os.path.join(self._dir, "encodings.npy")
    try:
      self.array = np.lib.format.open_memmap(path, "w+", np.float32, tuple(shape))
      with open(path, "r+b") as f:
        os.posix_fallocate(f.fileno(), 0, os.path.getsize(path))
    except OSError as e:
      shutil.rmtree(self._dir, ignore_errors=True)
      raise OSError(e.errno, f"cannot reserve {4 * shape[0] * shape[1]:,} bytes for the ScaNN "
                             f"build input in {self._dir} (set TMPDIR to a larger disk): "
                             f"{e.strerror}") from e

  def __enter__(self) -> "_ScratchMatrix":
    return self

  def __exit__(self, *exc_info) -> None:
    self.array = None
    shutil.rmtree(self._dir, ignore_errors=True)

  @contextlib.contextmanager
  def releasing(self, period_s: float = 1.0):
    done = threading.Event()

    def release():
      while not done.wait(period_s):
        release_mapped_pages(self.array)

    thread = threading.Thread(target=release, name="scratch-page-release", daemon=True)
    thread.start()
    try:
      yield
    finally:
      done.set()
      thread.join()
      release_mapped_pages(self.array)


def release_mapped_pages(x: np.ndarray) -> bool:
  """Drops the pages of the file mapping behind `x` (a np.memmap, or a view of one) from this
  process's resident memory; they stay in the page cache and are read again on access.

  Once the float32 copy is made, the float16 file's pages (2.9 GB at 4.5M x 320) would
  otherwise count towards the peak resident memory of a ScaNN build. Returns whether a
  mapping was found.
  """
  base = x
  while base is not None and not isinstance(base, mmap.mmap):
    base = getattr(base, "_mmap", None) or getattr(base, "base", None)
  if base is None or not hasattr(base, "madvise"):
    return False
  try:
    base.madvise(mmap.MADV_DONTNEED)
  except (OSError, ValueError):
    return False
  return True


def _to_float32(x: np.ndarray) -> np.ndarray:
  """A float32 in-memory copy of x [n, d] (e.g. a float16 memory map), block by block."""
  out = np.empty(x.shape, np.float32)
  block = 1 << 18
  for start in range(0, x.shape[0], block):
    out[start:start + block] = x[start:start + block]
  return out


def _check_queries(queries: Any, dim: int) -> np.ndarray:
  """Validates queries [b, dim] or [dim]; returns them float32 and L2-normalised."""
  q = np.asarray(queries)
  if q.dtype.kind not in "fiu":
    raise TypeError(f"Queries must be real numbers, got dtype {q.dtype}.")
  if q.ndim not in (1, 2):
    raise ValueError(f"Queries must have shape [dim] or [batch, dim] with dim={dim}, got "
                     f"{q.shape}.")
  if q.shape[-1] != dim:
    raise ValueError(f"Query dimension {q.shape[-1]} does not match the index: expected dim "
                     f"{dim} (query shape {q.shape}).")
  q = q.astype(np.float32)  # float64 (or int) queries are cast; values beyond float32 -> Inf.
  if q.ndim == 1:  # Fast path for single queries (microseconds matter there).
    norm = float(np.linalg.norm(q.astype(np.float64)))
    if not math.isfinite(norm):
      raise ValueError("Query contains NaN/Inf (after casting to float32).")
    if norm == 0.0:
      raise ValueError("Query has zero norm (no cosine is defined).")
    return q / np.float32(norm)
  finite = np.isfinite(q).all(axis=-1)
  if not np.all(finite):
    bad = np.flatnonzero(~np.atleast_1d(finite))
    raise ValueError(f"Queries contain NaN/Inf (after casting to float32) in rows "
                     f"{bad[:5].tolist()}.")
  q, zero = _normalize_rows(q)
  if np.any(zero):
    bad = np.flatnonzero(np.atleast_1d(zero))
    raise ValueError(f"Queries have zero norm (no cosine is defined) in rows {bad[:5].tolist()}.")
  return np.ascontiguousarray(q)


def _check_k(k: Any) -> int:
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
    raise ValueError(f"k must be a positive integer, got {k!r}.")
  return int(k)


def dir_files(directory: str) -> Dict[str, int]:
  """Returns {relative path: size in bytes} for every file under `directory`."""
  files = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      files[os.path.relpath(path, directory).replace(os.sep, "/")] = os.path.getsize(path)
  return dict(sorted(files.items()))


def _npy_shape(path: str) -> Tuple[int, ...]:
  """Reads the shape from a .npy header without loading the array."""
  return tuple(np.load(path, mmap_mode="r").shape)


def _replace_dir(tmp_dir: str, directory: str, overwrite: bool) -> None:
  """Moves a completed `tmp_dir` to `directory`; readers never see a half-written index."""
  if not os.path.exists(directory):
    os.rename(tmp_dir, directory)
    return
  if not overwrite:
    raise FileExistsError(f"Index directory {directory} exists; pass overwrite=True.")
  fileio.replace_directory(tmp_dir, directory, MANIFEST_FILENAME)


class EntityIndex:
  """Top-k maximum-cosine search over entity encodings (paper section 5.2).

  Build with `EntityIndex.build(encodings, kind, model_fingerprint)` or load with
  `EntityIndex.load(directory)`; the concrete classes are BruteForceIndex and ScannIndex.

  Attributes:
    kind: requested kind, one of KINDS.
    effective_kind: the kind actually built (differs after a small-index fallback).
    fallback_reason: why effective_kind != kind, else None.
    num_entities: n, rows of the encodings.
    dim: encoding dimension d.
    config: the IndexConfig (parameters for ScaNN; recorded for brute force too).
    model_fingerprint: fingerprint of the model that produced the encodings.
    num_zero_norm_rows: database rows with zero norm (score 0.0 with every query).
    rows_normalized: whether build L2-normalised the rows (else they are used as given).
    build_seconds: wall time of build, seconds (None for a loaded index).
    requested_config: the config passed to build when it had to be fitted to n (num_leaves or
      training_sample_size > n), else None.
  """

  def __init__(self, kind: str, effective_kind: str, num_entities: int, dim: int,
               config: IndexConfig, model_fingerprint: str,
               fallback_reason: Optional[str] = None, num_zero_norm_rows: int = 0,
               build_seconds: Optional[float] = None,
               requested_config: Optional[IndexConfig] = None, rows_normalized: bool = True):
    self.kind = kind
    self.effective_kind = effective_kind
    self.num_entities = num_entities
    self.dim = dim
    self.config = config
    self.model_fingerprint = model_fingerprint
    self.fallback_reason = fallback_reason
    self.num_zero_norm_rows = num_zero_norm_rows
    self.build_seconds = build_seconds
    self.requested_config = requested_config
    self.rows_normalized = rows_normalized

  # ----------------------------------------------------------------------- building / loading

  @classmethod
  def build(cls, encodings: Any, kind: str, model_fingerprint: str,
            config: Optional[IndexConfig] = None,
            normalize_rows: bool = True) -> "EntityIndex":
    """Builds an index over entity encodings (paper section 5.2).

    Args:
      encodings: [n, d] entity encodings (float32 expected; other real dtypes are cast), meant to
        be L2-normalised; non-zero rows are normalised again, zero rows kept (score 0.0).
      kind: 'brute_force', 'ah' or 'ah_tree'.
      model_fingerprint: fingerprint of the model that made the encodings (recorded and checked
        on load); a non-empty string.
      config: ScaNN parameters; None derives them from n and d (`derive_config`). A config
        with num_leaves or training_sample_size above n is fitted to n (recorded in
        `requested_config` and the manifest's requested_parameters).
      normalize_rows: L2-normalise non-zero rows; False uses them as given (encodings of
        the towers, see the module docstring).

    Returns:
      A BruteForceIndex or ScannIndex; small indexes fall back (see module docstring), recorded
      in `effective_kind` and `fallback_reason`.

    Raises:
      ValueError: unknown kind, empty fingerprint, bad shape, NaN/Inf, or invalid config.
      TypeError: non-numeric encodings.
    """
    if kind not in KINDS:
      raise ValueError(f"Unknown index kind {kind!r}; expected one of {KINDS}.")
    if not isinstance(model_fingerprint, str) or not model_fingerprint:
      raise ValueError("model_fingerprint must be a non-empty string.")
    if kind != BRUTE_FORCE:
      _import_scann_pybind()  # Not part of build_seconds.
    start = time.perf_counter()
    n, d = _encodings_shape(encodings)
    requested = derive_config(n, d) if config is None else config
    config = requested.clamped(n)
    config.validate(n)
    if config != requested:
      logging.info("Index parameters fitted to n=%d: %s -> %s", n, requested, config)
    effective, reason = kind, None
    if kind == AH_TREE and n < MIN_TREE_SIZE:
      effective, reason = AH, f"n={n} < MIN_TREE_SIZE={MIN_TREE_SIZE}: tree not trained"
    if effective == AH and n < MIN_AH_SIZE:
      effective = BRUTE_FORCE
      reason = (f"n={n} < MIN_AH_SIZE={MIN_AH_SIZE}: too few points to train AH "
                "(16 centres per block)")
    if effective != BRUTE_FORCE and 4 * n * d > FILE_BACKED_BUILD_BYTES:
      with _ScratchMatrix((n, d)) as scratch:
        _, num_zero = _check_encodings(encodings, normalize_rows, out=scratch.array)
        with scratch.releasing():
          effective, reason, searcher = cls._build_scann(scratch.array, effective, config,
                                                         reason)
    else:
      x, num_zero = _check_encodings(encodings, normalize_rows)
      if effective != BRUTE_FORCE:
        effective, reason, searcher = cls._build_scann(x, effective, config, reason)
    common = dict(kind=kind, num_entities=n, dim=d, config=config,
                  model_fingerprint=model_fingerprint, num_zero_norm_rows=num_zero,
                  requested_config=None if config == requested else requested,
                  rows_normalized=normalize_rows)
    if effective == BRUTE_FORCE:
      index = BruteForceIndex(x, effective_kind=BRUTE_FORCE, fallback_reason=reason, **common)
    else:
      index = ScannIndex(searcher, effective_kind=effective, fallback_reason=reason, **common)
    if reason:
      logging.info("Index kind %s built as %s: %s", kind, effective, reason)
    index.build_seconds = time.perf_counter() - start
    return index

  @staticmethod
  def _build_scann(x: np.ndarray, kind: str, config: "IndexConfig",
                   reason: Optional[str]) -> Tuple[str, Optional[str], Any]:
    """ScannIndex.build_searcher, falling back from 'ah_tree' to 'ah' when ScaNN cannot train
    the tree; returns (effective kind, fallback reason, searcher)."""
    try:
      return kind, reason, ScannIndex.build_searcher(x, kind, config)
    except RuntimeError as e:
      if kind != AH_TREE:
        raise
      reason = f"ScaNN could not train the tree ({e}); built without it"
      logging.warning("Index fallback for n=%d: %s", x.shape[0], reason)
      return AH, reason, ScannIndex.build_searcher(x, AH, config)

  @staticmethod
  def _read_manifest(directory: str, expected_model_fingerprint: Optional[str] = None,
                     expected_dim: Optional[int] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Reads and checks an index directory's manifest and the sizes of the files it lists;
    returns (constructor keyword arguments, manifest). Errors as `load`."""
    manifest_path = os.path.join(directory, MANIFEST_FILENAME)
    if not os.path.isdir(directory):
      raise FileNotFoundError(f"Index directory {directory} does not exist.")
    if not os.path.isfile(manifest_path):
      raise FileNotFoundError(f"Index manifest {manifest_path} is missing.")
    try:
      with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
      version = manifest["format_version"]
      kind, effective = manifest["kind"], manifest["effective_kind"]
      n, d = int(manifest["num_entities"]), int(manifest["dim"])
      fingerprint = manifest["model_fingerprint"]
      config = IndexConfig(**manifest["parameters"])
      files = manifest["files"]
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f"Index manifest {manifest_path} is unreadable: {e!r}") from e
    if version != FORMAT_VERSION:
      raise ValueError(f"Index manifest {manifest_path} has format_version {version}; this code "
                       f"reads {FORMAT_VERSION}.")
    if effective not in KINDS or kind not in KINDS:
      raise ValueError(f"Index manifest {manifest_path} has unknown kind {kind}/{effective}.")
    if expected_model_fingerprint is not None and fingerprint != expected_model_fingerprint:
      raise ValueError(f"Index {manifest_path} was built from model {fingerprint!r}, but model "
                       f"{expected_model_fingerprint!r} is expected; rebuild the index.")
    if expected_dim is not None and d != expected_dim:
      raise ValueError(f"Index {manifest_path} has dim {d}, but dim {expected_dim} is expected.")
    for rel, size in files.items():
      path = os.path.join(directory, rel)
      if not os.path.isfile(path):
        raise FileNotFoundError(f"Index file {path} is missing (listed in {manifest_path}).")
      if os.path.getsize(path) != size:
        raise ValueError(f"Index file {path} has {os.path.getsize(path)} bytes, the manifest "
                         f"{manifest_path} says {size}: the file is truncated or replaced.")
    return dict(kind=kind, effective_kind=effective, num_entities=n, dim=d, config=config,
                model_fingerprint=fingerprint,
                fallback_reason=manifest.get("fallback_reason"),
                num_zero_norm_rows=int(manifest.get("num_zero_norm_rows", 0)),
                requested_config=(IndexConfig(**manifest["requested_parameters"])
                                  if manifest.get("requested_parameters") else None),
                rows_normalized=bool(manifest.get("rows_normalized", True))), manifest

  @classmethod
  def load(cls, directory: str, expected_model_fingerprint: Optional[str] = None,
           expected_dim: Optional[int] = None) -> "EntityIndex":
    """Loads an index written by `save`, checking the manifest and files first.

    Args:
      directory: the index directory (may have been copied or moved since `save`).
      expected_model_fingerprint: if given, must equal the manifest's model_fingerprint.
      expected_dim: if given, must equal the manifest's dim.

    Returns:
      The loaded index; `search` gives the same results as before saving.

    Raises:
      FileNotFoundError: the directory, the manifest or a file it lists (e.g.
        scann/dataset.npy) is missing; the message names the path.
      ValueError: unreadable/unsupported manifest, a file of the wrong size or shape, or a
        fingerprint / dimension mismatch; the message names the file.
    """
    common, manifest = cls._read_manifest(directory, expected_model_fingerprint, expected_dim)
    manifest_path = os.path.join(directory, MANIFEST_FILENAME)
    n, d, effective = common["num_entities"], common["dim"], common["effective_kind"]
    config, files = common["config"], manifest["files"]
    if effective == BRUTE_FORCE:
      path = os.path.join(directory, BRUTE_FORCE_FILENAME)
      if BRUTE_FORCE_FILENAME not in files:
        raise FileNotFoundError(f"Index file {path} is missing (not in {manifest_path}).")
      storage = manifest.get("storage_dtype", "float32")
      x = np.load(path, mmap_mode="r")
      if x.shape != (n, d) or x.dtype != np.dtype(storage):
        raise ValueError(f"Index file {path} holds {x.dtype}{list(x.shape)}; the manifest says "
                         f"{storage}[{n}, {d}].")
      return BruteForceIndex(_to_float32(x), **common)
    scann_dir = os.path.join(directory, SCANN_DIRNAME)
    ScannIndex.check_assets(scann_dir, n, d, manifest_path, config.reorder_dtype)
    searcher = _import_scann_pybind().load_searcher(os.path.abspath(scann_dir))
    return ScannIndex(searcher, **common)

  # ------------------------------------------------------------------------------- searching

  def search(self, queries: Any, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Returns the k entities with the highest cosine for each query.

    A 1-D query [d] takes the single-query path; [b, d] the batched path.

    Args:
      queries: [b, d] or [d] real-valued (float64 is cast to float32); normalised here.
      k: number of neighbours, >= 1; k larger than n returns all n.

    Returns:
      (ids int32 [b, k'] (or [k']), scores float32 [b, k'] (or [k'])) with k' = min(k, n),
      row ids of the encodings ordered by decreasing cosine.

    Raises:
      ValueError: wrong dimension (the message names the expected dim), NaN/Inf or zero-norm
        queries, k < 1, or a rank other than 1 or 2.
      TypeError: non-numeric queries.
    """
    k = _check_k(k)
    q = _check_queries(queries, self.dim)
    kk = min(k, self.num_entities)
    if q.ndim == 1:
      ids, scores = self._search_one(q, kk)
    elif q.shape[0] == 0:
      ids, scores = np.zeros((0, kk), np.int32), np.zeros((0, kk), np.float32)
    else:
      ids, scores = self._search_batch(q, kk)
    return ids.astype(np.int32, copy=False), scores.astype(np.float32, copy=False)

  def _search_one(self, q: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    raise NotImplementedError

  def _search_batch(self, q: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    raise NotImplementedError

  # ---------------------------------------------------------------------------------- saving

  def _write_files(self, directory: str) -> None:
    raise NotImplementedError

  def manifest(self, files: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """Returns the manifest dict written to index_manifest.json by `save`."""
    return {
        "format_version": FORMAT_VERSION,
        "kind": self.kind,
        "effective_kind": self.effective_kind,
        "fallback_reason": self.fallback_reason,
        "num_entities": self.num_entities,
        "dim": self.dim,
        "distance": ("cosine (dot product of L2-normalised vectors)" if self.rows_normalized
                     else "dot product of the encodings as given (queries L2-normalised)"),
        "rows_normalized": self.rows_normalized,
        "parameters": dataclasses.asdict(self.config),
        "requested_parameters": (dataclasses.asdict(self.requested_config)
                                 if self.requested_config else None),
        "model_fingerprint": self.model_fingerprint,
        "num_zero_norm_rows": self.num_zero_norm_rows,
        "build_seconds": self.build_seconds,
        "files": files or {},
    }

  def save(self, directory: str, overwrite: bool = False) -> Dict[str, Any]:
    """Writes the index and index_manifest.json to `directory` atomically.

    Everything is written to a temporary sibling directory which is renamed to `directory`
    only when complete, so a failed save leaves no directory that `load` would accept.

    Args:
      directory: destination; its parent is created if needed.
      overwrite: replace an existing `directory`.

    Returns:
      The manifest dict; manifest["files"] maps relative paths to sizes in bytes (their sum is
      the index size on disk).

    Raises:
      FileExistsError: `directory` exists and overwrite is False.
    """
    directory = os.path.abspath(directory)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    if os.path.exists(directory) and not overwrite:
      raise FileExistsError(f"Index directory {directory} exists; pass overwrite=True.")
    tmp_dir = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(directory)}.tmp-")
    try:
      self._write_files(tmp_dir)
      manifest = self.manifest(dir_files(tmp_dir))
      with open(os.path.join(tmp_dir, MANIFEST_FILENAME), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
      _replace_dir(tmp_dir, directory, overwrite)
    except BaseException:
      shutil.rmtree(tmp_dir, ignore_errors=True)
      raise
    return manifest


class BruteForceIndex(EntityIndex):
  """Exact search: scores = queries @ encodings^T, then a partial sort (paper Table 3 baseline).

  Returned entities with equal scores are ordered by row id; which of several entities tied
  at the k-th score is returned is unspecified. Memory: the [n, d] float32 encodings (3.5 GB
  for 4.5M x 192); batched search scores blocks of at most 2^24 query-entity pairs (64 MiB) at
  a time and keeps each block's top k. On disk the encodings are float32, or float16 above
  FLOAT16_STORAGE_BYTES (`storage_dtype` in the manifest); scores are always float32 products
  of the stored values.
  """

  def __init__(self, encodings: np.ndarray, **kwargs):
    super().__init__(**kwargs)
    self.encodings = encodings

  @property
  def storage_dtype(self) -> str:
    """'float16' when the float32 encodings exceed FLOAT16_STORAGE_BYTES, else 'float32'."""
    return "float16" if self.encodings.nbytes > FLOAT16_STORAGE_BYTES else "float32"

  def _top_k(self, scores: np.ndarray, k: int,
             ids: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Top-k of scores [b, m] -> (ids [b, k], scores [b, k]), by decreasing score then id.

    `ids` [b, m] names the entity of each score (default: its column)."""
    m = scores.shape[-1]
    if k < m:
      cand = np.argpartition(scores, m - k, axis=-1)[:, m - k:]
    else:
      cand = np.broadcast_to(np.arange(m), scores.shape)
    cand_scores = np.take_along_axis(scores, cand, axis=-1)
    if ids is not None:
      cand = np.take_along_axis(ids, cand, axis=-1)
    order = np.lexsort((cand, -cand_scores), axis=-1)
    return np.take_along_axis(cand, order, axis=-1), np.take_along_axis(cand_scores, order, -1)

  def _search_one(self, q, k):
    scores = self.encodings @ q
    n = scores.shape[0]
    cand = np.argpartition(scores, n - k)[n - k:] if k < n else np.arange(n)
    cand_scores = scores[cand]
    order = np.lexsort((cand, -cand_scores))
    return cand[order], cand_scores[order]

  def _search_batch(self, q, k):
    n = self.num_entities
    # Blocks of up to 1024 queries (a matrix product, not a memory-bound matrix-vector pass
    # over all n rows per few queries) times as many entity rows as fit 2^24 scores.
    queries_per_block = max(1, min(q.shape[0], 1024))
    rows_per_block = max(k, _MAX_SCORES_PER_BLOCK // queries_per_block)
    ids, scores = [], []
    for start in range(0, q.shape[0], queries_per_block):
      block = q[start:start + queries_per_block]
      if rows_per_block >= n:
        i, s = self._top_k(block @ self.encodings.T, k)
      else:
        i, s = self._top_k_by_blocks(block, k, rows_per_block)
      ids.append(i)
      scores.append(s)
    return np.concatenate(ids), np.concatenate(scores)

  def _top_k_by_blocks(self, block: np.ndarray, k: int,
                       rows_per_block: int) -> Tuple[np.ndarray, np.ndarray]:
    """Exact top k of `block` [b, d] over entity rows taken `rows_per_block` at a time.

    The first rows give each query a running k-th best score; later rows only pass the
    scores at or above it (a comparison, ~1 ns per score, instead of a partial sort, ~10 ns),
    and the survivors are merged with the running top k.
    """
    n, b = self.num_entities, block.shape[0]
    best_ids, best_scores = self._top_k(block @ self.encodings[:rows_per_block].T,
                                        min(k, rows_per_block))
    best_rows = np.repeat(np.arange(b), best_ids.shape[1])
    best_ids, best_scores = best_ids.ravel(), best_scores.ravel()
    threshold = (best_scores.reshape(b, -1)[:, -1] if best_ids.size == b * k
                 else np.full(b, -np.inf, np.float32))
    for r in range(rows_per_block, n, rows_per_block):
      chunk = block @ self.encodings[r:r + rows_per_block].T
      # flatnonzero + divmod: 5x faster than a 2-D np.nonzero, which cost as much as the
      # matrix product itself (1024 x 16384 scores: 65 ms against 74 ms; 12.5 ms this way).
      rows, cols = np.divmod(np.flatnonzero(chunk >= threshold[:, None]), chunk.shape[1])
      if not rows.size:
        continue
      all_rows = np.concatenate([best_rows, rows])
      all_scores = np.concatenate([best_scores, chunk[rows, cols]])
      all_ids = np.concatenate([best_ids, cols + r])
      order = np.lexsort((all_ids, -all_scores, all_rows))
      all_rows, all_scores, all_ids = all_rows[order], all_scores[order], all_ids[order]
      first = np.searchsorted(all_rows, np.arange(b))
      rank = np.arange(all_rows.size) - first[all_rows]
      keep = rank < k
      best_rows, best_scores, best_ids = all_rows[keep], all_scores[keep], all_ids[keep]
      counts = np.bincount(best_rows, minlength=b)
      full = counts == k
      last = np.searchsorted(best_rows, np.arange(b)) + k - 1
      threshold = np.where(full, best_scores[np.minimum(last, best_scores.size - 1)],
                           -np.inf).astype(np.float32)
    return best_ids.reshape(b, k), best_scores.reshape(b, k)

  def manifest(self, files: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    manifest = super().manifest(files)
    manifest["storage_dtype"] = self.storage_dtype
    return manifest

  def _write_files(self, directory):
    path = os.path.join(directory, BRUTE_FORCE_FILENAME)
    if self.storage_dtype == "float32":
      np.save(path, self.encodings)
      return
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16,
                                    shape=self.encodings.shape)
    block = 1 << 18
    for start in range(0, self.num_entities, block):
      out[start:start + block] = self.encodings[start:start + block]
    out.flush()
    del out


class ScannIndex(EntityIndex):
  """ScaNN asymmetric hashing, optionally with a tree, plus exact reordering (paper Table 3).

  At query time the reorder candidate count is raised to k, and for 'ah_tree' any query whose
  scanned leaves hold fewer than k' = min(k, n) entities is searched again over all leaves, so
  every query gets exactly k' results.
  """

  def __init__(self, searcher: Any, **kwargs):
    super().__init__(**kwargs)
    self.searcher = searcher

  @staticmethod
  def build_searcher(x: np.ndarray, kind: str, config: IndexConfig) -> Any:
    """Builds a ScaNN searcher over x [n, d] float32 for kind 'ah' or 'ah_tree'.

    Raises:
      RuntimeError: ScaNN failed to initialize (e.g. the tree could not be trained).
    """
    builder = _import_scann_pybind().builder(x, config.num_neighbors, "dot_product")
    if kind == AH_TREE:
      builder = builder.tree(**_tree_arguments(config))
    return _build_with_ah_and_reordering(builder, config)

  @staticmethod
  def build_tf_searcher(x: np.ndarray, config: IndexConfig) -> Any:
    """The same AH + tree searcher as `build_searcher`, with ScaNN's TensorFlow ops (for a
    SavedModel: `serialize_to_module()` gives its state as variables); the ops have no SOAR,
    so a SOAR config is built without it, scanning TF_OPS_LEAVES_FACTOR (3) times the leaves.

    Raises:
      RuntimeError: ScaNN failed to initialize.
    """
    from scann.scann_ops.py import scann_ops  # pylint: disable=g-import-not-at-top
    x = np.ascontiguousarray(x, dtype=np.float32)
    config = config.clamped(x.shape[0])
    if config.soar_lambda is not None:
      # ScaNN's TF ops have no SOAR spilling: without it, 3x the leaves keep about the recall
      # (all of Wikipedia, AIDA testa recall@100: 0.785 at 30% of the leaves with one leaf per
      # row, 0.792 at 10% with SOAR; exact 0.810).
      config = dataclasses.replace(
          config, soar_lambda=None, overretrieve_factor=None,
          num_leaves_to_search=min(config.num_leaves, TF_OPS_LEAVES_FACTOR
                                   * config.num_leaves_to_search))
    builder = scann_ops.builder(x, config.num_neighbors, "dot_product").tree(
        **_tree_arguments(config))
    return _build_with_ah_and_reordering(builder, config)

  @classmethod
  def tf_state_arrays(cls, directory: str, expected_model_fingerprint: Optional[str] = None,
                      expected_dim: Optional[int] = None
                      ) -> Tuple[Dict[str, Any], Tuple[np.ndarray, ...]]:
    """The state of ScaNN's TensorFlow searcher, read from a saved 'ah_tree' index (no rebuild).

    ScaNN's TF ops (`scann_ops.ScannState`, `tensors_to_scann`) take the same tree, AH
    codebook, codes and reordering vectors as the pybind searcher `save` wrote, except SOAR's
    spilled assignments (no such input): each entity keeps its primary leaf and its codes,
    spilling is dropped from the config, and TF_OPS_LEAVES_FACTOR (3) times the leaves are
    scanned instead (as `build_tf_searcher`). A 5.7M-row index gives its state in seconds, where
    a rebuild takes ~15 minutes and a float32 copy of the encodings.

    Args:
      directory: an index directory written by `save` whose effective kind is 'ah_tree'.
      expected_model_fingerprint, expected_dim: checked against the manifest as in `load`.

    Returns:
      (the manifest, the nine arrays in ScannState's order: scann_config, serialized_partitioner
      (both bytes [1]), datapoint_to_token int32 [n], ah_codebook bytes [1], hashed_dataset
      uint8 [n, blocks], int8_dataset int8 [n, d], int8_multipliers float32 [d], dp_norms,
      dataset (float32 [n, d] for float32 reordering; unused ones are float32 scalars, as
      ScaNN's own serialization gives them)).

    Raises:
      FileNotFoundError / ValueError: as `load`; ValueError also when the index is not an
        'ah_tree' one or reorders in bfloat16 (the TF ops take int8 or float32 vectors).
    """
    common, manifest = cls._read_manifest(directory, expected_model_fingerprint, expected_dim)
    manifest_path = os.path.join(directory, MANIFEST_FILENAME)
    n, d, config = common["num_entities"], common["dim"], common["config"]
    if common["effective_kind"] != AH_TREE:
      raise ValueError(f"Index {manifest_path} is a {common['effective_kind']!r} index; a "
                       f"ScaNN TF searcher is made from an {AH_TREE!r} one.")
    if config.reorder_dtype == "bfloat16":
      raise ValueError(f"Index {manifest_path} reorders in bfloat16; ScaNN's TF ops reorder in "
                       "int8 or float32.")
    scann_dir = os.path.join(directory, SCANN_DIRNAME)
    cls.check_assets(scann_dir, n, d, manifest_path, config.reorder_dtype)
    from scann.proto import scann_pb2  # pylint: disable=g-import-not-at-top

    def read_bytes(name):
      with open(os.path.join(scann_dir, name), "rb") as f:
        return np.array([f.read()], dtype=object)

    def read_npy(name, dtype, shape):
      path = os.path.join(scann_dir, name)
      x = np.load(path)
      if x.dtype != dtype or (shape is not None and x.shape != shape):
        raise ValueError(f"ScaNN asset {path} holds {x.dtype}{list(x.shape)}, expected "
                         f"{np.dtype(dtype)}{list(shape) if shape else ''} (index {manifest_path}).")
      return x

    scann_config = scann_pb2.ScannConfig()
    scann_config.ParseFromString(read_bytes("scann_config.pb")[0])
    partitioning = scann_config.partitioning
    partitioning.ClearField("database_spilling")
    partitioning.query_spilling.max_spill_centers = min(
        partitioning.num_children, TF_OPS_LEAVES_FACTOR * config.num_leaves_to_search)
    tokens = read_npy("datapoint_to_token.npy", np.int32, None)
    if tokens.shape == (2 * n,):  # SOAR: (primary, spilled or -1) per datapoint.
      tokens = np.ascontiguousarray(tokens[0::2])
    elif tokens.shape != (n,):
      raise ValueError(f"ScaNN asset {os.path.join(scann_dir, 'datapoint_to_token.npy')} holds "
                       f"{tokens.shape[0]} tokens for {n} datapoints (index {manifest_path}).")
    unused = np.zeros((), np.float32)
    if config.reorder_dtype == "int8":
      int8_dataset = read_npy("int8_dataset.npy", np.int8, (n, d))
      multipliers = read_npy("int8_multipliers.npy", np.float32, (d,))
      dataset = unused
    else:
      int8_dataset, multipliers = np.zeros((), np.int8), unused
      dataset = read_npy(SCANN_DATASET_FILENAME, np.float32, (n, d))
    norms_path = os.path.join(scann_dir, "dp_norms.npy")
    norms = np.load(norms_path) if os.path.isfile(norms_path) else unused
    if norms.size == 0:
      norms = unused
    hashed = read_npy("hashed_dataset.npy", np.uint8, None)
    if hashed.ndim != 2 or hashed.shape[0] != n:
      raise ValueError(f"ScaNN asset {os.path.join(scann_dir, 'hashed_dataset.npy')} holds "
                       f"{list(hashed.shape)}, expected [{n}, blocks] (index {manifest_path}).")
    return manifest, (np.array([scann_config.SerializeToString()], dtype=object),
                      read_bytes("serialized_partitioner.pb"), tokens,
                      read_bytes("ah_codebook.pb"), hashed, int8_dataset, multipliers, norms,
                      dataset)

  @staticmethod
  def check_assets(scann_dir: str, n: int, d: int, manifest_path: str,
                   reorder_dtype: str = "float32") -> None:
    """Checks that ScaNN's assets exist before `load_searcher` (which aborts if they do not).

    Raises:
      FileNotFoundError: scann_assets.pbtxt, an asset it lists or the reordering dataset of
        `reorder_dtype` (dataset.npy, bfloat16_dataset.npy or int8_dataset.npy) is missing
        (names the path).
      ValueError: the reordering dataset does not hold [n, d].
    """
    assets_path = os.path.join(scann_dir, SCANN_ASSETS_FILENAME)
    if not os.path.isfile(assets_path):
      raise FileNotFoundError(f"ScaNN asset list {assets_path} is missing (index "
                              f"{manifest_path}).")
    from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
    from scann.scann_ops import scann_assets_pb2  # pylint: disable=g-import-not-at-top
    with open(assets_path, encoding="utf-8") as f:
      assets = text_format.Parse(f.read(), scann_assets_pb2.ScannAssets())
    names = set()
    for asset in assets.assets:
      path = asset.asset_path
      if not os.path.isabs(path):
        path = os.path.join(scann_dir, path)
      names.add(os.path.basename(path))
      if not os.path.isfile(path):
        raise FileNotFoundError(f"ScaNN asset {path} is missing (listed in {assets_path}).")
    name = REORDER_DATASET_FILENAMES[reorder_dtype]
    dataset = os.path.join(scann_dir, name)
    if name not in names or not os.path.isfile(dataset):
      raise FileNotFoundError(f"ScaNN dataset {dataset} is missing: reordering needs it "
                              f"(index {manifest_path}).")
    shape = _npy_shape(dataset)
    if shape != (n, d):
      raise ValueError(f"ScaNN dataset {dataset} has shape {shape}; the manifest "
                       f"{manifest_path} says [{n}, {d}].")

  def _pre_reorder(self, k: int) -> int:
    # 3k candidates reordered for k results: at k = 100 over all of Wikipedia, 100 reordered
    # lose 1.5 points of recall@100 against 300 (AIDA testa, 30% of the leaves).
    return max(REORDER_PER_RESULT * k, self.config.reorder_num_neighbors)

  def _search_one(self, q, k):
    ids, scores = self.searcher.search(q, final_num_neighbors=k,
                                       pre_reorder_num_neighbors=self._pre_reorder(k))
    if len(ids) < k and self.effective_kind == AH_TREE:
      ids, scores = self.searcher.search(q, final_num_neighbors=k,
                                         pre_reorder_num_neighbors=self._pre_reorder(k),
                                         leaves_to_search=self.config.num_leaves)
    if len(ids) < k:
      raise RuntimeError(f"ScaNN returned {len(ids)} < {k} neighbours over {self.num_entities} "
                         "entities.")
    return np.asarray(ids), np.asarray(scores)

  def _search_batch(self, q, k):
    ids, scores = self.searcher.search_batched_parallel(
        q, final_num_neighbors=k, pre_reorder_num_neighbors=self._pre_reorder(k))
    ids, scores = np.array(ids), np.array(scores)
    short = np.flatnonzero(np.isnan(scores).any(axis=1))  # ScaNN pads with id 0, score NaN.
    if short.size and self.effective_kind == AH_TREE:
      more_ids, more_scores = self.searcher.search_batched(
          q[short], final_num_neighbors=k, pre_reorder_num_neighbors=self._pre_reorder(k),
          leaves_to_search=self.config.num_leaves)
      ids[short], scores[short] = more_ids, more_scores
    if np.isnan(scores).any():
      raise RuntimeError(f"ScaNN returned fewer than {k} neighbours over {self.num_entities} "
                         "entities.")
    return ids, scores

  def _write_files(self, directory):
    scann_dir = os.path.join(directory, SCANN_DIRNAME)
    os.makedirs(scann_dir)
    # Relative asset paths, so the saved directory can be copied or moved.
    self.searcher.serialize(scann_dir, relative_path=True)


# ------------------------------------------------------------------------------- name rows

ROW_ENTITIES_FILENAME = "row_entities.npy"


def best_row_per_entity(row_ids: np.ndarray, scores: np.ndarray, row_entities: np.ndarray,
                        k: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Keeps each entity's best row from ranked row ids, so an entity scores its best name.

  Args:
    row_ids: int `[b, K]` index rows, each row of the array ordered by decreasing score.
    scores: float32 `[b, K]` their scores.
    row_entities: int `[rows]`, the entity id of every index row.
    k: entities wanted per query.

  Returns:
    (entity ids int32 `[b, k']`, scores float32 `[b, k']`, complete bool `[b]`) with
    k' = min(k, K): the first k distinct entities of each ranking with the score of their
    first (best) row; `complete[i]` is False when query i's K rows hold fewer than k distinct
    entities (its tail then repeats entities and must be searched again with more rows).
  """
  entities = row_entities[row_ids]
  # A stable sort by entity keeps each entity's rows in score order: the first is its best.
  order = np.argsort(entities, axis=1, kind="stable")
  by_entity = np.take_along_axis(entities, order, 1)
  first_sorted = np.ones(by_entity.shape, bool)
  first_sorted[:, 1:] = by_entity[:, 1:] != by_entity[:, :-1]
  first = np.empty_like(first_sorted)
  np.put_along_axis(first, order, first_sorted, 1)
  kk = min(k, entities.shape[1])
  keep = np.argsort(~first, axis=1, kind="stable")[:, :kk]  # first occurrences, score order
  return (np.take_along_axis(entities, keep, 1).astype(np.int32),
          np.take_along_axis(scores, keep, 1).astype(np.float32), first.sum(axis=1) >= kk)


class NameRowsIndex:
  """An index with one row per entity name, searched as an index of entities.

  Row i < n is entity i (its title, text, categories and aliases); rows n.. each hold one more
  name of an entity (an alias or redirect title, with that entity's text and categories), so a
  mention written as any of an entity's names can match that name exactly, as in multi-view
  entity representations (Ma et al. 2021, MuVER) and as an alias table does; an entity's score
  is the maximum over its rows (retrieval.entity_encodings docstring). `search` asks the
  underlying index for 2k rows and keeps the best row of each entity; a query whose rows hold
  fewer than k distinct entities is searched again with 4x as many rows (up to all rows), so
  brute force stays exact.

  Attributes:
    index: the EntityIndex over all rows (its `num_entities` is the number of rows).
    row_entities: int32 `[rows]`, the entity id of every row (row_entities[:n] = 0..n-1 as
      built; any order after a KB update).
    num_entities: n, entities (distinct ids).
    num_rows: rows of the underlying index.
  Other attributes (kind, effective_kind, dim, config, model_fingerprint, ...) are the
  underlying index's.
  """

  def __init__(self, index: EntityIndex, row_entities: np.ndarray):
    row_entities = np.asarray(row_entities)
    if row_entities.ndim != 1 or row_entities.shape[0] != index.num_entities:
      raise ValueError(f"row_entities has shape {row_entities.shape}; the index has "
                       f"{index.num_entities} rows.")
    self.index = index
    self.row_entities = row_entities.astype(np.int32, copy=False)
    self.num_entities = check_row_entities(self.row_entities)
    self.num_rows = index.num_entities

  def __getattr__(self, name: str) -> Any:
    return getattr(self.__dict__["index"], name)

  def search(self, queries: Any, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """As EntityIndex.search, over entities: ids are entity ids (row ids of the entity
    titles), each entity's score that of its best-scoring name row.

    Raises:
      ValueError / TypeError: as EntityIndex.search.
    """
    k = _check_k(k)
    kk = min(k, self.num_entities)
    single = np.ndim(queries) == 1
    rows_k = min(self.num_rows, 2 * kk)
    ids, scores = self.index.search(queries, rows_k)
    if single:
      ids, scores = ids[None], scores[None]
    out_ids, out_scores, complete = best_row_per_entity(ids, scores, self.row_entities, kk)
    todo = np.flatnonzero(~complete)
    while todo.size:
      rows_k = min(self.num_rows, 4 * rows_k)
      q = np.asarray(queries)
      more_ids, more_scores = self.index.search(q if single else q[todo], rows_k)
      if single:
        more_ids, more_scores = more_ids[None], more_scores[None]
      e, s, done = best_row_per_entity(more_ids, more_scores, self.row_entities, kk)
      out_ids[todo], out_scores[todo] = e, s
      todo = todo[~done]
      if rows_k == self.num_rows and todo.size:
        raise RuntimeError(f"{todo.size} queries got fewer than {kk} entities from all "
                           f"{self.num_rows} rows.")
    if single:
      return out_ids[0], out_scores[0]
    return out_ids, out_scores


def check_row_entities(row_entities: np.ndarray) -> int:
  """Checks a row -> entity map (every row names an entity id in 0..n-1 and every entity has
  at least one row) and returns n.

  A built index has rows 0..n-1 for entities 0..n-1 and their name rows after them; a KB
  updated by retrieval.kb_update has its rows in any order (rows are swap-removed and appended).

  Raises:
    ValueError: the map is not of that form.
  """
  if row_entities.size == 0:
    return 0
  n = int(row_entities.max()) + 1
  if row_entities.min() < 0 or np.bincount(row_entities, minlength=n).min() == 0:
    missing = (np.flatnonzero(np.bincount(row_entities[row_entities >= 0], minlength=n) == 0)
               if row_entities.min() >= 0 else [])
    raise ValueError(f"row_entities must map every row to an entity id in 0..n-1 and give "
                     f"every entity a row; got {row_entities.shape[0]} rows, max {n - 1}, min "
                     f"{int(row_entities.min())}, entities without a row {list(missing[:5])}.")
  return n


def check_row_map(row_entities: np.ndarray, num_rows: int, num_entities: int) -> None:
  """Checks that a row -> entity map fits `num_rows` encoding rows and `num_entities` titles.

  Raises:
    ValueError: the map is malformed (check_row_entities), has another length, or names
      another number of entities.
  """
  if row_entities.shape != (num_rows,):
    raise ValueError(f"row_entities has shape {row_entities.shape} for {num_rows} encoding "
                     "rows.")
  named = check_row_entities(row_entities)
  if named != num_entities:
    raise ValueError(f"row_entities names {named} entities, but there are {num_entities} "
                     "titles.")


def read_row_entities(index_root: str) -> Optional[np.ndarray]:
  """INDEX_ROOT/row_entities.npy (int32 `[rows]`), or None when the indexes have one row per
  entity."""
  path = os.path.join(index_root, ROW_ENTITIES_FILENAME)
  if not os.path.isfile(path):
    return None
  try:
    rows = np.load(path)
  except ValueError as e:
    raise ValueError(f"{path} is unreadable: {e}") from e
  if rows.ndim != 1 or rows.dtype.kind not in "iu":
    raise ValueError(f"{path} holds {rows.dtype}{list(rows.shape)}; expected int32 [rows].")
  return rows.astype(np.int32, copy=False)


def load_index(index_root: str, kind: str, expected_model_fingerprint: Optional[str] = None,
               expected_dim: Optional[int] = None):
  """Loads INDEX_ROOT/KIND (EntityIndex.load) and, when INDEX_ROOT/row_entities.npy exists
  (an index with name rows), wraps it in a NameRowsIndex, so that `search` returns entity ids.

  Raises:
    As EntityIndex.load; ValueError when row_entities.npy does not match the index's rows
    (the message names the file).
  """
  index = EntityIndex.load(os.path.join(index_root, kind), expected_model_fingerprint,
                           expected_dim)
  rows = read_row_entities(index_root)
  if rows is None:
    return index
  try:
    return NameRowsIndex(index, rows)
  except ValueError as e:
    raise ValueError(f"{os.path.join(index_root, ROW_ENTITIES_FILENAME)}: {e}") from e
