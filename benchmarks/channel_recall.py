"""Recall@1 of each part of DEER's encodings alone, and of other mixing weights, over a built KB.

With lexical channels (models.DualEncoder: `context_match_dim`, `name_match_dim`; not in the
paper) an encoding is `[sqrt(w_d) * learned | sqrt(w_c) * context | sqrt(w_n) * name]`
(layers.combine_channels), so a mention-entity score is `w_d * cos(learned) + w_c *
cos(context) + w_n * cos(name)` and each channel can rank the KB alone. This scans the
workspace's brute-force encodings once (exact, block by block, float16 rows read from the
memory map) and reports, for held-out anchors and each `--dataset` (in-KB mentions only):

- recall@1 of the full encoding, of the learned part alone, of the context channel alone and
  of the name channel alone;
- with `--weights`, recall@1 of the same stored encodings scored with other mixing weights
  (each channel's cosine re-weighted at search time; the towers were trained with the
  config's weights, so this measures the mix, not a retrained model);
- held-out anchors split by link source and by whether the gold is a training gold.

An entity's score is that of its best row (name rows, index.NameRowsIndex).

Usage (from the repository root):
  python -m benchmarks.channel_recall --workspace=WS [--max_heldout=1000] \
      [--dataset=jsonl:aida_testa.jsonl ...] [--max_dataset_mentions=1000] \
      [--weights=0.4/0.25/0.35,0.3/0.2/0.5]
"""

import collections
import json
import os
import random
import time

from absl import flags
import numpy as np

from dense_entity.common import entry

FLAGS = flags.FLAGS

CHANNELS = ("full", "learned", "context", "name")


def parse_weights(value: str):
  """'0.4/0.25/0.35,...' -> [(learned, context, name), ...], each summing to 1.

  Raises:
    ValueError: a setting without 3 numbers, a negative weight, or a sum other than 1.
  """
  settings = []
  for item in filter(None, (v.strip() for v in value.split(","))):
    parts = item.split("/")
    if len(parts) != 3:
      raise ValueError(f"--weights: {item!r} is not learned/context/name")
    w = tuple(float(p) for p in parts)
    if min(w) < 0 or abs(sum(w) - 1.0) > 1e-6:
      raise ValueError(f"--weights: {item!r} must be 3 weights >= 0 summing to 1")
    settings.append(w)
  return settings


def channel_scores(queries: np.ndarray, block: np.ndarray, slices) -> list:
  """[learned, context, name] cosines `[queries, rows]` of `block` rows (float32)."""
  return [queries[:, s] @ block[:, s].T for s in slices]


def scan(queries: np.ndarray, encodings, slices, weights, trained, block_rows=None):
  """Best row per query for each scoring: the 4 CHANNELS, then each `weights` setting.

  Args:
    queries: float32 `[q, d]` mention encodings.
    encodings: `[rows, d]` entity row encodings (a memory map is read block by block).
    slices: (learned, context, name) column slices; an empty slice scores 0.
    weights: [(w_learned, w_context, w_name)] settings to score with.
    trained: the config's (w_learned, w_context, w_name), which the encodings carry.
    block_rows: rows per block; by default as many as keep one score matrix at 2^24 floats
      (64 MB; with 3,000 queries a 300k-row block would be 3.6 GB per channel).

  Returns:
    int64 `[scorings, q]` best row ids.
  """
  n = len(CHANNELS) + len(weights)
  block_rows = block_rows or max(1024, (1 << 24) // max(len(queries), 1))
  best = np.full((n, len(queries)), -np.inf, np.float32)
  rows = np.zeros((n, len(queries)), np.int64)
  for start in range(0, encodings.shape[0], block_rows):
    block = np.asarray(encodings[start:start + block_rows], np.float32)
    parts = channel_scores(queries, block, slices)
    scorings = [sum(parts)] + parts
    for w in weights:
      scorings.append(sum(p * (wi / ti if ti else 0.0) for p, wi, ti in zip(parts, w, trained)))
    for j, scores in enumerate(scorings):
      top = scores.argmax(1)
      value = scores[np.arange(len(queries)), top]
      better = value > best[j]
      best[j, better] = value[better]
      rows[j, better] = top[better] + start
  return rows


def main(argv):
  del argv
  from dense_entity.common.workspace import Workspace  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import datasets as datasets_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import metrics  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import titles as titles_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index_builder  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import kb_versions  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  weights = parse_weights(FLAGS.weights)
  ws = Workspace(FLAGS.workspace)
  with open(os.path.join(ws.model, "config.json"), encoding="utf-8") as f:
    model = json.load(f)["model"]
  # What DEER's evaluation reads, without loading an index (the scan reads the rows itself).
  index_dir = kb_versions.resolve_index_dir(ws.index)
  titles = index_builder.read_titles(os.path.join(index_dir, index_lib.TITLES_FILENAME))
  kb_titles = set(titles)
  redirects = baselines.load_redirects(
      kb_versions.kb_file(index_dir, schema.REDIRECTS_FILE, ws.extract))
  resolver = titles_lib.TitleResolver(kb_titles, redirects)
  encode = savedmodel.load_encoder(os.path.join(ws.export, savedmodel.MENTION_ENCODER_DIR))
  resolve = lambda title: metrics.resolve_title(title, resolver)
  # name -> [(features, gold, group labels)]
  sets = collections.OrderedDict()
  seen = evaluator.training_entities(ws.extract, resolver)
  heldout = evaluator.read_heldout_mentions(ws.extract, FLAGS.max_heldout)
  sets["heldout"] = [({n: m[n] for n in schema.MENTION_FEATURES}, resolve(m[schema.ENTITY_TITLE]),
                      (m.get(schema.LINK_SOURCE) or "no source",
                       "gold seen" if resolve(m[schema.ENTITY_TITLE]) in seen else "gold unseen"))
                     for m in heldout]
  for spec in FLAGS.dataset:
    mentions = datasets_lib.load(spec)
    rows = [(f, resolve(m.gold), ()) for f, m in zip(datasets_lib.all_features(mentions), mentions)]
    rows = [r for r in rows if r[1] in kb_titles]
    if len(rows) > FLAGS.max_dataset_mentions:
      rows = random.Random(0).sample(rows, FLAGS.max_dataset_mentions)
    sets[datasets_lib.name_of(spec)] = rows
  for name in sets:
    sets[name] = [r for r in sets[name] if r[1] in kb_titles]
  features = [r[0] for rows in sets.values() for r in rows]
  queries = np.concatenate([
      np.asarray(encode({n: [f[n] for f in features[i:i + 512]] for n in schema.MENTION_FEATURES}),
                 np.float32) for i in range(0, len(features), 512)])
  encodings = np.load(os.path.join(index_dir, index_lib.BRUTE_FORCE,
                                   index_lib.BRUTE_FORCE_FILENAME), mmap_mode="r")
  row_entities_path = os.path.join(index_dir, index_lib.ROW_ENTITIES_FILENAME)
  row_entities = (np.load(row_entities_path) if os.path.exists(row_entities_path)
                  else np.arange(encodings.shape[0]))
  d, cm, nm = encodings.shape[1], model.get("context_match_dim", 0), model.get("name_match_dim", 0)
  learned = d - cm - nm
  wc = model.get("context_match_weight", 0.0) if cm else 0.0
  wn = model.get("name_match_weight", 0.0) if nm else 0.0
  trained = (1.0 - wc - wn, wc, wn)
  slices = (slice(0, learned), slice(learned, learned + cm), slice(learned + cm, d))
  t0 = time.time()
  best = scan(queries, encodings, slices, weights, trained)
  print(f"{len(queries)} mentions x {encodings.shape[0]} rows scanned in {time.time() - t0:.0f} s; "
        f"trained weights learned/context/name {trained[0]:.2f}/{trained[1]:.2f}/{trained[2]:.2f}")
  names = list(CHANNELS) + ["/".join(f"{x:g}" for x in w) for w in weights]
  print("| set | mentions | " + " | ".join(names) + " |")
  print("|---|---|" + "---|" * len(names))
  offset = 0
  for set_name, rows in sets.items():
    groups = collections.defaultdict(list)
    for i, (_, gold, labels) in enumerate(rows):
      for label in ("all",) + tuple(labels):
        groups[label].append((offset + i, gold))
    for label, members in groups.items():
      cells = [f"{np.mean([titles[row_entities[best[j, i]]] == g for i, g in members]):.3f}"
               for j in range(len(names))]
      print(f"| {set_name} {label if label != 'all' else ''} | {len(members)} | "
            + " | ".join(cells) + " |")
    offset += len(rows)


if __name__ == "__main__":
  flags.DEFINE_string("workspace", None, "A built workspace (WORKSPACE.md) with a brute_force "
                      "index.")
  flags.DEFINE_integer("max_heldout", 1000, "Held-out mentions (the evaluator's fixed uniform "
                       "sample; 0: all).", lower_bound=0)
  flags.DEFINE_multi_string("dataset", [], "FORMAT:PATH of an evaluation set, as evaluate's "
                            "--dataset; repeatable.")
  flags.DEFINE_integer("max_dataset_mentions", 1000, "At most this many mentions of each "
                       "dataset (a seeded uniform sample).", lower_bound=1)
  flags.DEFINE_string("weights", "", "Comma-separated learned/context/name mixing weights to "
                      "score the stored encodings with (e.g. 0.4/0.25/0.35).")
  flags.mark_flags_as_required(["workspace"])
  entry.run(main, "python -m benchmarks.channel_recall")
