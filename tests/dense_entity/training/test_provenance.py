"""A resumed run must train the checkpoint's model on the checkpoint's extraction.

Each test builds a model_dir with a first Trainer (no step needed: config.json and
trained_on.json are written when the Trainer starts), then resumes it with one thing changed.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from dense_entity.modeling import config
from dense_entity.training import provenance
from dense_entity.training import trainer as trainer_lib
from tests import testutil


def _cfg(preset="tiny", **model):
  cfg = config.get_preset(preset)
  cfg.train.train_steps = 5
  for name, value in model.items():
    setattr(cfg.model, name, value)
  return cfg


@pytest.fixture
def started(tmp_path):
  """(extract_dir, model_dir) after a first run with the tiny preset."""
  extract, model_dir = str(tmp_path / "extract"), str(tmp_path / "model")
  testutil.write_tiny_extraction(extract)
  trainer_lib.Trainer(_cfg(), extract, model_dir)
  return extract, model_dir


def _files(model_dir):
  out = {}
  for name in (config.CONFIG_FILE, provenance.TRAINED_ON_FILE):
    with open(os.path.join(model_dir, name), encoding="utf-8") as f:
      out[name] = f.read()
  return out


@pytest.mark.parametrize("cfg,message", [
    # Another preset (the dims and IDF weights of the first run used to be kept silently).
    (_cfg("small"), r"--preset: the checkpoint in .*model was trained with preset 'tiny'; "
                    r"this run asks for 'small'"),
    # A model flag that changes the encodings' shape.
    (_cfg(context_match_dim=16), r"--context_match_dim: .* was trained with "
                                 r"context_match_dim=0; this run asks for 16"),
    (_cfg(share_span_title_encoder=True), r"--share_span_title_encoder: .*=False; this run "
                                          r"asks for True"),
])
def test_resuming_with_another_model_is_refused_naming_the_flag(started, cfg, message):
  extract, model_dir = started
  before = _files(model_dir)
  with pytest.raises(ValueError, match=message):
    trainer_lib.Trainer(cfg, extract, model_dir)
  assert _files(model_dir) == before  # nothing rewritten


def test_resuming_on_another_extraction_is_refused_naming_both(started, tmp_path):
  extract, model_dir = started
  other = str(tmp_path / "other_extract")
  testutil.write_tiny_extraction(other, repeats=2)  # another run: other training mentions
  before = _files(model_dir)
  with pytest.raises(ValueError) as error:
    trainer_lib.Trainer(_cfg(), other, model_dir)
  message = str(error.value)
  assert message.startswith(f"--extract_dir: the checkpoint in {model_dir} was trained on "
                            f"{extract} (fingerprint ")
  assert f"not on {other} (fingerprint " in message and "\n" not in message
  assert _files(model_dir) == before
  # The same extraction re-run (byte-identical records) elsewhere is the same data.
  copy = str(tmp_path / "copy")
  shutil.copytree(extract, copy)
  trainer_lib.Trainer(_cfg(), copy, model_dir)
  # An extraction rewritten in place with other records is refused too.
  shutil.rmtree(extract)
  testutil.write_tiny_extraction(extract, repeats=3)
  with pytest.raises(ValueError, match=r"--extract_dir: .* as it is now"):
    trainer_lib.Trainer(_cfg(), extract, model_dir)


def test_resuming_applies_the_training_settings_given(started):
  extract, model_dir = started
  cfg = _cfg()
  cfg.train.train_steps, cfg.train.learning_rate, cfg.train.eval_every = 7, 5e-4, 7
  t = trainer_lib.Trainer(cfg, extract, model_dir)
  assert (t.cfg.train.train_steps, t.cfg.train.learning_rate) == (7, 5e-4)
  assert config.load(model_dir).train.learning_rate == 5e-4
  cfg.train.optimizer = "sgd"  # the optimizer's slots are in the checkpoint: not changeable
  with pytest.raises(ValueError, match=r"--preset: .* 'adam' optimizer .* asks for 'sgd'"):
    trainer_lib.Trainer(cfg, extract, model_dir)


def test_resuming_with_another_glove_file_is_refused(tmp_path):
  extract, model_dir = str(tmp_path / "extract"), str(tmp_path / "model")
  testutil.write_tiny_extraction(extract)
  glove_a, glove_b = tmp_path / "a.txt", tmp_path / "b.txt"
  glove_a.write_text("ore 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8\n")
  glove_b.write_text("river 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8\nore 1 1 1 1 1 1 1 1\n")
  cfg = _cfg()
  cfg.glove_path = str(glove_a)
  trainer_lib.Trainer(cfg, extract, model_dir)
  trainer_lib.Trainer(cfg, extract, model_dir)  # the same file: fine
  cfg.glove_path = None
  trainer_lib.Trainer(cfg, extract, model_dir)  # not given: the vocabulary of vocab.txt
  cfg.glove_path = str(glove_b)
  with pytest.raises(ValueError, match=r"--glove: .* was trained with .*a.txt \(36 bytes\); "
                     r"this run asks for .*b.txt"):
    trainer_lib.Trainer(cfg, extract, model_dir)


def test_a_model_dir_from_before_the_record_is_resumed_and_recorded(started, caplog):
  extract, model_dir = started
  os.remove(os.path.join(model_dir, provenance.TRAINED_ON_FILE))
  trainer_lib.Trainer(_cfg(), extract, model_dir)
  assert "cannot check that it was trained on" in caplog.text
  with open(os.path.join(model_dir, provenance.TRAINED_ON_FILE), encoding="utf-8") as f:
    assert json.load(f)["extraction"] == provenance.extraction_identity(extract)


def test_run_config_keeps_the_checkpoints_settings_unless_given(started):
  _, model_dir = started
  resumed = provenance.run_config(model_dir, None, {"context_match_dim": None},
                                  {"train_steps": 9})
  assert resumed.preset == "tiny" and resumed.train.train_steps == 9
  assert resumed.model == config.load(model_dir).model
  assert provenance.run_config(model_dir, "small").preset == "small"  # refused by the Trainer
  fresh = provenance.run_config(None, None, {"context_match_dim": 16})
  assert fresh.preset == provenance.DEFAULT_PRESET and fresh.model.context_match_dim == 16
  with pytest.raises(ValueError, match="unknown ModelConfig setting 'dims'"):
    provenance.run_config(None, "tiny", {"dims": 3})


def test_train_command_refuses_another_preset_in_one_line(started):
  extract, model_dir = started
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
                         f"--model_dir={model_dir}", "--preset=small", "--train_steps=6"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].startswith(
      "python -m dense_entity.train: error: --preset: the checkpoint in ")
  assert "'tiny'; this run asks for 'small'" in proc.stderr


@pytest.mark.parametrize("setting,value,message", [
    ("batch_size", 0, "batch_size must be >= 1, got 0"),
    # A batch of 1 has no in-batch negative: it trained nothing (loss 0) and said nothing.
    ("batch_size", 1, "batch_size must be >= 2: the softmax task's negatives are the other "
                      "entities of the batch"),
    ("learning_rate", -1.0, "learning_rate must be > 0, got -1.0"),
    ("learning_rate", float("nan"), "learning_rate must be > 0, got nan"),
    ("eval_every", 0, "eval_every must be >= 1, got 0"),
    ("train_steps", -5, "train_steps must be >= 0, got -5"),
    ("momentum", 1.0, r"momentum must be in \[0, 1\), got 1.0"),
    ("optimizer", "adagrad", "optimizer must be 'sgd' or 'adam', got 'adagrad'"),
])
def test_training_settings_that_cannot_train_are_refused_by_name(setting, value, message):
  cfg = _cfg()
  setattr(cfg.train, setting, value)
  with pytest.raises(ValueError, match=message):
    config.validate(cfg)
  cfg.train.shuffle_buffer = 0  # no shuffling (file order) stays allowed
  setattr(cfg.train, setting, getattr(config.get_preset("tiny").train, setting))
  config.validate(cfg)


def test_hard_negatives_that_are_not_a_mining_round_are_refused_naming_the_flag(tmp_path):
  from dense_entity import train  # pylint: disable=g-import-not-at-top
  assert train.hard_negative_files(None) == ([], 0)
  with pytest.raises(FileNotFoundError, match=r"--hard_negatives=.*missing\).*"
                     r"beam_pipelines.mine_hard_negatives"):
    train.hard_negative_files(str(tmp_path / "nonexistent"))
  extract = str(tmp_path / "extract")  # an extraction has a MANIFEST.json but no pairs
  testutil.write_tiny_extraction(extract)
  with pytest.raises(FileNotFoundError, match="is not a mining round's manifest"):
    train.hard_negative_files(extract)


@pytest.mark.parametrize("args,message", [
    (["--batch_size=0"], "batch_size must be >= 1, got 0"),
    (["--hard_negatives=/nonexistent/round_1"], "--hard_negatives=/nonexistent/round_1 holds "
                                                "no finished mining round"),
    (["--train_dataset=jsonl:/nonexistent.jsonl", "--train_dataset_fraction=0.8",
      "--train_redirects_fraction=0.5"],
     "--train_dataset_fraction=0.8 and --train_redirects_fraction=0.5 sum over 1"),
    (["--train_redirects_fraction=0.5"], "no entity of the KB in "),
])
def test_train_command_checks_its_inputs_before_writing_the_model_dir(tmp_path, args, message):
  extract, model_dir = str(tmp_path / "extract"), tmp_path / "model"
  testutil.write_tiny_extraction(extract)
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
                         f"--model_dir={model_dir}", "--preset=tiny"] + args,
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].startswith(
      f"python -m dense_entity.train: error: {message}")
  assert not model_dir.exists()  # no config.json of a run that never started


def test_a_labeled_split_smaller_than_a_batch_is_refused_before_the_model_dir(tmp_path):
  extract, model_dir = str(tmp_path / "extract"), tmp_path / "model"
  testutil.write_tiny_extraction(extract)
  dataset = tmp_path / "two.jsonl"
  dataset.write_text(json.dumps({"id": "d", "text": "Ships leave Port Alder daily.", "mentions": [
      {"start": 12, "end": 22, "entity": "Port_Alder"}] * 2}) + "\n", encoding="utf-8")
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
                         f"--model_dir={model_dir}", "--preset=tiny",
                         f"--train_dataset=jsonl:{dataset}"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      "python -m dense_entity.train: error: 2 labeled mentions, fewer than one batch of 8")
  assert not model_dir.exists()


def test_a_model_dir_that_is_a_file_is_one_line(tmp_path):
  extract, model_file = str(tmp_path / "extract"), tmp_path / "model"
  testutil.write_tiny_extraction(extract)
  model_file.write_text("not a directory")
  proc = subprocess.run([sys.executable, "-m", "dense_entity.train", f"--extract_dir={extract}",
                         f"--model_dir={model_file}", "--preset=tiny"],
                        cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      f"python -m dense_entity.train: error: --model_dir={model_file} is a file, not a directory")
  assert model_file.read_text() == "not a directory"
