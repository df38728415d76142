"""A small end-to-end run on a real Wikipedia dump: extract, train, export, index, evaluate."""

import json
import os

import pytest

from dense_entity import demo
from dense_entity.evaluation import reports
from dense_entity.serving import savedmodel
from tests import testutil

DUMP = testutil.shared_data("enwiki", "dbpedia-mini-enwiki.xml.bz2")
KORE50 = testutil.shared_data("eval", "kore50", "KORE50_AIDA.tsv")


@pytest.mark.skipif(not os.path.exists(DUMP), reason="shared data not available")
def test_demo_on_a_real_dump(tmp_path, capsys):
  ws = str(tmp_path / "ws")
  report = demo.run_demo(ws, [DUMP], heldout_fraction=0.3, preset="tiny", train_steps=30,
                         datasets=[f"aida:{KORE50}"] if os.path.exists(KORE50) else [],
                         mining_rounds=1, steps_per_round=10, context_match_dim=16)
  printed = capsys.readouterr().out
  assert "DEER" in printed and "AT-Prior" in printed

  with open(os.path.join(ws, reports.REPORT_FILE)) as f:
    on_disk = json.load(f)
  assert on_disk["systems"] == report["systems"]
  assert report["num_mentions"] > 50
  assert report["num_entities"] > 500
  assert set(report["systems"]) == set(reports.SYSTEMS) >= {"DEER", "AT-Prior", "AT-Ext", "BM25"}
  for system, recalls in report["systems"].items():
    values = [recalls[f"recall@{k}"] for k in (1, 10, 100)]
    assert all(0.0 <= v <= 1.0 for v in values), system
    assert values == sorted(values), system  # recall@k grows with k
  # Every system is scored on the same mentions.
  held = report["datasets"]["heldout"]["systems"]
  assert len({s["num_mentions"] for s in held.values()}) == 1
  split = report["datasets"]["heldout"]["by_gold_seen_in_training"]
  assert (split["seen"]["DEER"]["num_in_kb"] + split["unseen"]["DEER"]["num_in_kb"]
          == report["datasets"]["heldout"]["num_in_kb"])
  ambiguous = report["datasets"]["heldout"]["ambiguous_spans"]
  # (This dump's held-out spans may all be unambiguous; the split itself is tested in
  # tests/dense_entity/test_evaluate.py.)
  assert ambiguous["num_mentions"] <= report["datasets"]["heldout"]["num_in_kb"]
  assert set(ambiguous["systems"]) == set(report["systems"]) | {"DEER (no context)"}
  # The built-in context probes ran (their golds are mostly not in this small KB).
  probes = report["context_probes"]
  assert len(probes["probes"]) == 16 and probes["groups"] <= 8
  if os.path.exists(KORE50):
    kore = report["datasets"]["KORE50_AIDA"]
    assert kore["num_nil"] == 4 and kore["num_mentions"] == 144

  # Round 0 and one mining round were evaluated; training went on after mining.
  assert [r["round"] for r in report["rounds"]] == [0, 1]
  assert report["rounds"][1]["step"] == 40
  assert os.path.exists(os.path.join(ws, "negatives", "round_1", "MANIFEST.json"))

  reports_dir = os.path.join(ws, "reports")
  with open(os.path.join(reports_dir, reports.TABLE_FILE)) as f:
    assert "| DEER |" in f.read()
  for png in (reports.CURVE_FILE, reports.ROUNDS_FILE):
    with open(os.path.join(reports_dir, png), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  with open(os.path.join(reports_dir, reports.MISSES_FILE)) as f:
    for line in f:
      miss = json.loads(line)
      assert miss["top5"] and miss["top5"][0] != miss["gold"]
  for curve in report["datasets"]["heldout"]["recall_curves"].values():
    assert len(curve) == 100 and curve == sorted(curve)

  # The indexes were built from this export's encodings.
  manifest = savedmodel.read_manifest(os.path.join(ws, "export"))
  assert manifest["encoding_dim"] == 8 + 16  # tiny preset + the lexical channel
  with open(os.path.join(ws, "index", "indexes.json")) as f:
    assert json.load(f)["model_fingerprint"] == manifest["model_fingerprint"]

  # Asked for one more round, the same workspace keeps rounds 0 and 1 (figures and mined
  # negatives) and runs only round 2.
  round_1 = os.path.join(ws, "negatives", "round_1", "MANIFEST.json")
  mined_at = os.stat(round_1).st_mtime_ns
  again = demo.run_demo(ws, [DUMP], heldout_fraction=0.3, preset="tiny", train_steps=30,
                        mining_rounds=2, steps_per_round=10)
  assert "round 1 finished in an earlier run" in capsys.readouterr().out
  assert again["rounds"][:2] == report["rounds"]
  assert [r["step"] for r in again["rounds"]] == [30, 40, 50]
  assert os.stat(round_1).st_mtime_ns == mined_at
  with open(os.path.join(ws, "negatives", "round_2", "MANIFEST.json")) as f:
    assert json.load(f)["round"] == 2
