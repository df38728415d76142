#!/usr/bin/env bash
# Training throughput on a GPU machine, the paper preset (issue 4, item 5).
#
# Prepared to run as is on a Linux machine with NVIDIA GPU(s) and a CUDA driver, from the
# repository root, in a virtual environment where the project is installed with TensorFlow's
# CUDA wheels:
#   python3.11 -m venv .venv && . .venv/bin/activate
#   pip install -e . "tensorflow[and-cuda]==2.20.*"
#   bash benchmarks/gpu_training_benchmark.sh [EXTRACT_DIR]
# EXTRACT_DIR: a finished extraction (default: gensim's packaged sample, extracted first).
# Prints, for the paper preset (5M x 300 embedding table, batch 100, momentum SGD) and then for
# the small preset: examples/s of our training loop on one GPU, on all GPUs (mirrored, global
# batch 100 x number of GPUs) and of the stock Keras optimizer, with ratios. About 5 minutes.
set -euo pipefail
case "${1:-}" in
  -h|--help|-help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "$0: error: unknown option $1 (usage: bash $0 [EXTRACT_DIR])" >&2; exit 2 ;;
esac
if [[ -n "${1:-}" && ! -f "$1/MANIFEST.json" ]]; then
  echo "$0: error: $1 is not a finished extraction (no MANIFEST.json)" >&2; exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python -c "import tensorflow as tf; g = tf.config.list_physical_devices('GPU'); \
print('TensorFlow', tf.__version__, 'GPUs:', g); assert g, 'TensorFlow sees no GPU'"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
extract=${1:-}
if [[ -z "$extract" ]]; then
  extract=$work/extract
  python - "$extract" <<'PY'
import sys
from beam_pipelines.dumps import samples
from beam_pipelines.pipelines import extraction
extraction.run([samples.gensim_sample_path()], sys.argv[1], heldout_fraction=0.1)
PY
fi
gpus=$(python -c "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))")
for preset in paper small; do
  echo "== preset $preset, one GPU"
  python -m benchmarks.training_benchmark --extract_dir="$extract" --preset=$preset \
      --steps=1000 --warmup_steps=100
  if (( gpus > 1 )); then
    echo "== preset $preset, $gpus GPUs (mirrored), global batch $((100 * gpus))"
    python -m benchmarks.training_benchmark --extract_dir="$extract" --preset=$preset \
        --strategy=mirrored --batch_size=$((100 * gpus)) --steps=1000 --warmup_steps=100 \
        --nokeras_baseline
  fi
done
