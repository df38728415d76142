"""fileio.replace_directory replaces only an earlier output of the same stage (bug kind: a
stage's --output_dir pointing at a parent directory or another stage's output was deleted)."""

import os
import re

import pytest

from dense_entity.common import fileio


def _finished(tmp_path, name="new"):
  d = tmp_path / name
  d.mkdir()
  (d / "MANIFEST.json").write_text("{}")
  (d / "data").write_text("new")
  return str(d)


def test_an_earlier_output_of_the_stage_or_an_empty_directory_is_replaced(tmp_path):
  out = tmp_path / "round_1"
  out.mkdir()
  (out / "MANIFEST.json").write_text("{}")
  (out / "data").write_text("old")
  fileio.replace_directory(_finished(tmp_path), str(out), "MANIFEST.json")
  assert (out / "data").read_text() == "new"
  empty = tmp_path / "empty"
  empty.mkdir()
  fileio.replace_directory(_finished(tmp_path, "new2"), str(empty), "MANIFEST.json")
  assert (empty / "data").read_text() == "new"
  assert sorted(os.listdir(tmp_path)) == ["empty", "round_1"]  # no .old-* left


def test_a_directory_of_other_things_or_a_file_is_never_replaced(tmp_path):
  # The user forgot /round_N: WS/negatives holds every earlier round and a note.
  parent = tmp_path / "negatives"
  (parent / "round_1").mkdir(parents=True)
  (parent / "round_1" / "MANIFEST.json").write_text("{}")
  (parent / "notes.txt").write_text("keep me")
  new = _finished(tmp_path)
  with pytest.raises(FileExistsError, match=r"negatives exists and is not a finished output.*"
                                            r"no MANIFEST.json"):
    fileio.replace_directory(new, str(parent), "MANIFEST.json")
  assert (parent / "notes.txt").read_text() == "keep me"
  assert (parent / "round_1" / "MANIFEST.json").exists()
  assert os.path.isdir(new)  # the caller still owns (and removes) its finished directory
  a_file = tmp_path / "config.json"
  a_file.write_text("{}")
  with pytest.raises(FileExistsError, match=r"config.json is a file"):
    fileio.replace_directory(new, str(a_file), "MANIFEST.json")
  assert a_file.read_text() == "{}"


def test_a_jsonl_line_that_is_not_utf8_is_named_by_its_line(tmp_path):
  # Probes, jsonl datasets and descriptions read this way gave a bare codec error before.
  path = tmp_path / "probes.jsonl"
  path.write_bytes(b'{"a": 1}\n\n{"b": "caf\xe9"}\n')
  records = fileio.read_jsonl_objects(str(path))
  assert next(records) == (1, {"a": 1})
  with pytest.raises(ValueError, match=r"probes.jsonl:3: not UTF-8 text \(invalid continuation "
                                       r"byte at byte 10 of the line\)"):
    next(records)


# ------------------------------------------------------------------------- check_output_dir
# Bug kind: a stage's output directory pointing at another stage's output (an extraction, a
# model, reports) was written into, mixing index files or checkpoints with it, exit 0.


def _stage_dirs(tmp_path):
  """One finished output of each stage, as the stages leave them (markers and a data file)."""
  dirs = {}
  for name, files in [
      ("extract", {"MANIFEST.json": '{"record_files": {}, "counts": {}}',
                   "entities-00000-of-00001.tfrecord": "x"}),
      ("round_1", {"MANIFEST.json": '{"round": 1}', "hard_negatives-00000-of-00001": "x"}),
      ("model", {"config.json": "{}", "vocab.txt": ""}),
      ("export", {"export_manifest.json": "{}"}),
      ("index", {"indexes.json": "{}", "entity_titles.txt": "A\n"}),
      ("reports", {"eval.json": "{}", "eval.md": "# report\n"})]:
    d = tmp_path / name
    d.mkdir()
    for file_name, text in files.items():
      (d / file_name).write_text(text)
    dirs[name] = d
  return dirs


def _contents(directory):
  return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize("kind, own", [(fileio.EXTRACTION, "extract"), (fileio.MODEL, "model"),
                                       (fileio.EXPORT, "export"), (fileio.INDEX, "index")])
def test_each_stage_refuses_every_other_stages_output_naming_it(tmp_path, kind, own):
  dirs = _stage_dirs(tmp_path)
  before = {name: _contents(d) for name, d in dirs.items()}
  fileio.check_output_dir(str(dirs[own]), kind)  # its own earlier output: replaced or resumed
  for name, d in dirs.items():
    if name == own:
      continue
    with pytest.raises(FileExistsError, match=rf"--output_dir={re.escape(str(d))} holds .* not "
                                              rf"{re.escape(kind.name)}; refusing to write"):
      fileio.check_output_dir(str(d), kind)
  assert {name: _contents(d) for name, d in dirs.items()} == before


def test_the_message_names_the_other_stage_and_its_marker(tmp_path):
  dirs = _stage_dirs(tmp_path)
  with pytest.raises(FileExistsError) as e:
    fileio.check_output_dir(str(dirs["reports"]), fileio.INDEX)
  assert str(e.value) == (f"--output_dir={dirs['reports']} holds evaluation reports (eval.json, "
                          "written by python -m dense_entity.evaluate), not entity encodings and "
                          "indexes; refusing to write into it: give another directory")
  # An extraction and a mining round share MANIFEST.json; its keys tell them apart.
  with pytest.raises(FileExistsError, match="holds a hard negative mining round"):
    fileio.check_output_dir(str(dirs["round_1"]), fileio.EXTRACTION)
  with pytest.raises(FileExistsError,
                     match=r"--model_dir=.*model holds a trained model \(config.json"):
    fileio.check_output_dir(str(dirs["model"]), fileio.EXPORT, "--model_dir")


def test_new_empty_and_killed_runs_directories_are_accepted(tmp_path):
  fileio.check_output_dir(str(tmp_path / "new" / "dir"), fileio.INDEX)
  (tmp_path / "empty").mkdir()
  fileio.check_output_dir(str(tmp_path / "empty"), fileio.MODEL)
  # What killed runs leave: resumable encoding work, an extraction's staging directory, a
  # model's first files before config.json.
  (tmp_path / "index" / ".encoding").mkdir(parents=True)
  fileio.check_output_dir(str(tmp_path / "index"), fileio.INDEX)
  (tmp_path / "extract" / ".staging-0123456789ab").mkdir(parents=True)
  fileio.check_output_dir(str(tmp_path / "extract"), fileio.EXTRACTION)
  (tmp_path / "model").mkdir()
  (tmp_path / "model" / "vocab.txt").write_text("")
  fileio.check_output_dir(str(tmp_path / "model"), fileio.MODEL, "--model_dir")


def test_other_files_or_a_file_are_refused_naming_them(tmp_path):
  home = tmp_path / "home"
  home.mkdir()
  for name in ("notes.txt", "photo.jpg", "a.py", "b.py"):
    (home / name).write_text("keep")
  with pytest.raises(FileExistsError, match=rf"--output_dir={home} is not empty and not an output "
                                            r"of python -m beam_pipelines.extract_wikipedia \(no "
                                            r"MANIFEST.json; it holds a.py, b.py, notes.txt and 1 "
                                            r"more\)"):
    fileio.check_output_dir(str(home), fileio.EXTRACTION)
  a_file = home / "notes.txt"
  with pytest.raises(NotADirectoryError, match=rf"--output_dir={a_file} is a file"):
    fileio.check_output_dir(str(a_file), fileio.EXTRACTION)
  with pytest.raises(NotADirectoryError, match=rf"{a_file} is a file"):
    fileio.check_output_dir(str(a_file / "sub"), fileio.INDEX)
  assert sorted(os.listdir(home)) == ["a.py", "b.py", "notes.txt", "photo.jpg"]
