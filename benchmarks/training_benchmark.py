"""Training throughput benchmark: examples/s of the dual encoder's training step.

Issue 4, item 5. Measures, in one run and on the same mentions:

- ours: dense_entity.trainer.Trainer (the product's loop: in-batch softmax over the global
  batch under the chosen tf.distribute strategy, LazyOptimizer updating only the embedding rows
  of the batch), the softmax task only (round 0);
- keras: the same model, loss and data with a stock Keras optimizer of the same kind (its
  update touches every row of the embedding table each step), on one device.

Printed per method: steps timed, ms/step, examples/s (global batch x steps / s), and the ratio
ours / keras; plus the preset's table size and the peak RSS of the process. Warm-up steps
(tracing, first batches) are run and excluded; checkpoints and held-out evaluation are excluded
too (timed from the end of the first measured chunk of 50 steps to the end of the last one).

CPU (the small preset, the default):
  python -m benchmarks.training_benchmark
GPU, the paper preset (5M x 300 table, batch 100, momentum SGD): on a machine with a GPU and
`pip install -e . "tensorflow[and-cuda]==2.20.*"`, run benchmarks/gpu_training_benchmark.sh.

Input: --extract_dir (a finished extraction), or by default gensim's packaged Wikipedia sample
extracted into a temporary directory first (about 20 s).
"""

import os
import resource
import shutil
import tempfile
import time
from typing import Dict

from absl import app
from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS
_CHUNK = 50  # trainer.Trainer runs this many steps per tf.function call.



def define_flags():
  flags.DEFINE_string("extract_dir", None, "Finished extraction; default: extract gensim's "
                      "packaged sample into a temporary directory.")
  flags.DEFINE_string("preset", "small", "Configuration preset (dense_entity.config).")
  flags.DEFINE_enum("strategy", "default", ["default", "mirrored"], "tf.distribute strategy "
                    "of ours (mirrored: all GPUs, or --num_cpu_devices logical CPUs).")
  flags.DEFINE_integer("num_cpu_devices", 0, "With --strategy=mirrored and no GPU.")
  flags.DEFINE_integer("batch_size", None, "Override the preset's global batch size.")
  flags.DEFINE_integer("steps", 300, "Timed steps per method (a multiple of 50).")
  flags.DEFINE_integer("warmup_steps", 50, "Untimed steps first (a multiple of 50).")
  flags.DEFINE_bool("keras_baseline", True, "Also time a stock Keras optimizer.")


def _peak_rss_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def time_ours(cfg, extract_dir: str, strategy, steps: int, warmup: int) -> Dict[str, float]:
  """Times Trainer.train over `steps` steps after `warmup` steps; returns seconds and steps."""
  from dense_entity.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  model_dir = tempfile.mkdtemp(prefix="train-bench-")
  try:
    cfg.train.train_steps = warmup + steps
    cfg.train.eval_every = warmup + steps
    trainer = trainer_lib.Trainer(cfg, extract_dir, model_dir, strategy)
    stamps = []
    trainer.train(lambda n, m: stamps.append((int(m["step"]), time.perf_counter())))
    # Chunks end at steps 50, 100, ...; the last chunk also evaluates and checkpoints.
    timed = [(s, t) for s, t in stamps if warmup <= s < warmup + steps]
    (s0, t0), (s1, t1) = timed[0], timed[-1]
    return {"steps": s1 - s0, "seconds": t1 - t0}
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


def time_keras(cfg, extract_dir: str, steps: int, warmup: int) -> Dict[str, float]:
  """The same model and in-batch softmax loss with a stock Keras optimizer, one device."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.modeling import models  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  from dense_entity.modeling import tasks  # pylint: disable=g-import-not-at-top

  tc = cfg.train
  model = models.DualEncoder(cfg.model)
  if tc.optimizer == "adam":
    optimizer = keras.optimizers.Adam(tc.learning_rate)
  else:
    optimizer = keras.optimizers.SGD(tc.learning_rate, momentum=tc.momentum)
  variables = [v for v in model.trainable_variables if isinstance(v, keras.Variable)]
  optimizer.build(variables)
  files = records.record_files(extract_dir, schema.TRAIN_MENTIONS_PREFIX)
  iterator = iter(records.mention_dataset(files, tc.batch_size, shuffle_buffer=tc.shuffle_buffer,
                                       repeat=True, drop_remainder=True))

  def step(batch):
    with tf.GradientTape() as tape:
      mentions = model.mention_encoder(records.mention_features(batch))
      entities = model.entity_encoder(records.entity_features(batch))
      gold = batch[schema.ENTITY_TITLE]
      logits = tasks.in_batch_logits(mentions, entities, model.scale,
                                     tasks.duplicate_entity_mask(gold, gold))
      labels = tf.range(tf.shape(gold)[0])
      loss = tf.reduce_mean(tasks.in_batch_softmax_loss(logits, labels))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  @tf.function
  def run(n):
    loss = tf.constant(0.0)
    for _ in tf.range(n):
      loss = step(next(iterator))
    return loss

  run(tf.constant(warmup)).numpy()
  t0 = time.perf_counter()
  run(tf.constant(steps)).numpy()
  return {"steps": steps, "seconds": time.perf_counter() - t0}


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from dense_entity.modeling import config as config_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.training import distribute_utils  # pylint: disable=g-import-not-at-top
  if FLAGS.steps % _CHUNK or FLAGS.warmup_steps % _CHUNK or FLAGS.steps < 2 * _CHUNK:
    raise app.UsageError(f"--steps (>= {2 * _CHUNK}) and --warmup_steps must be multiples "
                         f"of {_CHUNK}")
  strategy = distribute_utils.get_strategy(FLAGS.strategy, None, FLAGS.num_cpu_devices)
  tmp = None
  extract_dir = FLAGS.extract_dir
  if extract_dir is None:
    from beam_pipelines.dumps import samples  # pylint: disable=g-import-not-at-top
    from beam_pipelines.pipelines import extraction  # pylint: disable=g-import-not-at-top
    tmp = tempfile.mkdtemp(prefix="train-bench-extract-")
    extract_dir = os.path.join(tmp, "extract")
    print(f"extracting {samples.gensim_sample_path()} into {extract_dir}", flush=True)
    extraction.run([samples.gensim_sample_path()], extract_dir, heldout_fraction=0.1)
  try:
    def cfg():
      c = config_lib.get_preset(FLAGS.preset)
      if FLAGS.batch_size:
        c.train.batch_size = FLAGS.batch_size
      return c
    c = cfg()
    m = c.model
    rows = m.num_buckets
    print(f"\npreset {FLAGS.preset}: {rows:,} embedding rows x {m.embedding_dim} "
          f"({rows * m.embedding_dim * 4 / 2**30:.2f} GiB float32), hidden {m.hidden_dim}, "
          f"encoding {m.encoding_dim} + {m.context_match_dim} lexical, global batch "
          f"{c.train.batch_size}, optimizer "
          f"{c.train.optimizer}")
    gpus = tf.config.list_logical_devices("GPU")
    print(f"devices: {len(gpus)} GPU(s) {[g.name for g in gpus]}, {os.cpu_count()} CPU cores; "
          f"strategy {FLAGS.strategy} with {strategy.num_replicas_in_sync} replica(s)")
    results = {}
    results["ours"] = time_ours(cfg(), extract_dir, strategy, FLAGS.steps, FLAGS.warmup_steps)
    if FLAGS.keras_baseline:
      results["keras"] = time_keras(cfg(), extract_dir, FLAGS.steps, FLAGS.warmup_steps)
    print(f"\n{'method':<34}{'steps':>7}{'ms/step':>10}{'examples/s':>12}{'ratio':>8}")
    per_s = {k: c.train.batch_size * r["steps"] / r["seconds"] for k, r in results.items()}
    names = {"ours": f"ours (lazy {c.train.optimizer}, {FLAGS.strategy})",
             "keras": f"keras.optimizers ({c.train.optimizer}), 1 device"}
    for k, r in results.items():
      ratio = per_s[k] / per_s["keras"] if "keras" in per_s else float("nan")
      print(f"{names[k]:<34}{r['steps']:>7}{1e3 * r['seconds'] / r['steps']:>10.1f}"
            f"{per_s[k]:>12.0f}{ratio:>8.2f}")
    print(f"\npeak RSS {_peak_rss_gib():.2f} GiB (whole process, both methods)")
  finally:
    if tmp:
      shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
  define_flags()
  entry.run(main, "python -m benchmarks.training_benchmark")
