"""Entry points: `--help` exits 0 without loading TensorFlow; a CPU run logs no native errors."""

import os
import re
import subprocess
import sys

import pytest

from dense_entity.common import entry
from tests import testutil


def test_help_requested_before_a_double_dash():
  assert entry.help_requested(["--workspace=x", "--help"]) == "short"
  assert entry.help_requested(["-h"]) == entry.help_requested(["-?"]) == "short"
  assert entry.help_requested(["--helpfull"]) == "full"
  assert entry.help_requested(["--workspace=--help"]) is None
  assert entry.help_requested(["--", "--help"]) is None


def test_native_log_level_hides_errors_only_without_a_gpu_driver():
  assert entry.quiet_native_logs({}, gpu_driver=False) == "3"  # the cuInit error line
  assert entry.quiet_native_logs({}, gpu_driver=True) == "2"  # GPU errors stay visible
  environ = {entry.LOG_LEVEL_ENV: "0"}
  assert entry.quiet_native_logs(environ, gpu_driver=False) == "0"  # the user's choice wins


_HELP = """
import runpy, sys
sys.argv = [sys.argv[1], sys.argv[2]]
try:
  runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit as e:
  print("EXIT", e.code, "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("module", ["dense_entity.train", "dense_entity.evaluate",
                                    "dense_entity.context_probes", "export.export_model",
                                    "export.build_index", "export.tradeoff"])
def test_help_exits_0_without_loading_tensorflow(module):
  # absl's --help exits 1; these used to load TensorFlow first (6-9 s) to define their flags.
  for flag in ("--help", "--helpfull"):
    proc = subprocess.run([sys.executable, "-c", _HELP, module, flag], cwd=testutil.REPO_ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.rstrip().endswith("EXIT 0 False"), proc.stdout[-500:]
    assert "flags:" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("module,flag", [
    ("benchmarks.ann_benchmark", "--leaf_fractions"),
    ("benchmarks.encoder_benchmark", "--mention_batch_sizes"),
    ("benchmarks.extraction_benchmark", "--long_page_mb"),
    ("benchmarks.full_kb_benchmark", "--single_queries"),
    ("benchmarks.training_benchmark", "--steps"),
])
def test_benchmarks_help_exits_0(module, flag):
  # They used absl's app.run directly: --help exited 1 (and full_kb_benchmark's required
  # --workspace made even --help an error).
  proc = subprocess.run([sys.executable, "-c", _HELP, module, "--help"], cwd=testutil.REPO_ROOT,
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "EXIT 0" in proc.stdout and flag in proc.stdout, proc.stdout[-1000:]


_NATIVE_LINE = re.compile(r"^(E\d{4}|\S+ \S+: [EWI] )|cuInit")


@pytest.mark.parametrize("module,flag", [("export.encode_entities", "--storage_dtype"),
                                         ("beam_pipelines.mine_hard_negatives", "--index_kind")])
def test_help_exits_0_for_modules_that_load_tensorflow(module, flag):
  # Their flags' defaults come from modules that import TensorFlow (and Beam): slower, still
  # status 0, and no native log line.
  proc = subprocess.run([sys.executable, "-m", module, "--help"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False,
                        env={k: v for k, v in os.environ.items() if k != entry.LOG_LEVEL_ENV})
  assert proc.returncode == 0 and flag in proc.stdout, proc.stderr[-2000:]
  assert not [line for line in proc.stderr.splitlines() if _NATIVE_LINE.search(line)]


def test_a_cpu_run_prints_no_native_error_line(tmp_path):
  # A mirrored strategy lists the devices (TensorFlow's CUDA platform starts and, without a
  # driver, logged 'E0000 ... failed call to cuInit' at error level); then the missing
  # extraction stops the run with its one-line error.
  if entry.has_nvidia_driver():
    pytest.skip("a GPU driver is present: errors are shown on purpose")
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train",
                         f"--extract_dir={tmp_path / 'missing'}", f"--model_dir={tmp_path / 'm'}",
                         "--strategy=mirrored", "--num_cpu_devices=2"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False,
                        env={k: v for k, v in os.environ.items() if k != entry.LOG_LEVEL_ENV})
  assert proc.returncode == 2, proc.stderr[-2000:]
  native = [line for line in proc.stderr.splitlines() if _NATIVE_LINE.search(line)]
  assert native == [], native
  assert proc.stderr.strip().splitlines()[-1].startswith("python -m dense_entity.train: error: ")


def test_a_beam_entry_point_without_its_required_flags_is_one_line_not_a_traceback():
  proc = subprocess.run([sys.executable, "-m", "beam_pipelines.extract_wikipedia",
                         "--input=x.xml.bz2"], capture_output=True, text=True,
                        cwd=testutil.REPO_ROOT, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert re.search(r"python -m beam_pipelines.extract_wikipedia: error: flag --output_dir=None",
                   proc.stderr)


@pytest.mark.parametrize("module,args,message", [
    # A misspelt flag: absl's suggestion, one line, and status 2 as argparse gives (absl: 1).
    ("dense_entity.evaluate", ["--workspace=ws", "--datset=jsonl:x.jsonl"],
     r"Unknown command line flag 'datset'.*Did you mean: dataset"),
    # A value below the flag's bound.
    ("dense_entity.evaluate", ["--workspace=ws", "--max_mentions=-1"],
     r"flag --max_mentions=-1: -1 is not a non-negative integer"),
    ("beam_pipelines.mine_hard_negatives", ["--export_dir=e", "--index_dir=i",
                                            "--extract_dir=x", "--output_dir=o", "--round=-1"],
     r"flag --round=-1: "),
])
def test_a_bad_flag_is_one_line_and_status_2(module, args, message):
  proc = subprocess.run([sys.executable, "-m", module] + args, capture_output=True, text=True,
                        cwd=testutil.REPO_ROOT, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(f"python -m {module}: error: ") and re.search(message, last), last
