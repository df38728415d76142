"""The GloVe-average floor of benchmarks/encoder_benchmark.py (numpy only, no TensorFlow)."""

import gzip
import sys

import numpy as np
import pytest

from benchmarks import encoder_benchmark


def _glove(tmp_path, lines):
  path = tmp_path / "g.txt.gz"
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return str(path)


def test_glove_average_means_known_tokens_per_feature(tmp_path):
  enc = encoder_benchmark.GloveAverage(_glove(tmp_path, ["the 1 0", "cat 0 1", ", 3 3"]))
  out = enc.encode_strings(["The cat", "zzz", "cat, cat"])
  np.testing.assert_allclose(out, [[0.5, 0.5], [0, 0], [1, 5 / 3]], rtol=1e-6)
  both = enc({"b": ["the"], "a": ["cat"]})  # sorted by feature name, concatenated, unit norm
  np.testing.assert_allclose(both, [[0, 1, 1, 0]] / np.sqrt(2), rtol=1e-6)


def test_glove_bad_dimension_names_the_line(tmp_path):
  with pytest.raises(ValueError, match=r"g.txt.gz:2: 1 values, expected 2"):
    encoder_benchmark.GloveAverage(_glove(tmp_path, ["the 1 0", "cat 0"]))


def test_batches_cycle_short_inputs():
  batches = encoder_benchmark._batches({"a": ["x", "y", "z"]}, 4)  # pylint: disable=protected-access
  assert batches == [{"a": ["x", "y", "z", "x"]}]
  assert len(encoder_benchmark._batches({"a": list("abcdefgh")}, 2)) == 4  # pylint: disable=protected-access


def test_serving_rows_time_the_whole_answer_at_each_batch_size(tmp_path):
  import os  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import serving_model  # pylint: disable=g-import-not-at-top
  from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace  # pylint: disable=g-import-not-at-top
  root = build_tiny_workspace(tmp_path / "ws")
  out = str(tmp_path / "serving")
  serving_model.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                     out, k=2, search="brute_force")
  mentions = {"mention_span": ["Ore River", "Alder"], "mention_left_context": ["", "ships"],
              "mention_right_context": ["flows", "daily"],
              "mention_sentence": ["[MASK] flows", "ships leave [MASK] daily"]}
  rows = encoder_benchmark._serving_rows(out, mentions, [1, 3], 0.0)  # pylint: disable=protected-access
  assert [(b, r["batch"], r["calls"]) for _, b, r in rows] == [(1, 1, 1), (3, 3, 1)]
  assert rows[0][0].startswith("ours: serving brute_force, ") and "k=2" in rows[0][0]
  assert all(r["ms_per_call"] > 0 for _, _, r in rows)


def test_onednn_off_rows_say_why_when_the_child_fails(monkeypatch, capsys):
  """The oneDNN-off child gets this process's flags; a bad one gives no rows and a reason."""
  monkeypatch.setattr(sys, "argv", ["encoder_benchmark", "--no_such_flag=1"])
  assert encoder_benchmark._onednn_off_rows() == []  # pylint: disable=protected-access
  out = capsys.readouterr().out
  assert "no oneDNN-off rows: the child process exited" in out
  assert "no_such_flag" in out
