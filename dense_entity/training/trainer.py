"""Training loop of the dual encoder under any tf.distribute strategy (Gillick et al. 2019,
sections 4.2-4.3).

Trainer orchestrates the parts of this package: it checks the extraction, writes or reads the
model_dir's config and vocabulary, builds the model and optimizer under the strategy, restores
the latest checkpoint (checkpointing) or initialises the lexical channel's IDF weights
(initialization), and runs the step functions (steps) in chunks, with held-out evaluation and
TensorBoard summaries (hooks) and a checkpoint every `eval_every` steps and at the end; a new run
with the same model_dir resumes from the latest checkpoint.

restore_model, read_vocabulary, VOCAB_FILE, CHECKPOINT_DIR (checkpointing), read_glove,
document_frequencies (initialization) and make_optimizer (optimizers) are importable from here
too.
"""

import logging
import math
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import config as config_lib
from dense_entity.modeling import models
from dense_entity.training import checkpointing
from dense_entity.training import hooks
from dense_entity.training import initialization
from dense_entity.training import provenance
from dense_entity.training import steps as steps_lib
from dense_entity.training.checkpointing import CHECKPOINT_DIR
from dense_entity.training.checkpointing import VOCAB_FILE
from dense_entity.training.checkpointing import read_vocabulary
from dense_entity.training.checkpointing import restore_model
from dense_entity.training.initialization import document_frequencies
from dense_entity.training.initialization import read_glove
from dense_entity.training.optimizers import make_optimizer

__all__ = ["Trainer", "restore_model", "read_vocabulary", "read_glove", "document_frequencies",
           "make_optimizer", "VOCAB_FILE", "CHECKPOINT_DIR"]


def check_labeled_split(examples: Dict[str, List[bytes]], name: str, batch_size: int) -> int:
  """The number of mentions of a labeled split (Trainer.set_labeled_mentions' `examples`).

  Raises:
    ValueError: naming the split, for missing features, unequal lengths, or fewer mentions
      than one batch of `batch_size`.
  """
  missing = sorted(set(records.MENTION_SPEC) - set(examples))
  if missing:
    raise ValueError(f"{name} mentions lack the features {missing}")
  sizes = {len(examples[key]) for key in records.MENTION_SPEC}
  if len(sizes) != 1:
    raise ValueError(f"{name} mention features have unequal lengths {sorted(sizes)}")
  n = sizes.pop()
  if n < batch_size:
    raise ValueError(f"{n} {name} mentions, fewer than one batch of {batch_size}")
  return n


def _id_counts(titles: List[bytes]) -> Tuple[np.ndarray, np.ndarray]:
  """(distinct entity ids (records.entity_ids) int64 `[n]`, sorted, occurrences int64 `[n]`)
  of entity `titles`."""
  return np.unique(records.entity_ids(tf.constant(titles, tf.string)).numpy(),
                   return_counts=True)


class Trainer:
  """Builds the model under `strategy`, restores the latest checkpoint, and trains.

  Args:
    cfg: the experiment config (written to model_dir/config.json on the first run). A resumed
      run must ask for the checkpoint's model and extraction (provenance.check_resume); its
      training settings (provenance.CHANGEABLE_TRAIN_SETTINGS) replace the saved ones.
      provenance.run_config builds it from a command line.
    extract_dir: a finished extraction (MANIFEST.json present).
    model_dir: checkpoints, config.json, trained_on.json (the extraction's and GloVe file's
      identity), vocab.txt and TensorBoard summaries.
    strategy: a tf.distribute strategy (distribute_utils.get_strategy).

  Raises:
    FileNotFoundError: when `extract_dir` is not a finished extraction (MANIFEST.json).
    ValueError: when the extraction has fewer training mentions than one batch (before
      model_dir is created), the config is invalid (before config.json is written), a resumed
      run asks for another preset, model setting, optimizer, vocabulary or extraction than the
      checkpoint's (naming the flag and both values; nothing written), the batch does not
      split over the replicas, or the latest checkpoint lacks variables of the model (naming
      the checkpoint).
  """

  def __init__(self, cfg: config_lib.ExperimentConfig, extract_dir: str, model_dir: str,
               strategy: Optional[tf.distribute.Strategy] = None):
    self.strategy = strategy or tf.distribute.get_strategy()
    self.extract_dir = extract_dir
    self.model_dir = model_dir
    # Check the input before writing anything into model_dir.
    manifest = records.require_extraction(extract_dir)
    num_train = manifest.get("counts", {}).get("mentions_train")
    if num_train is not None and num_train < cfg.train.batch_size:
      raise ValueError(
          f"{os.path.join(extract_dir, schema.MANIFEST_FILE)}: {num_train} training mentions, "
          f"fewer than one batch of {cfg.train.batch_size} (pages skipped by the extraction: "
          f"{manifest.get('pages_skipped', 0)}); nothing to train on")
    self.train_files = records.record_files(extract_dir, schema.TRAIN_MENTIONS_PREFIX)
    # The link sources trained on (cfg holds a resumed run's own, run_config), checked and
    # counted before model_dir is written.
    self.link_sources = config_lib.link_sources(cfg.train)
    if self.link_sources:
      num_train = self._count_kept_mentions(cfg.train.batch_size)
    extraction = provenance.extraction_identity(extract_dir)
    if tf.io.gfile.exists(os.path.join(model_dir, config_lib.CONFIG_FILE)):
      # Resuming: the same model and data as the checkpoint, or a one-line error naming the
      # setting; the training settings of this run (steps, learning rate, ...) apply.
      saved = config_lib.load(model_dir)
      provenance.check_resume(model_dir, saved, cfg, extraction)
      cfg = provenance.resumed_config(saved, cfg)
      vocabulary, vectors = read_vocabulary(model_dir), None
      if cfg != saved:
        config_lib.save(cfg, model_dir)
      if provenance.read_trained_on(model_dir) is None:
        provenance.write_trained_on(model_dir, extraction, cfg.glove_path)
    else:
      config_lib.validate(cfg)
      vocabulary, vectors = [], None
      if cfg.glove_path:
        vocabulary, vectors = read_glove(cfg.glove_path, cfg.vocab_size)
      tf.io.gfile.makedirs(model_dir)
      checkpointing.write_vocabulary(model_dir, vocabulary)
      provenance.write_trained_on(model_dir, extraction, cfg.glove_path)
      config_lib.save(cfg, model_dir)
    self.cfg = cfg
    tc = cfg.train
    if tc.batch_size % self.strategy.num_replicas_in_sync:
      raise ValueError(f"batch_size {tc.batch_size} is not divisible by the "
                       f"{self.strategy.num_replicas_in_sync} replicas")
    tf.keras.utils.set_random_seed(tc.seed)
    with self.strategy.scope():
      self.model = models.DualEncoder(cfg.model, vocabulary, vectors)
      self.optimizer = make_optimizer(tc)
      self.step = tf.Variable(0, dtype=tf.int64, name="step", trainable=False)
      # The last mining round whose negatives training uses (0: in-batch negatives only).
      self.mining_round = tf.Variable(0, dtype=tf.int64, name="mining_round",
                                      trainable=False)
      self.optimizer.build(self.model.trainable_variables)
    self.checkpoint, self.manager = checkpointing.checkpoint_manager(
        model_dir, self.model, self.optimizer, self.step, self.mining_round)
    restored = checkpointing.restore_latest(self.checkpoint, self.manager)
    if restored:
      logging.info("resumed from %s at step %d", restored, int(self.step.numpy()))
    elif self.model.context_match is not None or self.model.name_match is not None:
      # IDF weights of the lexical channels come from the KB's entities, once; the checkpoint
      # keeps them, so a resumed run and the export use the same weights.
      frequencies = initialization.kb_document_frequencies(
          self.model.text_featurizer, records.record_files(extract_dir, schema.ENTITIES_PREFIX),
          names=self.model.name_match is not None)
      for key, layer in (("context", self.model.context_match),
                         ("names", self.model.name_match)):
        if layer is not None:
          df, n = frequencies[key]
          layer.set_document_frequencies(df, n)
          logging.info("%s channel: IDF from %d entities, %d weighted rows", key, n,
                       int(np.count_nonzero(df)))
    heldout = tf.io.gfile.glob(os.path.join(extract_dir, schema.HELDOUT_MENTIONS_PREFIX + "-*"))
    self.heldout_files = sorted(heldout)
    self.summaries = hooks.Summaries(model_dir)
    self._steps = steps_lib.TrainSteps(self.model, self.optimizer, self.strategy, tc, self.step)
    self._train_fn = self._evaluator = None
    self.negative_files: List[str] = []
    self.max_gold_rank = -1  # set_hard_negatives
    self.described_negatives_only = False  # set_hard_negatives
    self.excluded_negatives: Optional[np.ndarray] = None  # set_hard_negatives
    # Labeled splits trained on beside the extraction's mentions: name -> (examples, fraction).
    self.labeled_sources: Dict[str, Tuple[Dict[str, List[bytes]], float]] = {}
    self._num_train_mentions = num_train
    self.last_heldout_auc = float("nan")

  @property
  def pair_batch_size(self) -> int:
    """Hard negative pairs per global step (0 before set_hard_negatives)."""
    return self._steps.pair_batch_size

  def evaluate(self) -> float:
    """Held-out in-batch recall@1 over the first `eval_batches` held-out batches, always the
    same ones (nan when there are no held-out files or fewer mentions than one batch); the AUC
    of the same batches goes to `last_heldout_auc`."""
    if self._evaluator is None:
      self._evaluator = hooks.HeldoutEvaluator(self._steps, self.heldout_files, self.cfg.train)
    recall, self.last_heldout_auc = self._evaluator.evaluate()
    return recall

  def _count_kept_mentions(self, batch_size: int) -> int:
    """Training mentions whose link source TrainConfig.link_sources keeps (logged by source).

    Raises:
      ValueError: when fewer than one batch are kept, naming the sources found.
    """
    counts = records.count_link_sources(self.train_files)
    kept = sum(n for source, n in counts.items() if source in self.link_sources)
    logging.info("link sources %s: %d of %d training mentions kept (by source: %s)",
                 ",".join(self.link_sources), kept, sum(counts.values()), counts)
    if kept < batch_size:
      found = ", ".join(f"{s or 'none (older extraction)'}: {n}" for s, n in sorted(counts.items()))
      raise ValueError(
          f"link_sources={','.join(self.link_sources)} keeps {kept} of the training mentions "
          f"of {self.extract_dir}, fewer than one batch of {batch_size} (link "
          f"sources found: {found})")
    return kept

  @property
  def num_train_mentions(self) -> int:
    """Training mentions: the extraction MANIFEST's count, else counted once, when first
    asked (only hard negative training needs it)."""
    if self._num_train_mentions is None:
      self._num_train_mentions = sum(
          1 for f in self.train_files for _ in tf.data.TFRecordDataset(f))
    return self._num_train_mentions

  def set_hard_negatives(self, files: List[str], mining_round: int,
                         num_pairs: Optional[int] = None, max_gold_rank: int = -1,
                         described_only: bool = False, weight: float = 1.0,
                         max_negative_golds: int = -1):
    """Trains from now on with the logistic task on these hard negative pair files.

    Pairs are drawn at the rate of the training mentions they were mined from: with P pairs
    for M training mentions, each step takes about batch_size * P / M of them (at least one per
    replica, at most batch_size), so one pass over the mentions is about one pass over the
    pairs. A fixed full batch of pairs per step would show each of a few hundred pairs hundreds
    of times per epoch and overfit them.

    Args:
      files: TFRecord shards of pair records (beam_pipelines.mine_hard_negatives output).
      mining_round: the round that mined them (>= the checkpoint's round).
      num_pairs: pairs in `files` that the filters below keep; counted when None.
      max_gold_rank: train only on the pairs of mentions whose gold entity ranked at most
        this (0-based) among the k entities searched when they were mined (schema.GOLD_RANK;
        k - 1: the gold was found, only the entities above it are negatives); < 0: every
        pair, the paper's rule. Not in the paper.
      described_only: train only on the pairs whose negative entity has a description (not a
        title-only entry; records.keep_described_negatives). Not in the paper.
      weight: weight of the logistic task beside the softmax task; 1.0 is the paper's.
      max_negative_golds: train only on the pairs whose negative entity is the gold of at
        most this many of the training mentions (the extraction's, as `link_sources` keeps
        them); 0: negatives that no training mention links to, the entities in-batch
        negatives never show; < 0: every pair, the paper's rule. Not in the paper: at full KB
        the described negatives are mostly frequent golds ('United States'); leaving them
        out did not remove mining's recall loss (README, "Hard negative mining at full
        scale").

    Raises:
      ValueError: when `mining_round` is older than the round the checkpoint was trained on;
        with `max_gold_rank` >= 0, when the pairs carry no gold rank (mined before it was
        recorded) or none is kept; when `weight` is not positive and finite.
    """
    if mining_round < int(self.mining_round.numpy()):
      raise ValueError(
          f"hard negatives of mining round {mining_round} given, but the checkpoint in "
          f"{self.model_dir} is already trained on round {int(self.mining_round.numpy())}")
    if not (math.isfinite(weight) and weight > 0):
      raise ValueError(f"hard negative weight must be positive and finite, got {weight}")
    self.negative_files = sorted(files)
    self.max_gold_rank = max_gold_rank
    self.described_negatives_only = described_only
    self._steps.pair_weight = float(weight)
    self.excluded_negatives = None
    if max_negative_golds >= 0:
      ids, counts = self.training_gold_counts()
      self.excluded_negatives = ids[counts > max_negative_golds]
      logging.info("hard negatives: %d of %d training golds are the gold of more than %d "
                   "training mentions; their pairs are left out", len(self.excluded_negatives),
                   len(ids), max_negative_golds)
    if max_gold_rank >= 0 and num_pairs is None:
      if not records.pairs_have_gold_rank(self.negative_files):
        raise ValueError(
            f"max_gold_rank={max_gold_rank}: the pairs of mining round {mining_round} "
            f"({self.negative_files[0] if self.negative_files else 'no files'}) carry no "
            f"gold rank (mined before it was recorded); mine the round again")
    if num_pairs is None:
      kept = records.keep_pairs(tf.data.TFRecordDataset(self.negative_files), max_gold_rank,
                                described_only, self.excluded_negatives)
      num_pairs = sum(1 for _ in kept)
      if not num_pairs:
        raise ValueError(
            f"mining round {mining_round} has no hard negative pairs"
            + (f" with max_gold_rank={max_gold_rank}" if max_gold_rank >= 0 else "")
            + (" with a described negative" if described_only else "")
            + (f" whose negative is the gold of at most {max_negative_golds} training "
               "mentions" if max_negative_golds >= 0 else "")
            + f" ({len(self.negative_files)} files)")
      logging.info("hard negatives of round %d: %d pairs (max_gold_rank %d, described only "
                   "%s, max negative golds %d, weight %g)", mining_round, num_pairs,
                   max_gold_rank, described_only, max_negative_golds, weight)
    tc = self.cfg.train
    replicas = self.strategy.num_replicas_in_sync
    per_step = math.ceil(tc.batch_size * num_pairs / max(self.num_train_mentions, 1))
    per_step = min(max(per_step, 1), tc.batch_size)
    self._steps.pair_batch_size = math.ceil(per_step / replicas) * replicas
    self.mining_round.assign(mining_round)
    self._train_fn = None  # train() traces the steps again, with new iterators

  def set_labeled_mentions(self, examples: Dict[str, List[bytes]], fraction: float,
                           name: str = "labeled") -> None:
    """Trains from now on with batches of these labeled mentions beside the extraction's.

    Each step's global batch comes whole from one source: from the split `name` with
    probability `fraction`, from each other split set before with its own fraction, else
    from the extraction's training mentions (fractions summing to 1: the labeled splits
    alone, a fine-tuning stage). In-batch negatives are the other golds of the same batch.
    Calling again with the same `name` replaces that split.

    Args:
      examples: records.MENTION_SPEC name -> `[n]` bytes values, categories and aliases
        '|'-joined (evaluation.labeled_mentions.load, kb.redirect_examples.load).
      fraction: in (0, 1]; the fractions of all splits sum to at most 1.
      name: the split's name ('labeled': entity-linking datasets; 'redirects').

    Raises:
      ValueError: for a fraction outside (0, 1], fractions summing over 1, missing keys,
        unequal lengths, or fewer examples than one batch.
    """
    if not 0.0 < fraction <= 1.0:
      raise ValueError(f"{name} fraction must be in (0, 1], got {fraction}")
    others = sum(f for n, (_, f) in self.labeled_sources.items() if n != name)
    if others + fraction > 1.0 + 1e-9:
      raise ValueError(f"{name} fraction {fraction} with the other labeled splits' "
                       f"{others} sums over 1")
    check_labeled_split(examples, name, self.cfg.train.batch_size)
    self.labeled_sources[name] = ({key: list(examples[key]) for key in records.MENTION_SPEC},
                                  float(fraction))
    self._train_fn = None  # train() builds the mixed input and traces the steps again

  def _train_dataset(self) -> tf.distribute.DistributedDataset:
    """The extraction's training mentions, mixed with the labeled splits when set."""
    tc = self.cfg.train
    if not self.labeled_sources:
      return steps_lib.distributed_dataset(self.strategy, self.train_files, tc, repeat=True,
                                           shuffle=True, link_sources=self.link_sources)
    names = sorted(self.labeled_sources)
    splits = [{key: tf.constant(values, tf.string)
               for key, values in self.labeled_sources[n][0].items()} for n in names]
    sizes = [len(self.labeled_sources[n][0][schema.ENTITY_TITLE]) for n in names]
    # Cumulative fractions in millionths: a draw r in [0, 1e6) below bounds[i] and not below
    # bounds[i - 1] picks split i; r at or above the last bound picks the extraction's.
    bounds = np.cumsum([int(round(self.labeled_sources[n][1] * 1_000_000)) for n in names])
    with_wiki = bounds[-1] < 1_000_000

    def dataset_fn(ctx: tf.distribute.InputContext):
      per_replica = ctx.get_per_replica_batch_size(tc.batch_size)
      sources = []
      for i, (split, size) in enumerate(zip(splits, sizes)):
        own = tf.data.Dataset.from_tensor_slices(split)
        if ctx.num_input_pipelines > 1:
          own = own.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        own = own.shuffle(size, seed=tc.seed + i, reshuffle_each_iteration=True).repeat()
        sources.append(own.batch(per_replica, drop_remainder=True))
      if len(sources) == 1 and not with_wiki:
        return sources[0].prefetch(tf.data.AUTOTUNE)
      if with_wiki:
        sources.append(records.mention_dataset(
            self.train_files, per_replica, shuffle_buffer=tc.shuffle_buffer, repeat=True,
            seed=tc.seed, drop_remainder=True,
            shard=(ctx.num_input_pipelines, ctx.input_pipeline_id),
            link_sources=self.link_sources))
      limits = tf.constant(bounds, tf.int64)
      # The replicas of one step take consecutive batches: draw per global step, so one
      # step's replicas all hold batches of one source (the same seed on every pipeline).
      replicas = ctx.num_replicas_in_sync // max(ctx.num_input_pipelines, 1)
      choice = tf.data.Dataset.random(seed=tc.seed).map(
          lambda r: tf.reduce_sum(tf.cast(tf.math.floormod(r, 1_000_000) >= limits,
                                          tf.int64)))
      choice = choice.flat_map(lambda c: tf.data.Dataset.from_tensors(c).repeat(
          max(replicas, 1)))
      return tf.data.Dataset.choose_from_datasets(sources, choice).prefetch(
          tf.data.AUTOTUNE)

    return self.strategy.distribute_datasets_from_function(dataset_fn)

  def gold_probabilities(self) -> Dict[int, float]:
    """q(e): the probability that a training example's gold is entity e, over the sources as
    training draws them (the extraction's mentions and each labeled split at its fraction);
    keyed by TrainSteps.gold_fingerprints. Sums to 1."""
    sources = [(self._training_gold_titles(),
                1.0 - sum(f for _, f in self.labeled_sources.values()))]
    sources += [(split[schema.ENTITY_TITLE], f) for split, f in self.labeled_sources.values()]
    q: Dict[int, float] = {}
    for titles, weight in sources:
      if weight <= 0 or not titles:
        continue
      ids, n = _id_counts(titles)
      for i, c in zip(ids.tolist(), (weight * n / n.sum()).tolist()):
        q[i] = q.get(i, 0.0) + c
    return q

  def _training_gold_titles(self) -> List[bytes]:
    """The gold entity title of each training mention of the extraction that `link_sources`
    keeps, in file order."""
    spec = {schema.ENTITY_TITLE: tf.io.FixedLenFeature([], tf.string)}
    titles: List[bytes] = []
    kept = records.keep_link_sources(tf.data.TFRecordDataset(self.train_files),
                                     self.link_sources)
    for batch in kept.batch(8192):
      titles.extend(tf.io.parse_example(batch, spec)[schema.ENTITY_TITLE].numpy().tolist())
    return titles

  def training_gold_counts(self) -> Tuple[np.ndarray, np.ndarray]:
    """(entity ids (records.entity_ids) int64 `[n]`, sorted, training mentions with that gold
    int64 `[n]`) over the extraction's training mentions that `link_sources` keeps."""
    return _id_counts(self._training_gold_titles())

  def _log_q_table(self) -> tf.lookup.StaticHashTable:
    """log q(e) by gold fingerprint (gold_probabilities); entities absent from every source
    (none can be a column of a batch) get the smallest log q."""
    q = self.gold_probabilities()
    keys = np.fromiter(q.keys(), np.int64, len(q))
    log_q = np.log(np.fromiter(q.values(), np.float64, len(q))).astype(np.float32)
    logging.info("log q correction: %d gold entities, log q from %.2f to %.2f", len(q),
                 float(log_q.min()), float(log_q.max()))
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(keys), tf.constant(log_q)),
        default_value=float(log_q.min()))

  def train(self, progress: Optional[Callable[[int, dict], None]] = None) -> dict:
    """Trains until `train_steps`; returns the last metrics (loss, recalls, examples/s)."""
    tc = self.cfg.train
    start = int(self.step.numpy())
    metrics = {"step": start}
    if start >= tc.train_steps:
      # Said, not only implied by the metrics of the step reached (it exited 0 silently).
      logging.warning("%s is at step %d, not below train_steps %d: nothing to train (raise "
                      "--train_steps to go on)", self.model_dir, start, tc.train_steps)
      metrics["heldout_in_batch_recall@1"] = self.evaluate()
      return metrics

    if self._train_fn is None:
      if tc.logq_correction:
        self._steps.log_q = self._log_q_table()
      self._train_fn = tf.function(self._steps.train_steps)
      self._train_iterator = iter(self._train_dataset())
      self._pair_iterator = None
      if self.negative_files:
        self._pair_iterator = iter(steps_lib.distributed_dataset(
            self.strategy, self.negative_files, tc, repeat=True, shuffle=True,
            global_batch=self.pair_batch_size, max_gold_rank=self.max_gold_rank,
            described_only=self.described_negatives_only,
            excluded_negatives=self.excluded_negatives))
    pair_iterator = self._pair_iterator
    iterator = self._train_iterator
    chunk = min(50, tc.eval_every)
    step = start
    t0, examples = time.time(), 0
    while step < tc.train_steps:
      n = min(chunk, tc.train_steps - step, tc.eval_every - step % tc.eval_every)
      loss, recall = self._train_fn(iterator, tf.constant(n), pair_iterator)
      step = int(self.step.numpy())
      examples += n * tc.batch_size
      metrics = {"step": step, "loss": float(loss), "train_in_batch_recall@1": float(recall),
                 "examples_per_second": examples / max(time.time() - t0, 1e-9),
                 "scale": float(self.model.scale.numpy())}
      self.summaries.write(step, metrics, hooks.TRAIN_SCALARS)
      if step % tc.eval_every == 0 or step >= tc.train_steps:
        metrics["heldout_in_batch_recall@1"] = self.evaluate()
        metrics["heldout_in_batch_auc"] = self.last_heldout_auc
        metrics["mining_round"] = int(self.mining_round.numpy())
        self.summaries.write(step, metrics, hooks.HELDOUT_SCALARS)
        try:
          self.manager.save(checkpoint_number=step)
        except BaseException:  # stopped during the save (Ctrl-C, SIGTERM): not left half
          checkpointing.remove_partial_saves(self.model_dir)
          raise
        logging.info("step %d %s", step, metrics)
      if progress:
        progress(n, metrics)
    self.summaries.flush()
    return metrics
