"""One factory for tf.distribute strategies, chosen by the `--strategy` flag.

TensorFlow is imported when a strategy is made, so the flag's choices (STRATEGIES) are
available to `--help` without loading it.
"""

from typing import Optional, TYPE_CHECKING

if TYPE_CHECKING:
  import tensorflow as tf

STRATEGIES = ("default", "mirrored", "tpu")


def get_strategy(name: str = "default", tpu_address: Optional[str] = None,
                 num_cpu_devices: int = 0) -> "tf.distribute.Strategy":
  """Returns the distribution strategy `name`.

  Args:
    name: 'default' (one device), 'mirrored' (all local GPUs, or CPU devices) or 'tpu'.
    tpu_address: TPU name or grpc address for 'tpu' ('' or None: the local TPU).
    num_cpu_devices: with 'mirrored' and no GPU, split the CPU into this many logical devices
      (used by tests to run two replicas on one CPU); 0 leaves the devices as they are.
      Must be set before TensorFlow initialises its devices.

  Raises:
    ValueError: for an unknown name.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    if num_cpu_devices > 1 and not tf.config.list_physical_devices("GPU"):
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * num_cpu_devices)
    devices = [d.name for d in tf.config.list_logical_devices("GPU")]
    if devices:
      return tf.distribute.MirroredStrategy(devices)
    # CPU replicas: the gradients are summed on one device. The default collective ops
    # gather the embedding tables' sparse gradients (IndexedSlices) with a collective that
    # needs the same number of rows on every replica, which the batches' different words
    # never give: 'Shape mismatch in the collective instance' (or a segfault) at the first
    # step on real data (the tests' tiny batches happened to match).
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError(f"unknown strategy {name!r}; choose one of {STRATEGIES}")
