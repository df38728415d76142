"""python -m dense_entity.train refuses a --model_dir that holds another stage's output (fresh-user
trial: a copy of an extraction or a reports directory as --model_dir got checkpoints written
into it); a model_dir with config.json is its own and resumes (tests/dense_entity/training)."""

import os
import shutil
import subprocess
import sys

import pytest

from tests import testutil


def snapshot(directory):
  out = {}
  for root, _, names in os.walk(directory):
    for name in names:
      with open(os.path.join(root, name), "rb") as f:
        out[os.path.relpath(os.path.join(root, name), directory)] = f.read()
  return out


@pytest.mark.parametrize("given, message", [
    ("extraction copy", "is not empty and not an output of python -m dense_entity.train "
                        "(no config.json; it holds MANIFEST.json, "),
    ("reports", "holds evaluation reports (eval.json, written by python -m "
                "dense_entity.evaluate), not a trained model; refusing to write into it"),
])
def test_another_stages_directory_is_refused_and_left_as_it_was(tmp_path, given, message):
  extract = str(tmp_path / "extract")
  testutil.write_tiny_extraction(extract)
  model_dir = str(tmp_path / "model")
  if given == "reports":
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "eval.json"), "w") as f:
      f.write("{}\n")
  else:
    shutil.copytree(extract, model_dir)
  before = snapshot(model_dir)
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
                         f"--model_dir={model_dir}", "--preset=tiny", "--train_steps=2"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False,
                        timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].startswith(
      f"python -m dense_entity.train: error: --model_dir={model_dir} {message}")
  assert snapshot(model_dir) == before
