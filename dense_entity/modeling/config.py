"""Typed model and training configs with the paper preset and a small CPU preset.

A config is written to `model_dir/config.json` by training and read back by export, so an
exported model is rebuilt with exactly the dimensions it was trained with. TensorFlow is
imported only to read and write it (tf.io.gfile), so the entry points' flags can name the
presets without loading TensorFlow (`--help`).
"""

import dataclasses
import json
import os
from typing import Optional, Tuple

from dense_entity.kb import schema


@dataclasses.dataclass
class ModelConfig:
  """Dual encoder dimensions (Gillick et al. 2019, section 4.1).

  Attributes:
    num_buckets: hash buckets for out-of-vocabulary unigrams and all bigrams (paper: 5M).
    embedding_dim: width of unigram and bigram embeddings (paper: 300); a text feature is the
      concatenation of its averaged unigram and averaged bigram embeddings, 2 * embedding_dim.
    num_category_buckets: hash buckets for category names.
    category_dim: width of category embeddings.
    hidden_dim: width of the feed-forward layers of the compound encoders.
    encoding_dim: width of the final mention and entity encodings.
    initial_scale: initial value of the learned cosine scale `a` of the softmax task.
    share_span_title_encoder: one feed-forward layer for the mention span and the entity
      title (not in the paper, which has one per feature).
    context_match_dim: width of the lexical context-description channel appended to both
      encodings (layers.ContextMatchEncoder; not in the paper); 0 leaves it out. Encodings are
      then `encoding_dim + context_match_dim` wide.
    context_match_weight: mixing weight w of that channel, in (0, 1): scores are
      `(1 - w) * cos(learned) + w * cos(lexical)`.
    char_ngrams: the mention span and the entity title also get a bag of hashed character
      trigrams (featurizer.TextFeaturizer.char_ngram_ids; not in the paper): names never seen
      in training share trigrams with names that were, instead of being hash buckets no
      training step touched.
    name_match_dim: width of a lexical name channel (not in the paper; 0 leaves it out): the
      character trigrams of the mention span and of the entity title as IDF-weighted hashed
      vectors (layers.ContextMatchEncoder over trigrams, IDF over the KB's titles), so one
      search also ranks by a TF-IDF cosine of the names, as a character n-gram name matcher
      does; it matches names never seen in training and their spelling variants.
    name_match_weight: its mixing weight, in (0, 1); with both channels the learned part
      weighs 1 - context_match_weight - name_match_weight (> 0).
    name_match_alias_weight: weight of the entity's aliases (redirect titles) in its name
      vector: unit(title trigrams) + this * unit(alias trigrams), normalised (0: title only;
      models.EntityEncoder).
    zero_init_buckets: hash-bucket rows of the shared table (out-of-vocabulary unigrams, all
      bigrams, character trigrams) start at zero instead of random (not in the paper). A
      bucket no training example touches then stays zero, so a name made only of words never
      seen in training adds nothing to its encoding instead of a random vector that can
      outrank the gold for any mention (at 4.5M title-only entities most titles have such
      words).
  """
  num_buckets: int = 5_000_000
  embedding_dim: int = 300
  num_category_buckets: int = 1_000_000
  category_dim: int = 300
  hidden_dim: int = 300
  encoding_dim: int = 300
  initial_scale: float = 10.0
  share_span_title_encoder: bool = False
  context_match_dim: int = 0
  context_match_weight: float = 0.25
  char_ngrams: bool = False
  name_match_dim: int = 0
  name_match_weight: float = 0.25
  name_match_alias_weight: float = 0.5
  zero_init_buckets: bool = False


@dataclasses.dataclass
class TrainConfig:
  """Optimization settings (paper, section 4.2: batch 100, SGD momentum 0.9, lr 0.01).

  Attributes:
    batch_size: global batch size; in-batch negatives are taken over the global batch.
    optimizer: 'sgd' (momentum SGD, the paper's) or 'adam'.
    learning_rate: learning rate of the optimizer.
    momentum: momentum of 'sgd'.
    train_steps: total optimizer steps of a training run.
    eval_every: steps between held-out evaluations and checkpoints.
    eval_batches: held-out batches used for in-batch recall@1.
    shuffle_buffer: examples in the tf.data shuffle buffer (0: no shuffling, file order).
    seed: seed of initialisation and shuffling.
    logq_correction: subtract log q(e) from every in-batch logit of the softmax task, q(e) the
      probability that a training example's gold is e (sampling-bias correction, Yi et al.,
      RecSys 2019; not in the paper): in-batch negatives are drawn in proportion to how often
      an entity is a gold, so without it frequent entities are pushed away from every mention.
    link_sources: comma-separated schema.LINK_SOURCES whose extraction mentions are trained
      on ('prose,template,caption,gallery' leaves out table cells, whose sentence is the cell
      alone); '' trains on all. Held-out mentions, the alias table and labeled splits are not
      filtered. Not in the paper, which trains on every anchor.
  """
  batch_size: int = 100
  optimizer: str = "sgd"
  learning_rate: float = 0.01
  momentum: float = 0.9
  train_steps: int = 1_000_000
  eval_every: int = 5_000
  eval_batches: int = 20
  shuffle_buffer: int = 100_000
  seed: int = 1
  logq_correction: bool = False
  link_sources: str = ""


@dataclasses.dataclass
class ExperimentConfig:
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
  # Optional GloVe text file (`word v1 ... vd` per line) initialising unigram embeddings.
  glove_path: Optional[str] = None
  # Words of the vocabulary taken from GloVe (most frequent first); 0 means all.
  vocab_size: int = 0
  # The PRESETS name this config started from (None: built by hand, or saved before presets
  # were recorded); a resumed run must ask for the same one.
  preset: Optional[str] = None


PRESETS = {
    # The paper's configuration (section 4): 5M buckets x 300-d, batch 100, SGD 0.9 / 0.01.
    "paper": ExperimentConfig(),
    # Runs on 2 CPU cores in minutes: small tables, Adam for few steps, and the lexical
    # context-description channel (not in the paper; README, "Context").
    "small": ExperimentConfig(
        model=ModelConfig(num_buckets=1 << 18, embedding_dim=64, num_category_buckets=1 << 14,
                          category_dim=32, hidden_dim=128, encoding_dim=64,
                          context_match_dim=128, context_match_weight=0.25),
        train=TrainConfig(batch_size=100, optimizer="adam", learning_rate=2e-3,
                          train_steps=2000, eval_every=500, eval_batches=10,
                          shuffle_buffer=50_000)),
    # For unit tests: tiny and fast.
    "tiny": ExperimentConfig(
        model=ModelConfig(num_buckets=1 << 12, embedding_dim=8, num_category_buckets=64,
                          category_dim=4, hidden_dim=16, encoding_dim=8),
        train=TrainConfig(batch_size=8, optimizer="adam", learning_rate=1e-2, train_steps=20,
                          eval_every=10, eval_batches=2, shuffle_buffer=100)),
}


def get_preset(name: str) -> ExperimentConfig:
  """Returns a deep copy of the named preset; raises ValueError for unknown names."""
  if name not in PRESETS:
    raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
  cfg = from_dict(dataclasses.asdict(PRESETS[name]))
  cfg.preset = name
  return cfg


def from_dict(d: dict) -> ExperimentConfig:
  d = dict(d)
  model = ModelConfig(**d.pop("model", {}))
  train = TrainConfig(**d.pop("train", {}))
  return ExperimentConfig(model=model, train=train, **d)


CONFIG_FILE = "config.json"


def parse_link_sources(value: str, what: str = "link_sources") -> Tuple[str, ...]:
  """'prose,template' -> ('prose', 'template'); '' -> () (all sources).

  Raises:
    ValueError: for a name not in schema.LINK_SOURCES, naming it and `what` (the setting or
      flag it came from).
  """
  names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
  unknown = [n for n in names if n not in schema.LINK_SOURCES]
  if unknown:
    raise ValueError(f"{what}: {unknown} unknown; known: {', '.join(schema.LINK_SOURCES)}")
  return names


def link_sources(train_config: TrainConfig) -> Tuple[str, ...]:
  """TrainConfig.link_sources as names (parse_link_sources); () trains on all sources."""
  return parse_link_sources(train_config.link_sources)


def validate(config: ExperimentConfig) -> None:
  """Raises ValueError naming the first setting that cannot build a model or train it."""
  m = config.model
  if m.context_match_dim < 0:
    raise ValueError(f"context_match_dim must be >= 0 (0: no lexical channel), got "
                     f"{m.context_match_dim}")
  if m.context_match_dim and not 0.0 < m.context_match_weight < 1.0:
    raise ValueError(f"context_match_weight must be in (0, 1), got {m.context_match_weight}")
  if m.name_match_dim < 0:
    raise ValueError(f"name_match_dim must be >= 0 (0: no name channel), got "
                     f"{m.name_match_dim}")
  if m.name_match_dim and not 0.0 < m.name_match_weight < 1.0:
    raise ValueError(f"name_match_weight must be in (0, 1), got {m.name_match_weight}")
  if m.name_match_alias_weight < 0:
    raise ValueError(f"name_match_alias_weight must be >= 0, got {m.name_match_alias_weight}")
  lexical = ((m.context_match_weight if m.context_match_dim else 0.0)
             + (m.name_match_weight if m.name_match_dim else 0.0))
  if lexical >= 1.0:
    raise ValueError(f"the lexical channels' weights sum to {lexical}; the learned part needs "
                     "a weight > 0")
  t = config.train
  if t.batch_size == 1:  # (below 1: the loop below)
    raise ValueError("batch_size must be >= 2: the softmax task's negatives are the other "
                     "entities of the batch (paper 4.2), so a batch of 1 has none and trains "
                     "nothing (loss 0)")
  for name in ("batch_size", "eval_every", "eval_batches"):
    if getattr(t, name) < 1:
      raise ValueError(f"{name} must be >= 1, got {getattr(t, name)}")
  for name in ("train_steps", "shuffle_buffer"):  # shuffle_buffer 0: file order
    if getattr(t, name) < 0:
      raise ValueError(f"{name} must be >= 0, got {getattr(t, name)}")
  if not t.learning_rate > 0.0:  # also refuses NaN
    raise ValueError(f"learning_rate must be > 0, got {t.learning_rate}")
  if not 0.0 <= t.momentum < 1.0:
    raise ValueError(f"momentum must be in [0, 1), got {t.momentum}")
  if t.optimizer not in ("sgd", "adam"):
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {t.optimizer!r}")
  link_sources(t)


def save(config: ExperimentConfig, model_dir: str) -> str:
  """Writes `model_dir/config.json` atomically; returns its path.

  Raises:
    ValueError: from `validate`, before anything is written.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  validate(config)
  tf.io.gfile.makedirs(model_dir)
  path = os.path.join(model_dir, CONFIG_FILE)
  tmp = path + ".tmp"
  with tf.io.gfile.GFile(tmp, "w") as f:
    json.dump(dataclasses.asdict(config), f, indent=2, sort_keys=True)
  tf.io.gfile.rename(tmp, path, overwrite=True)
  return path


def load(model_dir: str) -> ExperimentConfig:
  """Reads `model_dir/config.json`; raises FileNotFoundError naming the file when absent."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = os.path.join(model_dir, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{path}: no training config here; is {model_dir} a model_dir "
                            "written by dense_entity.train?")
  with tf.io.gfile.GFile(path) as f:
    return from_dict(json.load(f))
