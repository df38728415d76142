"""Trade-off table (paper Table 3): every index kind measured on the same mentions."""

import hashlib
import json
import os

import pytest

from dense_entity.evaluation import baselines
from dense_entity import cli
from dense_entity.evaluation import evaluator
from dense_entity.evaluation import metrics
from dense_entity.retrieval import retriever as retriever_lib
from dense_entity.kb import schema
from dense_entity.evaluation import tradeoff
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace

KINDS = ("brute_force", "ah", "ah_tree")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  # 306 entities: enough for a real AH codebook and a k-means tree (no small-index fallback).
  return build_tiny_workspace(tmp_path_factory.mktemp("ws"), KINDS, extra_entities=300)


@pytest.fixture(scope="module")
def report(workspace):
  return tradeoff.measure_tradeoff(workspace, KINDS, single_queries=4, repeats=1)


def test_report_has_every_index_and_is_written(workspace, report):
  with open(os.path.join(workspace, tradeoff.REPORT_FILE)) as f:
    assert json.load(f) == json.loads(json.dumps(report))
  assert report["num_mentions"] == 8 and report["num_entities"] == 306
  assert list(report["indexes"]) == list(KINDS)
  for kind, entry in report["indexes"].items():
    assert entry["effective_kind"] == kind, entry["fallback_reason"]
    assert entry["single_ms_per_mention"] > 0 and entry["batched_ms_per_mention"] > 0
    assert entry["single_queries"] == 4
    recalls = [entry[f"recall@{k}"] for k in (1, 10, 100)]
    assert all(0.0 <= r <= 1.0 for r in recalls) and recalls == sorted(recalls)
    assert 0.0 <= entry["exact_agreement@10"] <= 1.0
    with open(os.path.join(workspace, "index", kind, "index_manifest.json")) as f:
      assert entry["index_bytes"] == sum(json.load(f)["files"].values())
  brute = report["indexes"]["brute_force"]
  assert brute["exact_agreement@10"] == 1.0
  assert brute["single_speedup_vs_brute_force"] == 1.0


def test_brute_force_recall_equals_scoring_the_retriever(workspace, report):
  retriever = retriever_lib.EntityRetriever.load(workspace)
  mentions = evaluator.read_heldout_mentions(os.path.join(workspace, "extract"))
  rankings = [[t for t, _ in row] for row in retriever.retrieve(mentions, k=100)]
  redirects = baselines.load_redirects(os.path.join(workspace, "extract",
                                                    schema.REDIRECTS_FILE))
  scored = metrics.score_rankings(rankings, [m[schema.ENTITY_TITLE] for m in mentions],
                                  set(retriever.titles), redirects, (1, 10, 100))
  for k in (1, 10, 100):
    assert report["indexes"]["brute_force"][f"recall@{k}"] == scored[f"recall@{k}"]


def test_table_and_cli(workspace, report, capsys):
  table = tradeoff.format_table(report)
  for kind in KINDS:
    assert f"\n{kind} " in table
  assert cli.main(["tradeoff", "--workspace", workspace, "--kinds", "ah,brute_force",
                   "--single_queries", "2", "--repeats", "1"]) == 0
  out = capsys.readouterr().out
  assert "R@100" in out and "\nah " in out and tradeoff.REPORT_FILE in out
  with open(os.path.join(workspace, tradeoff.REPORT_FILE)) as f:
    written = json.load(f)
  assert list(written["indexes"]) == ["ah", "brute_force"]
  assert written["indexes"]["ah"]["exact_agreement@10"] is not None


def test_bad_arguments(workspace):
  with pytest.raises(ValueError, match="unknown index kinds"):
    tradeoff.measure_tradeoff(workspace, ["faiss"], write=False)
  with pytest.raises(ValueError, match="no index kinds"):
    tradeoff.measure_tradeoff(workspace, [], write=False)


def test_a_heldout_sample_is_uniform_fixed_and_in_file_order(workspace):
  extract = os.path.join(workspace, "extract")
  every = evaluator.read_heldout_mentions(extract)
  ids = [m[schema.MENTION_ID] for m in every]
  sample = evaluator.read_heldout_mentions(extract, 5)
  assert len(sample) == 5 and sample == evaluator.read_heldout_mentions(extract, 5)
  positions = [ids.index(m[schema.MENTION_ID]) for m in sample]
  assert positions == sorted(positions)
  # The 5 whose sha256 of the mention id is smallest, not the first 5.
  smallest = sorted(ids, key=lambda i: hashlib.sha256(i.encode("utf-8")).digest())[:5]
  assert sorted(m[schema.MENTION_ID] for m in sample) == sorted(smallest)
  assert evaluator.read_heldout_mentions(extract, len(every) + 3) == every
