"""The hard negative mining graph: mine with the current exported model (paper section 4.3).

Gillick et al. (2019): encode the training mentions and all entities with the current model,
take each mention's 10 nearest entities, and keep every entity ranked above the gold one as a
negative pair; training then continues with the softmax task plus a logistic task on these pairs.
Each round's new pairs are added to the earlier rounds' (deduplicated by (mention, entity)).

The mention encoder SavedModel runs inside the Beam workers (DoFn.setup loads it), so the
featurizer is the exported graph itself; entities are searched in an index built from the same
export (export.encode_entities), checked by its model fingerprint. On a big KB point
`index_dir` at a ScaNN AH+tree index; workers load it once each.

Each pair record keeps the gold entity's rank among the k searched (schema.GOLD_RANK, k when
the gold was not among them), so training can leave out the pairs of mentions whose gold the
model did not find (`train --hard_negatives_max_gold_rank`) without mining again.

`build_pipeline` adds the graph to a pipeline; `run` runs one round and publishes
OUTPUT_DIR/hard_negatives-SSSSS-of-NNNNN.tfrecord (dense_entity.kb.schema pair records, all
rounds so far), stats.json and, written last, MANIFEST.json. The command line is
beam_pipelines.mine_hard_negatives.
"""

import json
import os
import re
import shutil
import unicodedata
import uuid
from typing import Dict, List, Optional, Sequence

import apache_beam as beam
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.utils import shared
import tensorflow as tf

from beam_pipelines.pipelines import beam_io
from beam_pipelines.pipelines import extraction
from dense_entity.common import fileio
from dense_entity.kb import records as kb_records
from dense_entity.kb import schema
from dense_entity.kb.titles import resolve_redirect

DEFAULT_K = 10
_NAMESPACE = "mine_hard_negatives"


def spelling_key(title: str) -> str:
  """A key shared by titles that differ only in spelling (likely one entity, two pages).

  Case-folded, accents removed (NFKD without combining marks), every non-alphanumeric run
  dropped, and a final 's' of each word removed: 'Aqueous solutions', 'Aqueous solution' and
  'Gōzō Shioda' / 'Gozo Shioda' share a key. Used so that a title which in the full Wikipedia
  is a redirect to the gold entity (plural, case or accent variant) but whose redirect page is
  not in the dump is not trained on as a negative of that gold entity.
  """
  t = unicodedata.normalize("NFKD", title.casefold())
  t = "".join(c for c in t if not unicodedata.combining(c))
  words = re.findall(r"[^\W_]+", t)
  return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def select_hard_negatives(ranked: Sequence[str], gold: str,
                          redirects: Optional[Dict[str, str]] = None,
                          skipped: Optional[Dict[str, int]] = None) -> List[str]:
  """The paper's rule: every entity ranked above the gold one is a hard negative.

  Args:
    ranked: the k nearest entity titles, best first.
    gold: the gold entity title.
    redirects: optional redirect map; titles that resolve to the gold entity are never
      negatives.
    skipped: optional counter dict; `skipped["spelling_variant_of_gold"]` is incremented for
      each title ranked above the gold that is left out because it has the gold's
      `spelling_key` (the same entity under another spelling, e.g. a plural, whose redirect
      page is missing from the dump).

  Returns:
    The titles ranked above the gold entity (all k when the gold is not among them), without
    the gold itself (after redirect resolution), without spelling variants of the gold, and
    without repeats. Gold ranked first gives [].
  """
  redirects = redirects or {}
  resolve = lambda t: resolve_redirect(t, redirects) or t
  gold = resolve(gold)
  gold_key = spelling_key(gold)
  negatives, seen = [], set()
  for title in ranked:
    resolved = resolve(title)
    if resolved == gold:
      break
    if resolved in seen:
      continue
    seen.add(resolved)
    if spelling_key(resolved) == gold_key:
      if skipped is not None:
        skipped["spelling_variant_of_gold"] = skipped.get("spelling_variant_of_gold", 0) + 1
      continue
    negatives.append(resolved)
  return negatives


def gold_rank(ranked: Sequence[str], gold: str,
              redirects: Optional[Dict[str, str]] = None) -> int:
  """The gold entity's rank (0-based) in `ranked`, titles resolved through `redirects` as
  select_hard_negatives resolves them; len(ranked) when it is not there."""
  redirects = redirects or {}
  resolve = lambda t: resolve_redirect(t, redirects) or t
  gold = resolve(gold)
  for rank, title in enumerate(ranked):
    if resolve(title) == gold:
      return rank
  return len(ranked)


def _bytes(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[v.encode("utf-8") for v in values]))


def _int(value):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def _strings(example: tf.train.Example, name: str) -> List[str]:
  return [v.decode("utf-8") for v in example.features.feature[name].bytes_list.value]


def parse_mention(serialized: bytes) -> Dict[str, str]:
  ex = tf.train.Example.FromString(serialized)
  out = {n: (_strings(ex, n) or [""])[0]
         for n in schema.MENTION_FEATURES + (schema.ENTITY_TITLE, schema.MENTION_ID,
                                             schema.LINK_SOURCE)}
  return out


def parse_entity(serialized: bytes):
  ex = tf.train.Example.FromString(serialized)
  return ((_strings(ex, schema.ENTITY_TITLE) or [""])[0],
          ((_strings(ex, schema.ENTITY_TEXT) or [""])[0],
           _strings(ex, schema.ENTITY_CATEGORIES), _strings(ex, schema.ENTITY_ALIASES)))


class _MiningModel:
  """What every MineFn of a worker process shares: the mention encoder, the index (gigabytes
  at 6M entities), its titles and the redirects. A class, not a tuple: Beam's Shared holds
  its objects by weak reference."""

  def __init__(self, export_dir: str, index_dir: str, index_kind: str,
               redirects_path: Optional[str]):
    # Imported here: workers import the package when they start, not when the graph is built.
    from dense_entity.retrieval import index_builder  # pylint: disable=g-import-not-at-top
    from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
    from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
    manifest = savedmodel.read_manifest(export_dir)
    self.encoder = savedmodel.load_encoder(
        os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR))
    self.index = index_lib.load_index(
        index_dir, index_kind,
        expected_model_fingerprint=manifest["model_fingerprint"],
        expected_dim=manifest["encoding_dim"])
    self.titles = index_builder.read_titles(
        os.path.join(index_dir, index_lib.TITLES_FILENAME))
    self.redirects = {}
    if redirects_path and os.path.exists(redirects_path):
      with open(redirects_path, encoding="utf-8") as f:
        for line in f:
          parts = line.rstrip("\n").split("\t")
          if len(parts) == 2:
            self.redirects[parts[0]] = parts[1]


class MineFn(beam.DoFn):
  """Batches of mentions -> (negative title, (mention, round, gold rank)) for each hard
  negative.

  The encoder and the index are loaded once per worker process and shared by all its threads
  and DoFn instances (apache_beam.utils.shared.Shared, as RunInference shares large models), so
  a worker holds one copy of a 6M-entity index however many threads it runs.
  """

  def __init__(self, export_dir: str, index_dir: str, index_kind: str, k: int, round_: int,
               redirects_path: Optional[str]):
    super().__init__()
    self._export_dir, self._index_dir, self._index_kind = export_dir, index_dir, index_kind
    self._k, self._round, self._redirects_path = k, round_, redirects_path
    self._shared_handle = shared.Shared()
    self._model = None
    self._mined = Metrics.counter(_NAMESPACE, "mentions_mined")
    self._top1 = Metrics.counter(_NAMESPACE, "gold_ranked_first")
    self._absent = Metrics.counter(_NAMESPACE, "gold_not_in_top_k")
    self._pairs = Metrics.counter(_NAMESPACE, "negative_pairs_found")
    self._absent_pairs = Metrics.counter(_NAMESPACE, "negative_pairs_gold_not_in_top_k")
    self._variants = Metrics.counter(_NAMESPACE, "skipped_spelling_variant_of_gold")

  def setup(self):
    # The tag names what is loaded: another index or export in the same process is another
    # shared object.
    tag = "\t".join((self._export_dir, self._index_dir, self._index_kind))
    self._model = self._shared_handle.acquire(
        lambda: _MiningModel(self._export_dir, self._index_dir, self._index_kind,
                             self._redirects_path), tag=tag)

  def process(self, batch):
    model = self._model
    encodings = model.encoder({n: [m[n] for m in batch] for n in schema.MENTION_FEATURES})
    ids, _ = model.index.search(encodings, self._k)
    for mention, row in zip(batch, ids):
      ranked = [model.titles[i] for i in row]
      gold = mention[schema.ENTITY_TITLE]
      rank = gold_rank(ranked, gold, model.redirects)
      self._mined.inc()
      if rank == 0:
        self._top1.inc()
      elif rank == len(ranked):
        self._absent.inc()
      skipped = {}
      for title in select_hard_negatives(ranked, gold, model.redirects, skipped):
        self._pairs.inc()
        if rank == len(ranked):
          self._absent_pairs.inc()
        yield title, (mention, self._round, rank)
      if skipped:
        self._variants.inc(skipped["spelling_variant_of_gold"])


def pair_example(mention: Dict[str, str], title: str, text: str, categories: List[str],
                 round_: int, aliases: Sequence[str] = (),
                 gold_rank_: int = -1) -> tf.train.Example:
  """A hard negative pair record (schema.py): the mention, the negative entity, the gold
  title, label 0, the round and, when >= 0, the gold's rank when it was mined."""
  feats = {n: _bytes([mention[n]]) for n in schema.MENTION_FEATURES}
  feats.update({
      schema.ENTITY_TITLE: _bytes([title]), schema.ENTITY_TEXT: _bytes([text]),
      schema.ENTITY_CATEGORIES: _bytes(categories), schema.ENTITY_ALIASES: _bytes(aliases),
      schema.GOLD_ENTITY: _bytes([mention[schema.ENTITY_TITLE]]),
      schema.MENTION_ID: _bytes([mention[schema.MENTION_ID]]),
      schema.PAIR_LABEL: _int(0), schema.MINING_ROUND: _int(round_)})
  if gold_rank_ >= 0:
    feats[schema.GOLD_RANK] = _int(gold_rank_)
  return tf.train.Example(features=tf.train.Features(feature=feats))


def _join(element):
  title, grouped = element
  entities = list(grouped["entity"])
  if not entities:
    Metrics.counter(_NAMESPACE, "negatives_dropped_entity_not_in_kb").inc(
        len(list(grouped["negative"])))
    return
  text, categories, aliases = entities[0]
  for mention, round_, rank in grouped["negative"]:
    ex = pair_example(mention, title, text, categories, round_, aliases, rank)
    # Deterministic: map entries in key order, so that two rounds write the same bytes.
    yield f"{mention[schema.MENTION_ID]}\t{title}", (
        round_, ex.SerializeToString(deterministic=True))


def _previous_key(serialized: bytes):
  ex = tf.train.Example.FromString(serialized)
  key = f"{_strings(ex, schema.MENTION_ID)[0]}\t{_strings(ex, schema.ENTITY_TITLE)[0]}"
  round_ = ex.features.feature[schema.MINING_ROUND].int64_list.value[0]
  return key, (round_, serialized)


def _earliest(element):
  key, versions = element
  versions = sorted(versions)
  if len(versions) > 1:
    Metrics.counter(_NAMESPACE, "pairs_already_mined").inc()
  return key, versions[0][1]


def keep_link_source(mention: Dict[str, str], link_sources: Sequence[str]) -> bool:
  """Whether a parsed mention's link source (schema.LINK_SOURCE, '' in older extractions) is
  one of `link_sources` (always, when that is empty); counts 'mentions_skipped_link_source'
  otherwise."""
  if not link_sources or mention[schema.LINK_SOURCE] in link_sources:
    return True
  Metrics.counter(_NAMESPACE, "mentions_skipped_link_source").inc()
  return False


def build_pipeline(pipeline, export_dir: str, index_dir: str, extract_dir: str, staging: str,
                   round_: int, previous_dir: Optional[str] = None,
                   index_kind: str = "brute_force", k: int = DEFAULT_K, batch_size: int = 512,
                   link_sources: Sequence[str] = ()):
  """Composes the mining pipeline; writes pair shards with prefix `staging/hard_negatives`.

  Only training mentions whose link source is in `link_sources` (all when empty) are mined,
  as training reads them (TrainConfig.link_sources).
  """
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  mention_files = records.record_files(extract_dir, schema.TRAIN_MENTIONS_PREFIX)
  entity_files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  mentions = (pipeline
              | "MentionFiles" >> beam.Create(mention_files)
              | "ReadMentions" >> beam.io.ReadAllFromTFRecord()
              | "ParseMentions" >> beam.Map(parse_mention)
              | "KeepLinkSources" >> beam.Filter(keep_link_source, tuple(link_sources))
              | "Batch" >> beam.BatchElements(min_batch_size=batch_size,
                                              max_batch_size=batch_size))
  negatives = mentions | "Mine" >> beam.ParDo(MineFn(
      export_dir, index_dir, index_kind, k, round_,
      os.path.join(extract_dir, schema.REDIRECTS_FILE)))
  entities = (pipeline
              | "EntityFiles" >> beam.Create(entity_files)
              | "ReadEntities" >> beam.io.ReadAllFromTFRecord()
              | "ParseEntities" >> beam.Map(parse_entity))
  new_pairs = ({"negative": negatives, "entity": entities}
               | "JoinEntities" >> beam.CoGroupByKey()
               | "PairExamples" >> beam.FlatMap(_join))
  sources = [new_pairs]
  if previous_dir:
    previous_files = sorted(tf.io.gfile.glob(
        os.path.join(previous_dir, schema.NEGATIVES_PREFIX + "-*")))
    if previous_files:
      sources.append(pipeline
                     | "PreviousFiles" >> beam.Create(previous_files)
                     | "ReadPrevious" >> beam.io.ReadAllFromTFRecord()
                     | "KeyPrevious" >> beam.Map(_previous_key))
  records = (sources | "AllRounds" >> beam.Flatten()
             | "GroupPairs" >> beam.GroupByKey()
             | "Deduplicate" >> beam.Map(_earliest))
  records | "Write" >> beam_io.WriteShardedTFRecords(
      os.path.join(staging, schema.NEGATIVES_PREFIX))


def check_inputs(round_: int, previous_dir: Optional[str], index_kind: str, k: int) -> None:
  """Checks a mining round's settings before the pipeline starts (inside it a bad value
  surfaced as a worker traceback).

  Raises:
    ValueError: round_ < 1, k < 1, an unknown index kind, or a previous round whose number is
      not below round_.
    FileNotFoundError: `previous_dir` holds no finished mining round (MANIFEST.json with its
      'round' and hard_negatives-* files beside it).
  """
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  if round_ < 1:
    raise ValueError(f"--round must be >= 1 (round 0 is training without mined negatives), "
                     f"got {round_}")
  if k < 1:
    raise ValueError(f"--k must be >= 1, got {k}")
  if index_kind not in index_lib.KINDS:
    raise ValueError(f"--index_kind={index_kind!r} is not one of {list(index_lib.KINDS)}")
  if not previous_dir:
    return
  _, previous_round = kb_records.mining_round_files(previous_dir, "--previous_dir")
  if previous_round >= round_:
    raise ValueError(f"--previous_dir={previous_dir} is round {previous_round}, not a round "
                     f"before --round={round_}")


def run(export_dir: str, index_dir: str, extract_dir: str, output_dir: str, round_: int,
        previous_dir: Optional[str] = None, index_kind: str = "brute_force",
        k: int = DEFAULT_K, pipeline_options=None,
        link_sources: Sequence[str] = ()) -> Dict[str, int]:
  """Runs one mining round; publishes `output_dir` atomically (MANIFEST.json last).

  `link_sources`: mine only the training mentions of these link sources (the ones training
  keeps, TrainConfig.link_sources; all when empty).

  Returns:
    The counters: mentions_mined, gold_ranked_first, gold_not_in_top_k, negative_pairs_found,
    pairs (all rounds, deduplicated), ...

  Raises:
    FileExistsError: `output_dir` holds something other than a finished mining round (e.g.
      WS/negatives itself, the parent of every round, or an extraction); checked before any
      work.
    ValueError / FileNotFoundError: from check_inputs, before any work.
  """
  check_inputs(round_, previous_dir, index_kind, k)
  output_dir = os.path.abspath(output_dir)
  # Another stage's output (an extraction also has a MANIFEST.json) is refused, not replaced.
  fileio.check_output_dir(output_dir, fileio.MINING_ROUND)
  fileio.check_replaceable(output_dir, schema.MANIFEST_FILE)
  parent = os.path.dirname(output_dir)
  os.makedirs(parent, exist_ok=True)
  # Staging directories of this output left by killed rounds (extraction.remove_stale_staging).
  prefix = f".staging-{os.path.basename(output_dir)}-"
  extraction.remove_stale_staging(parent, prefix=prefix)
  staging = os.path.join(parent, f"{prefix}{uuid.uuid4().hex[:8]}")
  os.makedirs(staging)
  try:
    extraction.write_staging_owner(staging)
    options = pipeline_options or beam_io.default_pipeline_options([])
    with beam_io.introspect_once():  # Beam's introspection once per object, built and run
      pipeline = beam.Pipeline(options=options)
      build_pipeline(pipeline, export_dir, index_dir, extract_dir, staging, round_,
                     previous_dir, index_kind, k, link_sources=link_sources)
      result, _ = beam_io.run_pipeline(pipeline)
    losses = beam_io.flow_losses(beam_io.counters(result, beam_io.FLOW_NAMESPACE))
    if losses:  # the shard writer's shuffle lost or duplicated records (extraction.check_flow)
      raise RuntimeError(f"the mining pipeline finished but its values do not add up: "
                         f"{'; '.join(losses)}; nothing was published")
    stats = {c.key.metric.name: int(c.committed if c.committed is not None else c.attempted)
             for c in result.metrics().query(MetricsFilter().with_namespace(_NAMESPACE))[
                 "counters"]}
    pairs = 0
    for path in tf.io.gfile.glob(os.path.join(staging, schema.NEGATIVES_PREFIX + "-*")):
      pairs += sum(1 for _ in tf.data.TFRecordDataset(path))
    stats["pairs"] = pairs
    stats["round"] = round_
    with open(os.path.join(staging, "stats.json"), "w") as f:
      json.dump(stats, f, indent=2, sort_keys=True)
    with open(os.path.join(staging, schema.MANIFEST_FILE), "w") as f:
      json.dump({"round": round_, "pairs": pairs, "export_dir": os.path.abspath(export_dir),
                 "previous_dir": previous_dir, "k": k,
                 "link_sources": list(link_sources)}, f, indent=2, sort_keys=True)
    os.remove(os.path.join(staging, extraction.STAGING_OWNER_FILE))
    fileio.replace_directory(staging, output_dir, schema.MANIFEST_FILE)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  return stats
