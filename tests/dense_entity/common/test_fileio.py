"""fileio.replace_directory replaces only an earlier output of the same stage (bug kind: a
stage's --output_dir pointing at a parent directory or another stage's output was deleted)."""

import os

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
