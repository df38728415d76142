"""benchmarks.compare_extractions: equal outputs, a differing file, run times ignored in the
manifest, an argument that is not a directory (a clear error, nothing compared), and
--help."""

import json

from benchmarks import compare_extractions


def _extraction(path, shard=b"\x01\x02", started="2026-01-01"):
  path.mkdir()
  (path / "entities-00000-of-00001.tfrecord").write_bytes(shard)
  (path / "MANIFEST.json").write_text(json.dumps({"counts": {"entities": 1},
                                                  "started": started}), encoding="utf-8")
  return str(path)


def test_equal_different_and_missing(tmp_path, capsys):
  a = _extraction(tmp_path / "a")
  b = _extraction(tmp_path / "b", started="2026-02-02")  # another run's time only
  c = _extraction(tmp_path / "c", shard=b"\x01\x03")
  assert compare_extractions.main([a, b]) == 0
  assert "ALL EQUAL" in capsys.readouterr().out
  assert compare_extractions.main([a, c]) == 1
  assert "DIFFERS" in capsys.readouterr().out
  assert compare_extractions.main([a, str(tmp_path / "missing")]) == 2
  captured = capsys.readouterr()
  assert "not a directory" in captured.err and "missing" in captured.err
  assert captured.out == ""


def test_help_prints_the_usage_and_exits_0(capsys):
  for flag in ("--help", "-h"):
    assert compare_extractions.main([flag]) == 0
    assert "compare_extractions" in capsys.readouterr().out
