"""What a hard negative mining round found: its pairs split by how the gold ranked and what the
negatives are (paper section 4.3; issue 13, item 4: is the round label noise?).

For each pair record of a round (beam_pipelines.mine_hard_negatives output) it reads the gold
entity's rank when mined (schema.GOLD_RANK: 0-9, or k when the gold was not among the k
searched) and sorts the pairs, per group of gold rank (found: < k; not found: k), into:

- span = negative: the mention span equals the negative's title (folded as
  kb.titles.fold_text): a namesake of the span, the hard negative the paper means;
- negative anchored by span: training anchors with this span text link to the negative
  (alias_counts.tsv), so the span is ambiguous between the negative and the gold;
- gold words in negative / negative words in gold: one title's words all occur in the other
  ('Farsi' / 'Farsi district'): a near-namesake, often a related entity;
- title-only negative: the negative entity has no text (a title-list entry: most of the KB);
- span = gold: the mention span equals its gold title (the model missed an exact name).

Pairs are counted, and mentions (a mention contributes its pairs to one group).

A second table splits the pairs by whether the negative has a description and counts how
often each negative is itself the gold of training anchors (alias_counts.tsv, every link
source): the logistic task pushes a negative that many anchors link to ('United States') away
from mined mentions, beside all the mentions that name it (`train
--hard_negatives_max_negative_golds` leaves such pairs out). Then the negatives in the most
pairs, with their training anchor counts.

Usage (from the repository root):
  python -m benchmarks.mining_pairs --negatives_dir=WS/negatives/round_1 \
      --extract_dir=WS/extract
"""

import collections
import os

from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS


def _words(text: str) -> set:
  from dense_entity.kb import titles  # pylint: disable=g-import-not-at-top
  return set(titles.fold_text(text).replace("(", " ").replace(")", " ").replace(",", " ")
             .split())


def _alias_rows(extract_dir: str):
  """Yields (folded anchor text, folded entity title, count) of alias_counts.tsv (training
  anchors)."""
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import titles  # pylint: disable=g-import-not-at-top
  with open(os.path.join(extract_dir, schema.ALIAS_COUNTS_FILE), encoding="utf-8") as f:
    for line in f:
      parts = line.rstrip("\n").split("\t")
      if len(parts) == 3:
        yield titles.fold_text(parts[0]), titles.fold_text(parts[1]), int(parts[2])


def read_gold_counts(extract_dir: str) -> collections.Counter:
  """{folded entity title: training anchors linking to it} from alias_counts.tsv."""
  counts = collections.Counter()
  for _, entity, n in _alias_rows(extract_dir):
    counts[entity] += n
  return counts


def negative_gold_frequencies(pairs, gold_counts: collections.Counter) -> dict:
  """Per kind of negative ("described", "title-only"): {"pairs", "distinct negatives",
  "negative is a training gold" (share of pairs), "mean anchors", "median anchors" (training
  anchors linking to the pair's negative), "negative has >= 100 anchors" (share of pairs),
  "top": [(negative title, pairs, anchors)] of the 10 negatives in most pairs}."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import titles  # pylint: disable=g-import-not-at-top
  anchors = {"described": [], "title-only": []}
  per_negative = {kind: collections.Counter() for kind in anchors}
  for _, _, _, negative, text, _ in pairs:
    kind = "described" if text else "title-only"
    anchors[kind].append(gold_counts.get(titles.fold_text(negative), 0))
    per_negative[kind][negative] += 1
  out = {}
  for kind, values in anchors.items():
    a = np.asarray(values, np.int64)
    out[kind] = {
        "pairs": len(a), "distinct negatives": len(per_negative[kind]),
        "negative is a training gold": float((a > 0).mean()) if len(a) else 0.0,
        "mean anchors": float(a.mean()) if len(a) else 0.0,
        "median anchors": float(np.median(a)) if len(a) else 0.0,
        "negative has >= 100 anchors": float((a >= 100).mean()) if len(a) else 0.0,
        "top": [(t, n, gold_counts.get(titles.fold_text(t), 0))
                for t, n in per_negative[kind].most_common(10)]}
  return out


def read_anchor_targets(extract_dir: str) -> dict:
  """{folded anchor text: set of folded entity titles} from alias_counts.tsv (training
  anchors)."""
  targets = collections.defaultdict(set)
  for alias, entity, _ in _alias_rows(extract_dir):
    targets[alias].add(entity)
  return targets


def pair_groups(pairs, anchor_targets: dict, k: int) -> dict:
  """Counts of `pairs` ((span, gold, negative, negative text, gold rank) tuples) per group:
  {"found" | "not found": {"pairs": n, "mentions": m, <property>: pairs with it}}."""
  from dense_entity.kb import titles  # pylint: disable=g-import-not-at-top
  groups = {g: collections.Counter() for g in ("found", "not found")}
  mentions = {g: set() for g in groups}
  for mention_id, span, gold, negative, text, rank in pairs:
    group = "found" if rank < k else "not found"
    counts = groups[group]
    mentions[group].add(mention_id)
    counts["pairs"] += 1
    f_span, f_gold, f_neg = titles.fold_text(span), titles.fold_text(gold), titles.fold_text(
        negative)
    counts["span = negative"] += f_span == f_neg
    counts["negative anchored by span"] += f_neg in anchor_targets.get(f_span, ())
    w_gold, w_neg = _words(gold), _words(negative)
    counts["gold words in negative"] += bool(w_gold) and w_gold <= w_neg
    counts["negative words in gold"] += bool(w_neg) and w_neg <= w_gold
    counts["title-only negative"] += not text
    counts["span = gold"] += f_span == f_gold
  for group, counts in groups.items():
    counts["mentions"] = len(mentions[group])
  return {g: dict(c) for g, c in groups.items()}


def read_pairs(negatives_dir: str):
  """Yields (mention id, span, gold, negative title, negative text, gold rank) of a round;
  gold rank -1 when the pairs were mined before it was recorded."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  files, _ = records.mining_round_files(negatives_dir, "--negatives_dir")
  for record in tf.data.TFRecordDataset(files):
    f = tf.train.Example.FromString(record.numpy()).features.feature
    text = lambda name: (f[name].bytes_list.value or [b""])[0].decode("utf-8")
    rank = f[schema.GOLD_RANK].int64_list.value[0] if schema.GOLD_RANK in f else -1
    yield (text(schema.MENTION_ID), text(schema.MENTION_SPAN), text(schema.GOLD_ENTITY),
           text(schema.ENTITY_TITLE), text(schema.ENTITY_TEXT), rank)


def main(argv):
  del argv
  import json  # pylint: disable=g-import-not-at-top
  with open(os.path.join(FLAGS.negatives_dir, "MANIFEST.json"), encoding="utf-8") as f:
    k = json.load(f)["k"]
  pairs = list(read_pairs(FLAGS.negatives_dir))
  groups = pair_groups(pairs, read_anchor_targets(FLAGS.extract_dir), k)
  names = ["mentions", "pairs", "span = negative", "negative anchored by span",
           "gold words in negative", "negative words in gold", "title-only negative",
           "span = gold"]
  print("| | " + " | ".join(f"gold found (rank < {k})" if g == "found" else
                             f"gold not in top {k}" for g in groups) + " |")
  print("|---|" + "---|" * len(groups))
  for name in names:
    cells = []
    for counts in groups.values():
      n = counts.get(name, 0)
      cells.append(f"{n:,}" if name in ("mentions", "pairs")
                   else f"{n / max(counts.get('pairs', 0), 1):.1%}")
    print(f"| {name} | " + " | ".join(cells) + " |")
  kinds = negative_gold_frequencies(pairs, read_gold_counts(FLAGS.extract_dir))
  print("\n| negative | " + " | ".join(kinds) + " |")
  print("|---|" + "---|" * len(kinds))
  for name in ("pairs", "distinct negatives", "negative is a training gold", "mean anchors",
               "median anchors", "negative has >= 100 anchors"):
    cells = [f"{v[name]:,}" if isinstance(v[name], int) else
             (f"{v[name]:.1%}" if "negative" in name else f"{v[name]:.1f}")
             for v in kinds.values()]
    print(f"| {name} | " + " | ".join(cells) + " |")
  for kind, v in kinds.items():
    print(f"\n{kind} negatives in most pairs (pairs, training anchors): " + "; ".join(
        f"{t} ({n}, {a:,})" for t, n, a in v["top"]))


if __name__ == "__main__":
  flags.DEFINE_string("negatives_dir", None, "A finished mining round (WS/negatives/round_N).")
  flags.DEFINE_string("extract_dir", None, "The extraction it was mined from.")
  flags.mark_flags_as_required(["negatives_dir", "extract_dir"])
  entry.run(main, "python -m benchmarks.mining_pairs")
