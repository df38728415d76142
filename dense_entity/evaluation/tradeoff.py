"""Speed / recall / size trade-off of the entity indexes on a workspace (paper Table 3).

Gillick et al. (2019), section 5.2, Table 3: brute-force search against ScaNN asymmetric
hashing (AH) and AH + tree, by search time per mention and recall. Here, for every index kind
found in WS/index (brute_force, ah, ah_tree):
- search time per mention in milliseconds, for single queries (one mention at a time, the
  first `single_queries` held-out mentions, mean after one warm-up query) and batched (all
  held-out mentions in one call, best of `repeats`, divided by the number of mentions);
- recall@1, @10 and @100 on the held-out mentions (in-KB recall; gold and predicted titles
  normalized and redirect-resolved by `dense_entity.evaluation.metrics.score_rankings` against
  the KB titles and WS/extract/redirects.tsv), as in WS/reports/eval.json;
- agreement with exact search: the fraction of the exact top-10 (brute force over the same
  encodings) that the index returns in its top-10;
- index size on disk in bytes (the files listed in its index_manifest.json).
Mentions are encoded once (mention encoding time is reported apart) and every index searches
the same query encodings with k = `k` (default 100). Timings depend on the machine and its
threads (BLAS for brute force, ScaNN's thread pool for batched ScaNN search); the report
records the CPU count and the BLAS thread variables. On few, busy cores a multi-threaded BLAS
matrix-vector product can be many times slower than a single-threaded one (measured: 8 ms vs
0.2 ms for 17k x 64 on 2 busy cores), so compare single-query brute force also with
OPENBLAS_NUM_THREADS=1.

Usage:
  python -m export.tradeoff --workspace=WS [--max_mentions=0] [--single_queries=1000]
  dense-entity tradeoff --workspace WS

Writes WS/reports/tradeoff.json (atomically):
  {"num_mentions", "num_in_kb", "num_entities", "num_rows" (index rows: entities and name
   rows), "k", "model_fingerprint", "cpu_count",
   "thread_env",
   "encode_ms_per_mention", "indexes": {kind: {"effective_kind", "fallback_reason",
   "single_ms_per_mention", "single_queries", "batched_ms_per_mention", "recall@1",
   "recall@10", "recall@100", "exact_agreement@10", "index_bytes", "parameters"}}}
"""

import dataclasses
import json
import os
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from dense_entity.common.workspace import Workspace
from dense_entity.evaluation import datasets as datasets_lib
from dense_entity.evaluation import evaluator
from dense_entity.evaluation import metrics
from dense_entity.kb import schema
from dense_entity.kb import titles as titles_lib

REPORT_FILE = os.path.join("reports", "tradeoff.json")
KS = (1, 10, 100)
DEFAULT_KINDS = ("brute_force", "ah", "ah_tree")
# Environment variables that set the BLAS threads of brute-force search, recorded in the report.
_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _index_bytes(index_dir: str) -> int:
  """Bytes on disk of the files an index manifest lists."""
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  with open(os.path.join(index_dir, index_lib.MANIFEST_FILENAME), encoding="utf-8") as f:
    return int(sum(json.load(f)["files"].values()))


def _single_query_ms(index, queries: np.ndarray, k: int) -> float:
  """Mean milliseconds of `index.search(query [d], k)` over the rows of `queries`."""
  index.search(queries[0], k)  # Warm-up (first-call allocations, thread start).
  start = time.perf_counter()
  for q in queries:
    index.search(q, k)
  return (time.perf_counter() - start) * 1e3 / len(queries)


def _batched_ms(index, queries: np.ndarray, k: int, repeats: int):
  """(best milliseconds per query over `repeats` batched calls, the last call's ids)."""
  index.search(queries[:1], k)  # Warm-up.
  best, ids = float("inf"), None
  for _ in range(repeats):
    start = time.perf_counter()
    ids, _ = index.search(queries, k)
    best = min(best, time.perf_counter() - start)
  return best * 1e3 / len(queries), ids


def measure_tradeoff(root: str, kinds: Sequence[str] = DEFAULT_KINDS, k: int = 100,
                     max_mentions: int = 0, single_queries: int = 1000,
                     repeats: int = 3, write: bool = True,
                     dataset_specs: Sequence[str] = ()) -> Dict:
  """Measures time, recall and size of each index of a workspace (paper Table 3).

  Args:
    root: workspace root (WORKSPACE.md): export/, index/, extract/ (held-out mentions,
      redirects.tsv).
    kinds: index kinds to measure; each must exist under WS/index.
    k: neighbours per search (>= 100 so that recall@100 is defined; smaller k is allowed and
      then recall@100 counts only the k returned).
    max_mentions: measure on at most this many held-out mentions (0: all).
    single_queries: mentions searched one at a time for the single-query timing (0: all).
    repeats: batched searches timed; the fastest counts.
    write: write WS/reports/tradeoff.json.
    dataset_specs: evaluation sets (FORMAT:PATH, as `dense_entity.evaluate --dataset`) whose
      in-KB recall@k each index also reports, under "datasets" (their mentions are searched in
      one batch; the timings are the held-out mentions').

  Returns:
    The report (see the module docstring). Times in milliseconds, sizes in bytes, recalls in
    [0, 1].

  Raises:
    FileNotFoundError: a missing stage output or index (the message names it).
    ValueError: no held-out mentions, an index of another model, or bad arguments.
  """
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  if not kinds:
    raise ValueError("no index kinds given")
  unknown = [kind for kind in kinds if kind not in index_lib.KINDS]
  if unknown:
    raise ValueError(f"unknown index kinds {unknown}; expected some of {index_lib.KINDS}")
  if k < 1 or repeats < 1 or single_queries < 0 or max_mentions < 0:
    raise ValueError("k and repeats must be >= 1, single_queries and max_mentions >= 0")

  ws = Workspace(root)
  # The first kind's retriever gives the mention encoder, titles and fingerprint checks.
  base = retriever_lib.EntityRetriever.load(root, kinds[0])
  mentions = evaluator.read_heldout_mentions(ws.extract, max_mentions)
  if not mentions:
    raise ValueError(f"{ws.extract}: no held-out mentions to measure recall on")
  gold = [m[schema.ENTITY_TITLE] for m in mentions]
  redirects = baselines.load_redirects(os.path.join(ws.extract, schema.REDIRECTS_FILE))
  kb_titles = set(base.titles)
  resolver = titles_lib.TitleResolver(kb_titles, redirects)
  datasets = {}
  for spec in dataset_specs:
    loaded = datasets_lib.load(spec)
    datasets[datasets_lib.name_of(spec)] = (base.encode(datasets_lib.all_features(loaded)),
                                            [m.gold for m in loaded])

  start = time.perf_counter()
  queries = base.encode(mentions)
  encode_ms = (time.perf_counter() - start) * 1e3 / len(mentions)
  num_single = min(len(mentions), single_queries or len(mentions))

  # Exact search for the agreement column, when brute force is not among the kinds measured.
  exact_dir = os.path.join(ws.index, index_lib.BRUTE_FORCE)
  exact = None
  if index_lib.BRUTE_FORCE not in kinds and os.path.isdir(exact_dir):
    exact = index_lib.load_index(ws.index, index_lib.BRUTE_FORCE,
                                 expected_model_fingerprint=base.model_fingerprint)
  report = {"num_mentions": len(mentions), "num_entities": base.num_entities,
            "num_rows": getattr(base.index, "num_rows", base.num_entities), "k": k,
            "model_fingerprint": base.model_fingerprint, "cpu_count": os.cpu_count(),
            "thread_env": {name: os.environ.get(name) for name in _THREAD_ENV},
            "encode_ms_per_mention": encode_ms, "indexes": {}}
  exact_top10: Optional[np.ndarray] = None
  if exact is not None:
    exact_top10 = exact.search(queries, 10)[0]
  for kind in kinds:
    index_dir = os.path.join(ws.index, kind)
    index = base.index if kind == kinds[0] else index_lib.load_index(
        ws.index, kind, expected_model_fingerprint=base.model_fingerprint,
        expected_dim=base.index.dim)
    single_ms = _single_query_ms(index, queries[:num_single], k)
    batched_ms, ids = _batched_ms(index, queries, k, repeats)
    if kind == index_lib.BRUTE_FORCE:
      exact_top10 = ids[:, :10]
    rankings: List[List[str]] = [[base.titles[i] for i in row] for row in ids.tolist()]
    scored = metrics.score_rankings(rankings, gold, kb_titles, resolver, KS)
    per_dataset = {}
    for name, (dataset_queries, dataset_gold) in datasets.items():
      found = index.search(dataset_queries, k)[0] if len(dataset_queries) else []
      per_dataset[name] = metrics.score_rankings(
          [[base.titles[i] for i in row] for row in np.asarray(found).tolist()],
          dataset_gold, kb_titles, resolver, KS)
    report["num_in_kb"] = scored["num_in_kb"]
    report["indexes"][kind] = {
        "effective_kind": index.effective_kind,
        "fallback_reason": index.fallback_reason,
        "single_ms_per_mention": single_ms,
        "single_queries": num_single,
        "batched_ms_per_mention": batched_ms,
        **{f"recall@{kk}": scored[f"recall@{kk}"] for kk in KS},
        "datasets": {name: {key: value for key, value in d.items()
                            if key.startswith("recall@") or key == "num_in_kb"}
                     for name, d in per_dataset.items()},
        "_top10": ids[:, :10],
        "index_bytes": _index_bytes(index_dir),
        "parameters": {} if index.effective_kind == index_lib.BRUTE_FORCE else
                      dataclasses.asdict(index.config),
    }
  for entry in report["indexes"].values():
    top10 = entry.pop("_top10")
    entry["exact_agreement@10"] = None
    if exact_top10 is not None:
      agree = [len(set(a) & set(b)) / len(b) for a, b in zip(top10.tolist(),
                                                            exact_top10.tolist())]
      entry["exact_agreement@10"] = float(np.mean(agree))
  brute = report["indexes"].get(index_lib.BRUTE_FORCE)
  if brute:
    for entry in report["indexes"].values():
      entry["single_speedup_vs_brute_force"] = (brute["single_ms_per_mention"]
                                                / entry["single_ms_per_mention"])
      entry["batched_speedup_vs_brute_force"] = (brute["batched_ms_per_mention"]
                                                 / entry["batched_ms_per_mention"])
  if write:
    os.makedirs(ws.reports, exist_ok=True)
    path = os.path.join(root, REPORT_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump(report, f, indent=2, sort_keys=True)
      f.write("\n")
    os.replace(path + ".tmp", path)
  return report


def _fmt(value: Optional[float], spec: str) -> str:
  return format(float("nan") if value is None else value, spec)


def format_table(report: Dict) -> str:
  """The paper's Table 3 layout: one row per index, time per mention, recall, size."""
  lines = [f"{report['num_mentions']} held-out mentions ({report['num_in_kb']} with gold in the "
           f"KB), {report['num_entities']} entities, k={report['k']}, {report['cpu_count']} CPUs;"
           f" mention encoding {report['encode_ms_per_mention']:.3f} ms/mention (batched)",
           f"{'index':<12}{'built as':<13}{'single ms':>10}{'batch ms':>10}{'x single':>9}"
           f"{'x batch':>9}{'R@1':>7}{'R@100':>7}{'top10=':>8}{'bytes':>11}"]
  for kind, e in report["indexes"].items():
    lines.append(
        f"{kind:<12}{e['effective_kind']:<13}{e['single_ms_per_mention']:>10.3f}"
        f"{e['batched_ms_per_mention']:>10.4f}"
        f"{_fmt(e.get('single_speedup_vs_brute_force'), '>9.1f')}"
        f"{_fmt(e.get('batched_speedup_vs_brute_force'), '>9.1f')}"
        f"{e['recall@1']:>7.3f}{e['recall@100']:>7.3f}"
        f"{_fmt(e['exact_agreement@10'], '>8.3f')}"
        f"{e['index_bytes']:>11}")
  names = list(next(iter(report["indexes"].values())).get("datasets", {}))
  if names:
    lines.append(f"{'index':<12}" + "".join(f"{n[:18] + ' R@1/R@100':>30}" for n in names))
    for kind, e in report["indexes"].items():
      lines.append(f"{kind:<12}" + "".join(
          f"{e['datasets'][n]['recall@1']:>23.3f}/{e['datasets'][n]['recall@100']:.3f}"
          for n in names))
  lines.append("single/batch ms: search time per mention; x: speed-up over brute force; "
               "top10=: share of the exact top-10 returned; R@k: in-KB recall.")
  return "\n".join(lines)
