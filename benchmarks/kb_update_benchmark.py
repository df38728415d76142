"""ScaNN drift under KB updates: recall of an AH + tree index edited with upsert vs a fresh build.

`dense-entity kb add` (retrieval.kb_update) puts new rows into the trained ScaNN searcher:
they are quantized with the AH codebook and assigned to the tree leaves that were trained
without them. This measures, on a workspace's own entity encodings and mention queries, how
much recall that costs against a fresh build of the same rows, as the share of rows added
after training grows, side by side in one run:

- fresh: EntityIndex.build on all rows (what `dense-entity kb rebalance` / a rebuild gives);
- upserted (random): built on a random (1 - f) of the rows, the other f upserted;
- upserted (new topics): built without whole clusters of rows (k-means-like groups around
  random rows, the case of a new topic entering the KB), those rows upserted.

Queries: the workspace's held-out mentions encoded by its mention encoder (at most
--max_queries). Reported per setting: recall@10 and recall@100 of the index rows against exact
search (brute force over the same rows), the index's partition imbalance (ScaNN health
stats), and the seconds to build / upsert.

With --compare_index=DIR (an index directory built from scratch over the same KB, e.g. the
workspace's index before a sequence of updates that removed and re-added entities), instead:
recall of the workspace's updated indexes and of DIR's against exact search over the updated
KB (entity titles compared, so row order does not matter), and gold recall@1/@100 on the
held-out mentions (of --extract_dir), one index in memory at a time.

Usage (from the repository root):
  python -m benchmarks.kb_update_benchmark --workspace=WS [--fractions=0.01,0.1,0.25,0.5]
  python -m benchmarks.kb_update_benchmark --workspace=WS --compare_index=DIR \
      [--extract_dir=WS/extract] [--kinds=ah_tree]
"""

import os
import time

from absl import flags
import numpy as np

from benchmarks.ann_benchmark import recall_at_k
from dense_entity.common import entry

FLAGS = flags.FLAGS


def _clusters(x: np.ndarray, fraction: float, rng) -> np.ndarray:
  """Rows of whole groups (nearest of 50 random rows) adding up to about `fraction` of x."""
  centres = x[rng.choice(len(x), 50, replace=False)]
  group = np.argmax(x @ centres.T, axis=1)
  picked = []
  for g in rng.permutation(50):
    if len(picked) >= fraction * len(x):
      break
    picked.extend(np.flatnonzero(group == g).tolist())
  return np.asarray(sorted(picked))


def compare(ws: str, other: str, extract_dir: str, kinds, max_queries: int) -> None:
  """Recall of WS's updated indexes and of `other` (a fresh build of the same KB)."""
  import gc  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import metrics  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import titles as titles_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index_builder  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import kb_versions  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  index_dir = kb_versions.resolve_index_dir(os.path.join(ws, "index"))
  # Golds scored as evaluation scores them: through the KB's matching key and redirects.
  redirects = baselines.load_redirects(
      kb_versions.kb_file(index_dir, schema.REDIRECTS_FILE, extract_dir))
  mentions = evaluator.read_heldout_mentions(extract_dir, max_queries)
  gold = [m[schema.ENTITY_TITLE] for m in mentions]
  encoder = savedmodel.load_encoder(os.path.join(ws, "export", savedmodel.MENTION_ENCODER_DIR))
  q = encoder({n: [m[n] for m in mentions] for n in schema.MENTION_FEATURES})
  del encoder
  manifest = kb_versions.read_manifest(index_dir) or {}
  print(f"{index_dir} (KB version {manifest.get('kb_version', 0)}) vs {other}: {len(q)} "
        "held-out mentions")
  print(f"{'index':<40} {'R@10 vs exact':>13} {'R@100 vs exact':>14} {'gold R@1':>8} "
        f"{'gold R@100':>10} {'search s':>8}")
  exact = None
  for name, directory, kind in ([("exact (updated brute force)", index_dir, "brute_force")]
                                + [(f"updated {k}", index_dir, k) for k in kinds]
                                + [(f"fresh build {k}", other, k) for k in kinds]):
    titles = index_builder.read_titles(os.path.join(directory, index_lib.TITLES_FILENAME))
    index = index_lib.load_index(directory, kind)
    t0 = time.perf_counter()
    ids = index.search(q, 100)[0]
    seconds = time.perf_counter() - t0
    found = np.asarray([[titles[i] for i in row] for row in ids], dtype=object)
    del index, titles
    gc.collect()
    if exact is None:
      exact = found
    r10, r100 = recall_at_k(found[:, :10], exact[:, :10]), recall_at_k(found, exact)
    kb = set(index_builder.read_titles(os.path.join(directory, index_lib.TITLES_FILENAME)))
    scores = metrics.score_rankings(found.tolist(), gold, kb,
                                    titles_lib.TitleResolver(kb, redirects), (1, 100))
    g1, g100 = scores["recall@1"], scores["recall@100"]
    print(f"{name:<40} {r10:>13.3f} {r100:>14.3f} {g1:>8.3f} {g100:>10.3f} {seconds:>8.1f}",
          flush=True)


def main(argv):
  del argv
  if FLAGS.compare_index:
    compare(FLAGS.workspace, FLAGS.compare_index,
            FLAGS.extract_dir or os.path.join(FLAGS.workspace, "extract"),
            [k for k in FLAGS.kinds.split(",") if k], FLAGS.max_queries)
    return
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import kb_versions  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  ws = FLAGS.workspace
  index_dir = kb_versions.resolve_index_dir(os.path.join(ws, "index"))
  x = np.load(os.path.join(index_dir, "brute_force", index_lib.BRUTE_FORCE_FILENAME))
  x = np.ascontiguousarray(x, np.float32)
  mentions = evaluator.read_heldout_mentions(os.path.join(ws, "extract"), FLAGS.max_queries)
  encoder = savedmodel.load_encoder(os.path.join(ws, "export", savedmodel.MENTION_ENCODER_DIR))
  q = encoder({n: [m[n] for m in mentions] for n in schema.MENTION_FEATURES})
  q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
  n, d = x.shape
  exact = np.argsort(-(q @ x.T), axis=1)[:, :100]
  print(f"{ws}: {n} rows x {d}, {len(q)} held-out mention queries; recall against exact search")
  print(f"{'setting':<28} {'f':>5} {'R@10':>6} {'R@100':>6} {'imbalance':>9} {'build s':>8} "
        f"{'upsert s':>8}")
  rng = np.random.default_rng(FLAGS.seed)

  def measure(name, fraction, rows_built, rows_upserted):
    t0 = time.perf_counter()
    config = index_lib.derive_config(len(rows_built), d)
    index = index_lib.EntityIndex.build(x[rows_built], index_lib.AH_TREE, "bench", config,
                                        normalize_rows=False)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if len(rows_upserted):
      index.searcher.searcher.upsert([None] * len(rows_upserted), x[rows_upserted], 256)
      index.num_entities = n
    upsert_s = time.perf_counter() - t0
    order = np.concatenate([rows_built, rows_upserted]).astype(np.int64)
    ids = order[index.search(q, 100)[0]]
    stats = index.searcher.searcher.get_health_stats()
    print(f"{name:<28} {fraction:>5.2f} {recall_at_k(ids[:, :10], exact[:, :10]):>6.3f} "
          f"{recall_at_k(ids, exact):>6.3f} "
          f"{stats.get('partition_weighted_avg_relative_imbalance', float('nan')):>9.3f} "
          f"{build_s:>8.1f} {upsert_s:>8.2f}", flush=True)

  measure("fresh build", 0.0, np.arange(n), np.zeros(0, np.int64))
  for fraction in [float(f) for f in FLAGS.fractions.split(",")]:
    new = rng.choice(n, int(fraction * n), replace=False)
    measure("upserted (random)", fraction, np.setdiff1d(np.arange(n), new), np.sort(new))
    new = _clusters(x, fraction, rng)
    measure("upserted (new topics)", len(new) / n, np.setdiff1d(np.arange(n), new), new)


if __name__ == "__main__":
  flags.DEFINE_string("workspace", None, "Workspace with export/, extract/ and a brute_force "
                      "index.", required=True)
  flags.DEFINE_string("fractions", "0.01,0.1,0.25,0.5", "Shares of rows upserted after the "
                      "index was trained.")
  flags.DEFINE_integer("max_queries", 2000, "Held-out mentions used as queries (0: all).")
  flags.DEFINE_integer("seed", 0, "Seed of the row choices.")
  flags.DEFINE_string("compare_index", None, "An index directory built from scratch over the "
                      "same KB: compare the workspace's updated indexes with it.")
  flags.DEFINE_string("extract_dir", None, "Held-out mentions for --compare_index; default "
                      "WS/extract.")
  flags.DEFINE_string("kinds", "ah_tree", "ScaNN index kinds compared (--compare_index).")
  entry.run(main, "python -m benchmarks.kb_update_benchmark")
