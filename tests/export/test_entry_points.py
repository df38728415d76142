"""export.encode_entities, export.build_index and export.export_model on the command line: every
flag and input is checked before any work, a bad one is one line naming it (exit 2), and a
finished directory is left byte-identical (fresh-user trial: --kinds=bogus rewrote a finished
index's encodings before failing; --output_dir=WS/extract mixed index files into it)."""

import os
import shutil
import subprocess
import sys

import pytest

from tests import testutil
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  root = build_tiny_workspace(tmp_path_factory.mktemp("ws"))
  reports = os.path.join(root, "reports")
  os.makedirs(reports)
  with open(os.path.join(reports, "eval.json"), "w") as f:
    f.write("{}\n")
  return root


def run(module, *args):
  proc = subprocess.run([sys.executable, "-m", module, *args], cwd=testutil.REPO_ROOT,
                        capture_output=True, text=True, check=False, timeout=300,
                        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert "encoding:" not in proc.stderr  # refused before the progress bar started
  return proc.stderr.strip().splitlines()[-1]


def test_encode_refuses_an_unknown_kind_before_encoding_and_keeps_the_index(workspace, tmp_path):
  # A finished index, another extraction, and a misspelt kind.
  index = str(tmp_path / "index")
  shutil.copytree(os.path.join(workspace, "index"), index)
  other_extract = str(tmp_path / "extract2")
  testutil.write_tiny_extraction(other_extract, repeats=2)
  before = testutil.snapshot(index)
  line = run("export.encode_entities", f"--export_dir={workspace}/export",
             f"--extract_dir={other_extract}", f"--output_dir={index}", "--kinds=bogus")
  assert line.startswith("python -m export.encode_entities: error: Unknown index kinds "
                         "['bogus']"), line
  assert testutil.snapshot(index) == before
  assert sorted(os.listdir(index)) == sorted(os.listdir(os.path.join(workspace, "index")))


@pytest.mark.parametrize("stage_dir", ["extract", "reports"])
def test_encode_and_build_refuse_another_stages_directory(workspace, stage_dir):
  out = os.path.join(workspace, stage_dir)
  before = testutil.snapshot(out)
  line = run("export.encode_entities", f"--export_dir={workspace}/export",
             f"--extract_dir={workspace}/extract", f"--output_dir={out}",
             "--kinds=brute_force")
  assert line.startswith(f"python -m export.encode_entities: error: --output_dir={out} "), line
  assert "refusing to write into it" in line
  index = os.path.join(workspace, "index")
  line = run("export.build_index", f"--encodings={index}/entity_encodings.npy",
             f"--titles={index}/entity_titles.txt", f"--output_dir={out}",
             "--kinds=brute_force", "--model_fingerprint=m")
  assert line.startswith(f"python -m export.build_index: error: --output_dir={out} "), line
  assert testutil.snapshot(out) == before


def test_build_index_names_a_file_of_the_wrong_kind(workspace, tmp_path):
  index = os.path.join(workspace, "index")
  titles = os.path.join(index, "entity_titles.txt")
  # Titles given as the encodings: numpy's 'pickled (object) data' error named no file.
  line = run("export.build_index", f"--encodings={titles}", f"--titles={titles}",
             f"--output_dir={tmp_path / 'out'}", "--model_fingerprint=m")
  assert line.startswith(f"python -m export.build_index: error: --encodings={titles} is not a "
                         ".npy array file"), line
  # Titles that are not UTF-8: the codec error named neither the file nor the line.
  latin1 = tmp_path / "titles_latin1.txt"
  latin1.write_bytes(b"Paris\nK\xf6ln\n")
  line = run("export.build_index", f"--encodings={index}/entity_encodings.npy",
             f"--titles={latin1}", f"--output_dir={tmp_path / 'out'}", "--model_fingerprint=m")
  assert line.startswith(f"python -m export.build_index: error: {latin1}:2: not UTF-8"), line
  assert not (tmp_path / "out").exists()


def test_export_refuses_another_stages_directory_before_exporting(workspace):
  # The model does not even exist: the export directory is checked first, before any work.
  reports = os.path.join(workspace, "reports")
  before = testutil.snapshot(reports)
  line = run("export.export_model", f"--model_dir={workspace}/no_model",
             f"--export_dir={reports}")
  assert line == (f"python -m export.export_model: error: --export_dir={reports} holds "
                  "evaluation reports (eval.json, written by python -m dense_entity.evaluate), "
                  "not an export of the encoders; refusing to write into it: give another "
                  "directory")
  assert testutil.snapshot(reports) == before
