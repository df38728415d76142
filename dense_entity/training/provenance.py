"""What a model_dir's checkpoint was trained with, and the checks that a resumed run agrees.

A training run writes, beside `config.json` (preset, model dimensions, training settings;
config_lib.save), `trained_on.json` (TRAINED_ON_FILE): the identity of the extraction it trains
on (`extraction_identity`: a fingerprint of its record files' names and sizes, its counts and
held-out fraction), of the GloVe file that initialised the vocabulary's rows, if any, and the
stages trained on entity-linking datasets' mentions (`record_labeled_mentions`).

A run that resumes the checkpoint must build the same model from the same data: the same
preset and model settings (dimensions, lexical channels), optimizer, vocabulary and GloVe file,
and the same extraction, whose entities gave the lexical channels' IDF weights kept in the
checkpoint. `check_resume` refuses anything else with a one-line ValueError that names the
setting (flag) and both values. What a resumed run may change (CHANGEABLE_TRAIN_SETTINGS: step
budget, learning rate, batch size, evaluation interval, ...; and the hard negatives of a mining
round) it does change: `resumed_config`.

`run_config` builds the config of a run from what its command line gave (None: not given): on
resume the checkpoint's config with the given settings over it (so flags not repeated keep the
checkpoint's values), else the preset's.
"""

import dataclasses
import hashlib
import json
import logging
import os
from typing import Any, Mapping, Optional

import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import config as config_lib

TRAINED_ON_FILE = "trained_on.json"
DEFAULT_PRESET = "small"
# Training settings a resumed run may change; the optimizer (its slot variables are in the
# checkpoint) may not.
CHANGEABLE_TRAIN_SETTINGS = ("batch_size", "learning_rate", "momentum", "train_steps",
                             "eval_every", "eval_batches", "shuffle_buffer", "seed",
                             "logq_correction", "link_sources")
_RECORD_PREFIXES = (schema.ENTITIES_PREFIX, schema.TRAIN_MENTIONS_PREFIX,
                    schema.HELDOUT_MENTIONS_PREFIX)


def extraction_identity(extract_dir: str) -> dict:
  """The identity of a finished extraction, cheap at any size (no record is read).

  Returns:
    {"fingerprint": 16 hex digits of sha256 over the names and sizes in bytes of its entity
     and mention record files, the MANIFEST's counts and held-out fraction; "extract_dir": its
     absolute path; "entities", "mentions_train": the MANIFEST's counts (None when absent)}.
    The extraction writes the same records byte for byte from the same input, so re-running
    it keeps the fingerprint; another input, split or parser gives another.

  Raises:
    FileNotFoundError: when `extract_dir` has no MANIFEST.json.
  """
  manifest = records.require_extraction(extract_dir)
  files = {}
  for prefix in _RECORD_PREFIXES:
    for path in sorted(tf.io.gfile.glob(os.path.join(extract_dir, prefix + "-*"))):
      files[os.path.basename(path)] = tf.io.gfile.stat(path).length
  counts = manifest.get("counts", {})
  content = {"files": files, "counts": counts,
             "heldout_fraction": manifest.get("heldout_fraction")}
  digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()
  return {"fingerprint": digest[:16], "extract_dir": os.path.abspath(extract_dir),
          "entities": counts.get(schema.ENTITIES_PREFIX),
          "mentions_train": counts.get(schema.TRAIN_MENTIONS_PREFIX)}


def glove_identity(path: Optional[str]) -> Optional[dict]:
  """{"path": absolute path, "bytes": size} of a GloVe file; None without one."""
  if not path:
    return None
  return {"path": os.path.abspath(path),
          "bytes": os.path.getsize(path) if os.path.exists(path) else None}


def _same_glove(saved: dict, given: dict) -> bool:
  """The same file: the same path, or the same name and size (a copy or a moved file)."""
  if saved["path"] == given["path"]:
    return True
  if os.path.exists(saved["path"]) and os.path.exists(given["path"]):
    return os.path.samefile(saved["path"], given["path"])
  return (os.path.basename(saved["path"]) == os.path.basename(given["path"])
          and saved["bytes"] == given["bytes"])


def read_trained_on(model_dir: str) -> Optional[dict]:
  """The model_dir's `trained_on.json`; None when a run before this record was written made it."""
  path = os.path.join(model_dir, TRAINED_ON_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def write_trained_on(model_dir: str, extraction: dict, glove_path: Optional[str]) -> None:
  """Writes `model_dir/trained_on.json` atomically (temp file + rename)."""
  path = os.path.join(model_dir, TRAINED_ON_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    json.dump({"extraction": extraction, "glove": glove_identity(glove_path)}, f, indent=2,
              sort_keys=True)
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def record_labeled_mentions(model_dir: str, stage: Mapping[str, Any]) -> None:
  """Appends a training stage on a labeled split to the model_dir's `trained_on.json` under
  'labeled_mentions' (split: 'labeled' for entity-linking datasets' mentions, with their
  datasets, or 'redirects' for the KB's redirect pairs; fraction, steps, counts), so a model
  tuned on them is told apart from one trained on Wikipedia anchors alone. Written
  atomically."""
  record = read_trained_on(model_dir) or {}
  record.setdefault("labeled_mentions", []).append(dict(stage))
  path = os.path.join(model_dir, TRAINED_ON_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    json.dump(record, f, indent=2, sort_keys=True)
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def _describe(identity: dict) -> str:
  counts = [f"{identity[key]} {label}" for key, label in
            (("entities", "entities"), ("mentions_train", "training mentions"))
            if identity.get(key) is not None]
  return f"{identity['extract_dir']} (fingerprint {identity['fingerprint']}" + "".join(
      f", {c}" for c in counts) + ")"


def check_resume(model_dir: str, saved: config_lib.ExperimentConfig,
                 given: config_lib.ExperimentConfig, extraction: dict) -> None:
  """Refuses to resume the checkpoint in `model_dir` with another model or extraction.

  Args:
    model_dir: the run's directory (config.json present).
    saved: its config.json.
    given: the config this run asks for.
    extraction: `extraction_identity` of this run's extraction.

  Raises:
    ValueError: one line naming the first setting (as its flag) that differs, with the
      checkpoint's value and this run's: the preset, a model setting, the optimizer, the
      vocabulary size, the GloVe file, or the extraction (--extract_dir). Nothing is written.
  """
  where = f"the checkpoint in {model_dir}"
  advice = "; a resumed run keeps the model and its data: drop the flag, or train into a new "\
           "--model_dir"
  if saved.preset and given.preset and saved.preset != given.preset:
    raise ValueError(f"--preset: {where} was trained with preset {saved.preset!r}; this run "
                     f"asks for {given.preset!r}{advice}")
  for field in dataclasses.fields(config_lib.ModelConfig):
    old, new = getattr(saved.model, field.name), getattr(given.model, field.name)
    if old != new:
      raise ValueError(f"--{field.name}: {where} was trained with {field.name}={old!r}; this "
                       f"run asks for {new!r} (by the flag or the preset){advice}")
  if saved.train.optimizer != given.train.optimizer:
    raise ValueError(f"--preset: {where} was trained with the {saved.train.optimizer!r} "
                     f"optimizer (its slots are in the checkpoint); this run asks for "
                     f"{given.train.optimizer!r}{advice}")
  if saved.vocab_size != given.vocab_size:
    raise ValueError(f"--vocab_size: {where} was trained with vocab_size={saved.vocab_size}; "
                     f"this run asks for {given.vocab_size}{advice}")
  trained_on = read_trained_on(model_dir) or {}
  if given.glove_path:
    old_glove, new_glove = trained_on.get("glove"), glove_identity(given.glove_path)
    if old_glove is None and (trained_on or not saved.glove_path):
      raise ValueError(f"--glove: {where} was trained without GloVe vectors; this run asks "
                       f"for {given.glove_path}{advice}")
    if old_glove is None:
      old_glove = glove_identity(saved.glove_path)
    if not _same_glove(old_glove, new_glove):
      raise ValueError(f"--glove: {where} was trained with {old_glove['path']} "
                       f"({old_glove['bytes']} bytes); this run asks for {new_glove['path']} "
                       f"({new_glove['bytes']} bytes){advice}")
  old_extraction = trained_on.get("extraction")
  if old_extraction and old_extraction["fingerprint"] != extraction["fingerprint"]:
    now = " as it is now" if old_extraction["extract_dir"] == extraction["extract_dir"] else ""
    raise ValueError(f"--extract_dir: {where} was trained on {_describe(old_extraction)}, not "
                     f"on {_describe(extraction)}{now} (its IDF weights and training mentions "
                     "come from the extraction); resume with that extraction, or train into a "
                     "new --model_dir")
  if not old_extraction:
    logging.warning("%s has no %s (written by an older version): cannot check that it was "
                    "trained on %s; recording that extraction now", model_dir, TRAINED_ON_FILE,
                    extraction["extract_dir"])


def resumed_config(saved: config_lib.ExperimentConfig,
                   given: config_lib.ExperimentConfig) -> config_lib.ExperimentConfig:
  """The checkpoint's config with `given`'s CHANGEABLE_TRAIN_SETTINGS (after check_resume)."""
  cfg = config_lib.from_dict(dataclasses.asdict(saved))
  for name in CHANGEABLE_TRAIN_SETTINGS:
    setattr(cfg.train, name, getattr(given.train, name))
  return cfg


def run_config(model_dir: Optional[str], preset: Optional[str] = None,
               model_settings: Optional[Mapping[str, Any]] = None,
               train_settings: Optional[Mapping[str, Any]] = None,
               glove: Optional[str] = None,
               vocab_size: Optional[int] = None) -> config_lib.ExperimentConfig:
  """The config a training run into `model_dir` asks for, from its command line.

  Args:
    model_dir: the run's directory; when it holds a config.json the run resumes, and settings
      not given keep the checkpoint's values.
    preset: config_lib.PRESETS name, or None (the checkpoint's on resume, else DEFAULT_PRESET).
    model_settings: config_lib.ModelConfig fields to set; None values are not given.
    train_settings: config_lib.TrainConfig fields to set; None values are not given.
    glove: GloVe text file (None: not given).
    vocab_size: GloVe words kept (None: not given).

  Returns:
    The config; the Trainer checks it against the checkpoint (check_resume).

  Raises:
    ValueError: for an unknown preset or setting name.
  """
  saved = None
  if model_dir and tf.io.gfile.exists(os.path.join(model_dir, config_lib.CONFIG_FILE)):
    saved = config_lib.load(model_dir)
  if saved is not None and (preset is None or preset == saved.preset):
    cfg = saved
  else:
    cfg = config_lib.get_preset(preset or DEFAULT_PRESET)
  for part, settings in ((cfg.model, model_settings), (cfg.train, train_settings)):
    for name, value in (settings or {}).items():
      if not hasattr(part, name):
        raise ValueError(f"unknown {type(part).__name__} setting {name!r}")
      if value is not None:
        setattr(part, name, value)
  if glove is not None:
    cfg.glove_path = glove
  if vocab_size is not None:
    cfg.vocab_size = vocab_size
  return cfg

