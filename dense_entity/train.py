"""Trains the dual encoder: `python -m dense_entity.train --extract_dir=... --model_dir=...`.

Flags choose a preset ('paper': 5M buckets x 300-d, batch 100, SGD momentum 0.9, lr 0.01;
'small': runs on 2 CPU cores), the distribution strategy (default / mirrored / tpu) and
overrides. A run resumes from the latest checkpoint in --model_dir: flags not given keep the
values it was trained with (config.json there); the training flags given (--train_steps,
--learning_rate, --batch_size, --eval_every, --hard_negatives, --train_dataset) apply; a
--preset, model flag, --glove, --vocab_size or --extract_dir other than the checkpoint's is
refused with one line naming the flag and both values (dense_entity.training.provenance),
before anything is written.
--train_dataset adds an entity-linking dataset's linked mentions as their own split
(evaluation.labeled_mentions; e.g. AIDA-CoNLL train, as a tuning stage on a copy of the model);
--train_redirects_fraction adds the KB's redirects as context-free mentions of their targets
(kb.redirect_examples), another split.
"""

import json
import logging
from typing import List, Optional, Tuple

from absl import flags

from dense_entity.common import entry
from dense_entity.modeling import config as config_lib
from dense_entity.training import distribute_utils

FLAGS = flags.FLAGS
flags.DEFINE_string("extract_dir", None, "Finished extraction (MANIFEST.json).")
flags.DEFINE_string("model_dir", None, "Checkpoints, config.json, vocab.txt, summaries.")
flags.DEFINE_enum("preset", "small", sorted(config_lib.PRESETS), "Configuration preset (a "
                  "resumed run: the checkpoint's unless given).")
flags.DEFINE_enum("strategy", "default", distribute_utils.STRATEGIES, "tf.distribute strategy.")
flags.DEFINE_string("tpu", "", "TPU name or address, with --strategy=tpu.")
flags.DEFINE_integer("num_cpu_devices", 0, "With --strategy=mirrored and no GPU: logical CPUs.")
flags.DEFINE_string("glove", None, "GloVe text file initialising unigram embeddings.")
flags.DEFINE_integer("vocab_size", None, "GloVe words kept (most frequent first; 0: all).")
flags.DEFINE_integer("train_steps", None, "Override the preset's train_steps.")
flags.DEFINE_integer("batch_size", None, "Override the preset's global batch size.")
flags.DEFINE_float("learning_rate", None, "Override the preset's learning rate.")
flags.DEFINE_integer("eval_every", None, "Override steps between evaluations/checkpoints.")
flags.DEFINE_bool("logq_correction", None, "Subtract log q(entity) from the in-batch logits, "
                  "q the entity's share of the training golds (sampling-bias correction; "
                  "TrainConfig.logq_correction).")
flags.DEFINE_string("link_sources", None, "Comma-separated link sources whose mentions are "
                    "trained on (prose, table, template, caption, gallery; e.g. "
                    "'prose,template,caption,gallery' leaves out table cells); '': all "
                    "(TrainConfig.link_sources).")
flags.DEFINE_bool("share_span_title_encoder", None, "One encoder for span and title.")
flags.DEFINE_bool("char_ngrams", None, "Character trigrams in the span and title bags.")
flags.DEFINE_bool("zero_init_buckets", None, "Hash-bucket rows start at zero (untouched ones "
                  "stay zero) instead of random.")
flags.DEFINE_integer("context_match_dim", None, "Width of the lexical context-description "
                     "channel (layers.ContextMatchEncoder); 0 leaves it out.")
flags.DEFINE_float("context_match_weight", None, "Mixing weight of that channel, in (0, 1).")
flags.DEFINE_integer("name_match_dim", None, "Width of the lexical name channel (character "
                     "trigrams of span and title; 0: none).")
flags.DEFINE_float("name_match_weight", None, "Mixing weight of the name channel, in (0, 1).")
flags.DEFINE_float("name_match_alias_weight", None, "Weight of the entity's aliases beside its "
                   "title in the name channel (0: title only).")
flags.DEFINE_multi_string("train_dataset", [], "Entity-linking dataset whose linked mentions "
                          "are trained on as their own split, FORMAT:PATH as evaluate's "
                          "--dataset (e.g. jsonl:aida_train.jsonl); repeatable.")
flags.DEFINE_float("train_dataset_fraction", 0.5, "With --train_dataset: the fraction of "
                   "steps whose batch comes from those mentions (1: them alone, a "
                   "fine-tuning stage), in (0, 1].")
flags.DEFINE_float("train_redirects_fraction", 0.0, "Fraction of steps whose batch is "
                   "redirect -> entity pairs of the KB as mentions without context "
                   "(kb.redirect_examples); 0: none (at 0.25 it lowered recall@1 by 5-7 points, "
                   "README). With --train_dataset_fraction, sums to at most 1.")
flags.DEFINE_integer("train_redirects_max", 200_000, "With --train_redirects_fraction: the "
                     "most redirect pairs drawn from the KB (uniformly, seeded).", lower_bound=1)
flags.DEFINE_bool("train_redirects_hold_out_span", True, "With --train_redirects_fraction: "
                  "leave the redirect used as the span out of its entity's aliases (the name "
                  "channel then cannot copy it); false keeps them all, as at inference.")
flags.DEFINE_string("hard_negatives", None, "Directory of a mining round's output "
                    "(WS/negatives/round_N): train with the softmax and logistic tasks.")
flags.DEFINE_integer("hard_negatives_max_gold_rank", -1, "With --hard_negatives: train only "
                     "on the pairs of mentions whose gold entity ranked at most this (0-based) "
                     "among the k entities searched when they were mined (k - 1 = 9: leave out "
                     "the mentions whose gold was not found, all of whose k neighbours would "
                     "be negatives); -1: every pair, the paper's rule.", lower_bound=-1)
flags.DEFINE_bool("hard_negatives_described_only", False, "With --hard_negatives: train only "
                  "on the pairs whose negative entity has a description (not a title-only "
                  "entry); false: every pair, the paper's rule.")
flags.DEFINE_integer("hard_negatives_max_negative_golds", -1, "With --hard_negatives: train "
                     "only on the pairs whose negative entity is the gold of at most this many "
                     "training mentions (0: entities no training mention links to, which "
                     "in-batch negatives never show); -1: every pair, the paper's rule.",
                     lower_bound=-1)
flags.DEFINE_float("hard_negative_weight", 1.0, "With --hard_negatives: weight of the logistic "
                   "task beside the softmax task (1: the paper's equal weights).")


MODEL_FLAGS = ("share_span_title_encoder", "char_ngrams", "zero_init_buckets",
               "context_match_dim", "context_match_weight", "name_match_dim",
               "name_match_weight", "name_match_alias_weight")
TRAIN_FLAGS = ("train_steps", "batch_size", "learning_rate", "eval_every", "logq_correction",
               "link_sources")


def config_from_flags() -> config_lib.ExperimentConfig:
  """The run's config: on resume the checkpoint's (flags given over it, checked by the
  Trainer), else --preset's with the flags given over it."""
  from dense_entity.training import provenance  # pylint: disable=g-import-not-at-top
  return provenance.run_config(
      FLAGS.model_dir, FLAGS.preset if FLAGS["preset"].present else None,
      model_settings={name: getattr(FLAGS, name) for name in MODEL_FLAGS},
      train_settings={name: getattr(FLAGS, name) for name in TRAIN_FLAGS},
      glove=FLAGS.glove, vocab_size=FLAGS.vocab_size)


def hard_negative_files(negatives_dir: Optional[str]) -> Tuple[List[str], int]:
  """The pair files and round number of a finished mining round (`--hard_negatives`), or
  ([], 0) when none is given.

  Raises:
    FileNotFoundError: naming the directory, when it holds no finished mining round
      (no MANIFEST.json, or no hard_negatives-* files).
  """
  if not negatives_dir:
    return [], 0
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  return records.mining_round_files(negatives_dir, "--hard_negatives")


def main(argv):
  del argv
  # TensorFlow is imported here, not at the top: `--help` does not load it.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.training import provenance  # pylint: disable=g-import-not-at-top
  from dense_entity.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  logging.getLogger().setLevel(logging.INFO)
  # Every input and setting is checked before the Trainer writes into --model_dir.
  if tf.io.gfile.exists(FLAGS.model_dir) and not tf.io.gfile.isdir(FLAGS.model_dir):
    raise NotADirectoryError(f"--model_dir={FLAGS.model_dir} is a file, not a directory")
  # A model_dir with config.json is this stage's (resumed); another stage's output or other
  # files are refused (fileio.check_output_dir).
  from dense_entity.common import fileio  # pylint: disable=g-import-not-at-top
  fileio.check_output_dir(FLAGS.model_dir, fileio.MODEL, "--model_dir")
  records.require_extraction(FLAGS.extract_dir)
  negative_files, mining_round = hard_negative_files(FLAGS.hard_negatives)
  for name in ("hard_negatives_max_gold_rank", "hard_negatives_described_only",
               "hard_negatives_max_negative_golds", "hard_negative_weight"):
    if FLAGS[name].present and not FLAGS.hard_negatives:
      raise ValueError(f"--{name} is given without --hard_negatives")
  if not FLAGS.hard_negative_weight > 0:
    raise ValueError(f"--hard_negative_weight={FLAGS.hard_negative_weight}: must be positive")
  cfg = config_from_flags()
  config_lib.validate(cfg)
  # name -> (examples, fraction, stage record) of each labeled split.
  splits = {}
  fraction = FLAGS.train_dataset_fraction if FLAGS.train_dataset else 0.0
  if FLAGS.train_dataset and not 0.0 < fraction <= 1.0:
    raise ValueError(f"--train_dataset_fraction must be in (0, 1], got {fraction}")
  if not 0.0 <= FLAGS.train_redirects_fraction <= 1.0:
    raise ValueError(f"--train_redirects_fraction must be in [0, 1], got "
                     f"{FLAGS.train_redirects_fraction}")
  if fraction + FLAGS.train_redirects_fraction > 1.0 + 1e-9:
    raise ValueError(f"--train_dataset_fraction={fraction} and --train_redirects_fraction="
                     f"{FLAGS.train_redirects_fraction} sum over 1")
  if FLAGS.train_dataset:
    from dense_entity.evaluation import labeled_mentions  # pylint: disable=g-import-not-at-top
    labeled, labeled_stats = labeled_mentions.load(FLAGS.train_dataset, FLAGS.extract_dir)
    print(json.dumps({"labeled_mentions": labeled_stats}, indent=2))
    splits["labeled"] = (labeled, fraction, {
        "datasets": list(FLAGS.train_dataset), "fraction": fraction, "counts": labeled_stats})
  if FLAGS.train_redirects_fraction > 0:
    from dense_entity.kb import redirect_examples  # pylint: disable=g-import-not-at-top
    pairs, pair_stats = redirect_examples.load(
        FLAGS.extract_dir, FLAGS.train_redirects_max, seed=cfg.train.seed,
        hold_out_span=FLAGS.train_redirects_hold_out_span)
    print(json.dumps({"redirect_examples": pair_stats}, indent=2))
    splits["redirects"] = (pairs, FLAGS.train_redirects_fraction, {
        "fraction": FLAGS.train_redirects_fraction,
        "max_pairs": FLAGS.train_redirects_max,
        "hold_out_span": FLAGS.train_redirects_hold_out_span, "counts": pair_stats})
  for name, (examples, _, _) in splits.items():  # before the Trainer writes --model_dir
    trainer_lib.check_labeled_split(examples, name, cfg.train.batch_size)
  strategy = distribute_utils.get_strategy(FLAGS.strategy, FLAGS.tpu, FLAGS.num_cpu_devices)
  trainer = trainer_lib.Trainer(cfg, FLAGS.extract_dir, FLAGS.model_dir, strategy)
  if negative_files:
    trainer.set_hard_negatives(negative_files, mining_round,
                               max_gold_rank=FLAGS.hard_negatives_max_gold_rank,
                               described_only=FLAGS.hard_negatives_described_only,
                               max_negative_golds=FLAGS.hard_negatives_max_negative_golds,
                               weight=FLAGS.hard_negative_weight)
  start = int(trainer.step.numpy())
  for name, (examples, split_fraction, _) in splits.items():
    trainer.set_labeled_mentions(examples, split_fraction, name=name)
  metrics = trainer.train()
  for name, (_, _, stage) in splits.items():
    provenance.record_labeled_mentions(FLAGS.model_dir, {
        **stage, "split": name, "from_step": start, "to_step": int(trainer.step.numpy())})
  print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
  flags.mark_flags_as_required(["extract_dir", "model_dir"])
  entry.run(main, "python -m dense_entity.train")
