"""ANN benchmark on real vectors: brute force vs ScaNN AH / AH + tree vs FAISS (paper Table 3).

The standard ANN setting: the 100,000 GloVe 6B 50-d vectors (most frequent words), L2-normalised;
`--num_queries` rows held out (fixed seed) as queries, the rest is the database. At each database
size (the first N database rows), every method is measured side by side in one run:

- brute force: export.index BruteForceIndex (numpy matmul + argpartition), exact; the baseline;
- ScaNN AH and AH + tree through export.index.EntityIndex (parameters derived from n, plus a few
  leaves_to_search / reorder settings);
- FAISS (faiss-cpu): IndexFlatIP (exact), IndexIVFFlat at several nprobe, IndexHNSWFlat at
  several efSearch.

Reported per method: build time (seconds), index size (bytes: saved directory for ours,
faiss.serialize_index for FAISS, n * d * 4 for brute force), queries/s single-query (one query
per call, FAISS with 1 OpenMP thread; ScaNN single-query search is single-threaded) and batched
(all queries in one call, all cores), recall@10 against exact search, and ratios vs brute force.
Then, at matched recall@10 >= --target_recall, the fastest ScaNN configuration vs the fastest
FAISS one, and how per-query time grows from the smallest to the largest database.

Usage (from the repository root):
  python -m benchmarks.ann_benchmark [--glove=PATH] [--sizes=10000,100000]
"""

import dataclasses
import gzip
import math
import os
import shutil
import tempfile
import time
from typing import Callable, List, Optional

from absl import flags
import numpy as np

from dense_entity.common import entry
from dense_entity.retrieval import index as index_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_GLOVE = os.path.join(REPO_ROOT, "..", "shared", "data", "glove",
                             "glove.6B.50d.top100k.txt.gz")
K = 10


@dataclasses.dataclass
class Result:
  n: int
  family: str  # 'brute_force', 'scann', 'faiss'.
  method: str
  params: str
  build_s: float
  index_bytes: int
  single_qps: float
  batched_qps: float
  recall: float


def load_glove(path: str) -> np.ndarray:
  """Reads a GloVe text file (gzip) -> float32 [rows, dim], rows L2-normalised."""
  rows = []
  with gzip.open(path, "rt", encoding="utf-8") as f:
    for line in f:
      parts = line.rstrip().split(" ")
      rows.append(np.asarray(parts[1:], dtype=np.float32))
  x = np.stack(rows)
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return x / np.where(norms == 0, 1, norms)


def _numpy_blas_setter() -> Optional[Callable[[int], None]]:
  """Returns a function setting numpy's OpenBLAS thread count, or None if it is not found.

  Single-query brute force is a matrix-vector product; with 2 BLAS threads on a busy 2-core
  machine it slows down ~100x (threads wait on each other), which would flatter every ANN
  method. The baseline therefore runs single queries on 1 BLAS thread (as ScaNN and FAISS
  single queries do) and batches on all cores.
  """
  import ctypes  # pylint: disable=g-import-not-at-top
  with open("/proc/self/maps") as f:
    paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
  for path in paths:
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                 "openblas_set_num_threads64_", "openblas_set_num_threads"):
      if hasattr(lib, name):
        fn = getattr(lib, name)
        return lambda n: fn(ctypes.c_int(n))
  return None


_SET_BLAS_THREADS = None


def _set_blas_threads(n: int) -> None:
  if _SET_BLAS_THREADS is not None:
    _SET_BLAS_THREADS(n)


def recall_at_k(ids: np.ndarray, truth: np.ndarray) -> float:
  """Mean over queries of |ids[:k] & truth[:k]| / k."""
  hits = [len(set(a.tolist()) & set(b.tolist())) for a, b in zip(ids, truth)]
  return float(np.mean(hits)) / truth.shape[1]


def time_single(search_one: Callable[[np.ndarray], np.ndarray], queries: np.ndarray,
                repeats: int) -> float:
  """Queries/s calling search_one once per query (best of `repeats` passes, after warm-up)."""
  for q in queries[:20]:
    search_one(q)
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    for q in queries:
      search_one(q)
    best = min(best, time.perf_counter() - start)
  return len(queries) / best


def time_batched(search_all: Callable[[np.ndarray], np.ndarray], queries: np.ndarray,
                 repeats: int) -> float:
  search_all(queries[:20])
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    search_all(queries)
    best = min(best, time.perf_counter() - start)
  return len(queries) / best


def dir_bytes(directory: str) -> int:
  return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(directory) for f in fs)


def bench_ours(db, queries, truth, kind, config, params, family, repeats, tmp) -> Result:
  index = index_lib.EntityIndex.build(db, kind, "glove-benchmark", config)
  ids, _ = index.search(queries, K)
  path = os.path.join(tmp, "index")
  index.save(path, overwrite=True)
  size = dir_bytes(path)
  shutil.rmtree(path)
  if kind == index_lib.BRUTE_FORCE:
    size = db.nbytes  # In memory: the encodings; on disk the .npy adds a 128-byte header.
  _set_blas_threads(1)
  single = time_single(lambda q: index.search(q, K), queries, repeats)
  _set_blas_threads(os.cpu_count() or 1)
  batched = time_batched(lambda q: index.search(q, K), queries, repeats)
  return Result(len(db), family, f"{kind} ({index.effective_kind})" if index.effective_kind
                != kind else kind, params, index.build_seconds, size, single, batched,
                recall_at_k(ids, truth))


def build_faiss(make, db):
  """Builds (trains + adds) a FAISS index; returns (index, seconds)."""
  start = time.perf_counter()
  index = make()
  if not index.is_trained:
    index.train(db)
  index.add(db)
  return index, time.perf_counter() - start


def bench_faiss(faiss, index, build_s, queries, truth, method, params, repeats,
                threads) -> Result:
  """Measures a built FAISS index with its search parameters already set."""
  faiss.omp_set_num_threads(threads)
  _, ids = index.search(queries, K)
  size = int(faiss.serialize_index(index).nbytes)
  faiss.omp_set_num_threads(1)
  single = time_single(lambda q: index.search(q[None, :], K), queries, repeats)
  faiss.omp_set_num_threads(threads)
  batched = time_batched(lambda q: index.search(q, K), queries, repeats)
  return Result(index.ntotal, "faiss", method, params, build_s, size, single, batched,
                recall_at_k(ids, truth))


def run_size(db, queries, repeats, tmp, leaf_fractions, reorders, faiss, threads,
             nprobes, efs) -> List[Result]:
  """Runs every method on database db [n, d]; returns the results, brute force first."""
  n, d = db.shape
  truth_index = index_lib.EntityIndex.build(db, index_lib.BRUTE_FORCE, "truth")
  truth, _ = truth_index.search(queries, K)
  results = [bench_ours(db, queries, truth, index_lib.BRUTE_FORCE, None, "numpy exact",
                        "brute_force", repeats, tmp)]
  derived = index_lib.derive_config(n, d, num_neighbors=K)
  results.append(bench_ours(db, queries, truth, index_lib.AH, derived,
                            f"reorder={derived.reorder_num_neighbors} (derived)", "scann",
                            repeats, tmp))
  results.append(bench_ours(
      db, queries, truth, index_lib.AH_TREE, derived,
      f"leaves={derived.num_leaves} search={derived.num_leaves_to_search} "
      f"reorder={derived.reorder_num_neighbors} (derived)", "scann", repeats, tmp))
  for fraction in leaf_fractions:
    for reorder in reorders:
      to_search = max(1, min(derived.num_leaves, int(math.ceil(fraction * derived.num_leaves))))
      if (to_search, reorder) == (derived.num_leaves_to_search, derived.reorder_num_neighbors):
        continue
      config = dataclasses.replace(derived, num_leaves_to_search=to_search,
                                   reorder_num_neighbors=reorder)
      results.append(bench_ours(
          db, queries, truth, index_lib.AH_TREE, config,
          f"leaves={config.num_leaves} search={to_search} reorder={reorder}", "scann",
          repeats, tmp))
  if faiss is None:
    return results
  flat, build_s = build_faiss(lambda: faiss.IndexFlatIP(d), db)
  results.append(bench_faiss(faiss, flat, build_s, queries, truth, "IndexFlatIP", "exact",
                             repeats, threads))
  nlist = max(1, int(round(math.sqrt(n))))
  ivf, build_s = build_faiss(lambda: faiss.IndexIVFFlat(
      faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT), db)
  for nprobe in nprobes:
    if nprobe <= nlist:
      ivf.nprobe = nprobe
      results.append(bench_faiss(faiss, ivf, build_s, queries, truth, "IndexIVFFlat",
                                 f"nlist={nlist} nprobe={nprobe}", repeats, threads))
  hnsw_m = 32
  hnsw, build_s = build_faiss(
      lambda: faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT), db)
  for ef in efs:
    hnsw.hnsw.efSearch = ef
    results.append(bench_faiss(faiss, hnsw, build_s, queries, truth, "IndexHNSWFlat",
                               f"M={hnsw_m} efSearch={ef}", repeats, threads))
  return results


def print_table(results: List[Result], target_recall: float) -> None:
  """Prints one table (ratios vs brute force) and the matched-recall comparison."""
  header = (f"{'n':>7} {'method':<14} {'params':<38} {'build_s':>7} {'MiB':>6} "
            f"{'1q qps':>8} {'x BF':>6} {'batch qps':>10} {'x BF':>6} {'R@10':>6}")
  print(header)
  print("-" * len(header))
  by_n = {}
  for r in results:
    by_n.setdefault(r.n, []).append(r)
  for n, rs in by_n.items():
    bf = rs[0]
    for r in rs:
      print(f"{r.n:>7} {r.method:<14} {r.params:<38} {r.build_s:>7.2f} "
            f"{r.index_bytes / 2**20:>6.1f} {r.single_qps:>8.0f} "
            f"{r.single_qps / bf.single_qps:>6.1f} {r.batched_qps:>10.0f} "
            f"{r.batched_qps / bf.batched_qps:>6.1f} {r.recall:>6.3f}")
    print()
  print(f"Matched recall@{K} >= {target_recall}: fastest configuration per family "
        "(qps, and ratio ScaNN / FAISS)")
  for n, rs in by_n.items():
    for mode in ("single_qps", "batched_qps"):
      best = {}
      for r in rs:
        if r.recall >= target_recall and r.family != "brute_force" and not (
            r.family == "faiss" and r.method == "IndexFlatIP"):
          if r.family not in best or getattr(r, mode) > getattr(best[r.family], mode):
            best[r.family] = r
      bf = rs[0]
      line = [f"n={n:>6} {mode:<11} brute force {getattr(bf, mode):>8.0f}"]
      for family in ("scann", "faiss"):
        if family in best:
          b = best[family]
          line.append(f"{family} {getattr(b, mode):>8.0f} ({b.method} {b.params}; "
                      f"R@10={b.recall:.3f}; {getattr(b, mode) / getattr(bf, mode):.1f}x BF)")
        else:
          line.append(f"{family}: none reaches the target")
      if "scann" in best and "faiss" in best:
        line.append(f"scann/faiss = "
                    f"{getattr(best['scann'], mode) / getattr(best['faiss'], mode):.2f}")
      print(" | ".join(line))
  sizes = sorted(by_n)
  if len(sizes) > 1:
    small, large = sizes[0], sizes[-1]
    print(f"\nPer-query time growth from n={small} to n={large} ({large / small:.1f}x entities), "
          "single query:")
    for name, pick in (("brute force", lambda r: r.family == "brute_force"),
                       ("ScaNN AH (derived)", lambda r: r.method == "ah"),
                       ("ScaNN AH+tree (derived)",
                        lambda r: r.method == "ah_tree" and r.params.endswith("(derived)")),
                       ("FAISS IndexFlatIP", lambda r: r.method == "IndexFlatIP")):
      a = [r for r in by_n[small] if pick(r)]
      b = [r for r in by_n[large] if pick(r)]
      if a and b:
        print(f"  {name:<24} {1e6 / a[0].single_qps:>8.1f} us -> {1e6 / b[0].single_qps:>8.1f} us "
              f"({a[0].single_qps / b[0].single_qps:.1f}x)")


FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    import faiss  # pylint: disable=g-import-not-at-top
    if not FLAGS.faiss:
      faiss = None
  except ImportError:
    faiss = None
    print("faiss-cpu is not installed; FAISS rows are skipped (pip install faiss-cpu).")
  global _SET_BLAS_THREADS
  _SET_BLAS_THREADS = _numpy_blas_setter()
  if _SET_BLAS_THREADS is None:
    print("numpy's OpenBLAS thread setter not found; brute force uses its default threads.")
  threads = os.cpu_count() or 1
  start = time.perf_counter()
  x = load_glove(FLAGS.glove)
  rng = np.random.default_rng(FLAGS.seed)
  perm = rng.permutation(len(x))
  queries = np.ascontiguousarray(x[perm[:FLAGS.num_queries]])
  database = np.ascontiguousarray(x[np.sort(perm[FLAGS.num_queries:])])
  print(f"GloVe {FLAGS.glove}: {x.shape[0]} x {x.shape[1]} (loaded in "
        f"{time.perf_counter() - start:.1f} s); {len(queries)} held-out queries, database "
        f"{len(database)} rows; k={K}; {threads} cores.\n")
  results = []
  with tempfile.TemporaryDirectory() as tmp:
    for size in [int(s) for s in FLAGS.sizes.split(",")]:
      db = database[:min(size, len(database))]
      results += run_size(db, queries, FLAGS.repeats, tmp,
                          [float(f) for f in FLAGS.leaf_fractions.split(",")],
                          [int(r) for r in FLAGS.reorders.split(",")], faiss, threads,
                          [int(p) for p in FLAGS.nprobes.split(",")],
                          [int(e) for e in FLAGS.efs.split(",")])
  print_table(results, FLAGS.target_recall)


if __name__ == "__main__":
  flags.DEFINE_string("glove", DEFAULT_GLOVE, "GloVe vectors, gzip text.")
  flags.DEFINE_string("sizes", "10000,100000", "Database sizes (capped at the rows left).")
  flags.DEFINE_integer("num_queries", 1000, "Held-out query rows.", lower_bound=1)
  flags.DEFINE_integer("seed", 0, "Seed of the query/database split.")
  flags.DEFINE_integer("repeats", 5, "Timed passes per measurement (best is reported).",
                       lower_bound=1)
  flags.DEFINE_string("leaf_fractions", "0.05,0.1,0.2,0.3", "AH+tree leaves_to_search fractions.")
  flags.DEFINE_string("reorders", "100,200", "AH+tree reorder candidate counts.")
  flags.DEFINE_string("nprobes", "4,8,16,32,64", "FAISS IVF nprobe values.")
  flags.DEFINE_string("efs", "16,32,64,128", "FAISS HNSW efSearch values.")
  flags.DEFINE_bool("faiss", True, "Measure FAISS too (needs faiss-cpu).")
  flags.DEFINE_float("target_recall", 0.95, "Recall@10 for the matched-recall comparison.")
  entry.run(main, "python -m benchmarks.ann_benchmark")
