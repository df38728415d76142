"""Entity encoding, index building and search at the scale of all Wikipedia, side by side.

  python -m benchmarks.full_kb_benchmark --workspace WS [--kinds brute_force,ah,ah_tree] \
      [--encode_entities 500000] [--single_queries 1000] [--dataset jsonl:AIDA_TESTA ...]

On a workspace whose KB is all of English Wikipedia (README, "All of Wikipedia as the candidate
set": WS/extract, WS/export and WS/index/entity_encodings.npy present), in one run:
1. encoding: entities/s of the exported entity encoder (batches of 4,096, as
   export.encode_entities runs it) over the first `--encode_entities` entity records;
2. building: each index kind built from WS/index/entity_encodings.npy in a child process (as
   export.build_index does it, into a temporary directory): seconds, peak resident memory of
   that process (bytes, from wait4), and bytes on disk;
3. searching: WS/index's indexes (dense_entity.evaluation.tradeoff): ms per mention for single
   queries and batched, recall@1/@100 on the held-out mentions and each --dataset.
Every figure is printed beside brute force's, with the ratio. Times depend on the machine and
how busy it is: run on a quiet one.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from absl import flags
import numpy as np

from dense_entity.common import entry

FLAGS = flags.FLAGS

_BUILD = """
import json, sys, time
import numpy as np
from dense_entity.retrieval import index as index_lib
encodings_path, kind, fingerprint, out = sys.argv[1:5]
encodings = np.load(encodings_path, mmap_mode="r")
start = time.perf_counter()
index = index_lib.EntityIndex.build(encodings, kind, fingerprint, normalize_rows=False)
seconds = time.perf_counter() - start
manifest = index.save(out)
print(json.dumps({"build_seconds": seconds, "bytes": sum(manifest["files"].values()),
                  "effective_kind": index.effective_kind}))
"""


def encode_rate(export_dir: str, extract_dir: str, limit: int) -> dict:
  """Entities/s of the exported entity encoder on the first `limit` entity records."""
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
  files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  batches = []
  for batch in records.entity_dataset(files, 4096):
    batches.append({k: batch[k] for k in schema.ENTITY_FEATURES})
    if 4096 * len(batches) >= limit:
      break
  encoder(batches[0], batch_size=4096)  # warm-up (tracing, first allocation)
  start = time.perf_counter()
  n = 0
  for batch in batches:
    n += int(encoder(batch, batch_size=4096).shape[0])
  seconds = time.perf_counter() - start
  return {"entities": n, "seconds": seconds, "entities_per_second": n / seconds}


def build_in_child(encodings_path: str, kind: str, fingerprint: str) -> dict:
  """Builds one index kind in a child process; its time, peak RSS (bytes) and size."""
  out = tempfile.mkdtemp(prefix=f"full_kb_benchmark_{kind}_")
  try:
    proc = subprocess.Popen([sys.executable, "-c", _BUILD, encodings_path, kind, fingerprint,
                             os.path.join(out, kind)], stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    stdout = proc.stdout.read()
    if status != 0:
      raise RuntimeError(f"building {kind} failed (status {status})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024  # Linux reports KiB
    return result
  finally:
    shutil.rmtree(out, ignore_errors=True)


def _ratio(value, base):
  return float("nan") if not value else base / value


def main(argv):
  del argv
  from dense_entity.evaluation import tradeoff  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  ws = FLAGS.workspace
  export_dir, index_dir = os.path.join(ws, "export"), os.path.join(ws, "index")
  kinds = [k for k in FLAGS.kinds.split(",") if k]
  fingerprint = savedmodel.read_manifest(export_dir)["model_fingerprint"]
  encodings_path = os.path.join(index_dir, "entity_encodings.npy")
  n, dim = np.load(encodings_path, mmap_mode="r").shape

  rate = encode_rate(export_dir, os.path.join(ws, "extract"), FLAGS.encode_entities)
  print(f"encoding: {rate['entities']} entities in {rate['seconds']:.1f} s = "
        f"{rate['entities_per_second']:,.0f} entities/s (all {n:,}: "
        f"{n / rate['entities_per_second'] / 60:.1f} min)")
  builds = {}
  for kind in kinds:
    builds[kind] = build_in_child(encodings_path, kind, fingerprint)
    print(f"built {kind}: {builds[kind]}", flush=True)
  report = tradeoff.measure_tradeoff(ws, kinds, single_queries=FLAGS.single_queries,
                                     write=False, dataset_specs=FLAGS.dataset)
  base_search = report["indexes"].get("brute_force", {})
  print(f"\n{n:,} entities x {dim}; ratios are brute force / index (x: times faster)")
  print(f"{'index':<12}{'build s':>9}{'peak GB':>9}{'disk GB':>9}{'single ms':>11}{'x':>7}"
        f"{'batch ms':>10}{'x':>7}{'R@1':>7}{'R@100':>7}")
  for kind in kinds:
    b, s = builds[kind], report["indexes"][kind]
    print(f"{kind:<12}{b['build_seconds']:>9.1f}{b['peak_rss_bytes'] / 1e9:>9.2f}"
          f"{b['bytes'] / 1e9:>9.2f}{s['single_ms_per_mention']:>11.2f}"
          f"{_ratio(s['single_ms_per_mention'], base_search.get('single_ms_per_mention')):>7.1f}"
          f"{s['batched_ms_per_mention']:>10.3f}"
          f"{_ratio(s['batched_ms_per_mention'], base_search.get('batched_ms_per_mention')):>7.1f}"
          f"{s['recall@1']:>7.3f}{s['recall@100']:>7.3f}")
    for name, d in s.get("datasets", {}).items():
      print(f"{'':<12}{name}: R@1 {d['recall@1']:.3f}, R@100 {d['recall@100']:.3f} "
            f"({d['num_in_kb']} in-KB mentions)")
  print(json.dumps({"encode": rate, "build": builds, "search": report}, indent=1,
                   sort_keys=True, default=str))


if __name__ == "__main__":
  flags.DEFINE_string("workspace", None, "A full-KB workspace (extract, export, index).")
  flags.DEFINE_string("kinds", "brute_force,ah,ah_tree", "Index kinds, comma-separated.")
  flags.DEFINE_integer("encode_entities", 500_000, "Entities encoded for the rate.")
  flags.DEFINE_integer("single_queries", 1000, "Held-out mentions timed one at a time.")
  flags.DEFINE_multi_string("dataset", [], "FORMAT:PATH of a set whose recall is reported.")
  flags.mark_flags_as_required(["workspace"])
  entry.run(main, "python -m benchmarks.full_kb_benchmark")
