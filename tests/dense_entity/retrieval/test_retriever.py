"""EntityRetriever, marked-text parsing and the `dense-entity link` command."""

import io
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from dense_entity import cli
from dense_entity.modeling import config
from dense_entity.kb import records
from dense_entity.kb import mention_features
from dense_entity.modeling import models
from dense_entity.retrieval import retriever as retriever_lib
from dense_entity.kb import schema
from dense_entity.training import trainer
from dense_entity.retrieval import entity_encodings
from dense_entity.serving import savedmodel
from tests import testutil


def _entity_example(title, text, categories, aliases=()):
  def b(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
  feats = {schema.ENTITY_TITLE: b([title]), schema.ENTITY_TEXT: b([text]),
           schema.ENTITY_CATEGORIES: b(categories), schema.ENTITY_ALIASES: b(aliases),
           schema.ENTITY_SOURCE: b(["page"])}
  return tf.train.Example(features=tf.train.Features(feature=feats))


def build_tiny_workspace(root, kinds=("brute_force",), extra_entities=0, seed=3,
                         context_match_dim=0, name_match_weight=0.0):
  """Writes WS/extract (tests.testutil's tiny extraction, plus `extra_entities` synthetic
  entities; every tenth has two more names, 'Hamlet i' and 'Old Place i', which get name rows,
  and two that do not: its title in lower case and a repeat), exports a randomly initialised tiny model to WS/export and indexes the KB in
  WS/index. No training: equality checks need only fixed weights. With `context_match_dim`
  the model has the lexical channel, its IDF weights set from the KB as training sets them.
  With `name_match_weight` the model has the lexical name channel (64 wide, flat IDF) with that
  weight, so that a mention spelled as an entity's title scores it high without training.
  Returns the root (str)."""
  root = str(root)
  extract = os.path.join(root, "extract")
  testutil.write_tiny_extraction(extract)
  if extra_entities:
    path = os.path.join(extract, f"{schema.ENTITIES_PREFIX}-extra.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
      for i in range(extra_entities):
        aliases = ([f"Hamlet {i}", f"place {i:04d}", f"Old Place {i}", f"Hamlet {i}"]
                   if i % 10 == 0 else [])
        w.write(_entity_example(f"Place {i:04d}", f"Place {i} is a village near hill {i % 17}.",
                                [f"Villages {i % 5}"], aliases).SerializeToString())
  tf.keras.utils.set_random_seed(seed)
  model_config = config.get_preset("tiny").model
  model_config.context_match_dim = context_match_dim
  if name_match_weight:
    model_config.name_match_dim, model_config.name_match_weight = 64, name_match_weight
  model = models.DualEncoder(model_config, ["ore", "lake", "river"])
  if name_match_weight:
    model.name_match.set_document_frequencies(np.ones(model.text_featurizer.num_rows), 3)
  if context_match_dim:
    model.context_match.set_document_frequencies(*trainer.document_frequencies(
        model.text_featurizer, records.record_files(extract, schema.ENTITIES_PREFIX)))
  savedmodel.export_encoders(model, os.path.join(root, "export"))
  entity_encodings.encode_and_index(os.path.join(root, "export"), extract,
                                   os.path.join(root, "index"), kinds)
  return root


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  return build_tiny_workspace(tmp_path_factory.mktemp("ws"))


@pytest.fixture(scope="module")
def retriever(workspace):
  return retriever_lib.EntityRetriever.load(workspace)


TEXTS = [
    ("The Ore River meets the sea.", 4, 13),
    ("A ferry near Port Alder at dusk.", 13, 23),
    ("They sailed to Birch Cove in May.", 15, 25),
]


# ------------------------------------------------------------------------------ marked text

def test_parse_marked_returns_plain_text_and_span():
  text, start, end = retriever_lib.parse_marked("[[Phoenix]] once again played a late night show")
  assert (text, start, end) == ("Phoenix once again played a late night show", 0, 7)
  text, start, end = retriever_lib.parse_marked("[[[Georgia]]] (the country)")
  assert (text, text[start:end]) == ("[Georgia] (the country)", "Georgia")
  text, start, end = retriever_lib.parse_marked("They met in [[ Port Alder ]].")
  assert text == "They met in  Port Alder ." and text[start:end] == "Port Alder"


def test_parse_all_marked_returns_every_mention_in_order():
  text, spans = retriever_lib.parse_all_marked("[[Zug]] lies near [[Lake Ore]] and Zug.")
  assert text == "Zug lies near Lake Ore and Zug."
  assert [text[s:e] for s, e in spans] == ["Zug", "Lake Ore"]


@pytest.mark.parametrize("text, message", [
    ("no mention here", "no mention marked"),
    ("[[a]] and [[b]]", "2 mentions are marked"),
    ("[[open", "never closed"),
    ("closed]] only", "closes no"),
    ("[[  ]] empty", "empty mention"),
    ("[[a [[b]] c]]", "nested"),
])
def test_parse_marked_rejects_bad_markers(text, message):
  with pytest.raises(ValueError, match=message):
    retriever_lib.parse_marked(text)


# ------------------------------------------------------------------------------ retrieval

def test_retrieve_matches_hand_computed_cosines(workspace, retriever):
  # Exact cosines between the encoder's mention encodings and the stored entity encodings.
  encoder = retriever.mention_encoder  # the exported mention encoder SavedModel
  feats = [mention_features.mention_features(*t) for t in TEXTS]
  q = encoder({n: [f[n] for f in feats] for n in schema.MENTION_FEATURES})
  entities = np.load(os.path.join(workspace, "index", "entity_encodings.npy"))
  with open(os.path.join(workspace, "index", "entity_titles.txt")) as f:
    titles = f.read().splitlines()
  cosines = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (
      entities / np.linalg.norm(entities, axis=1, keepdims=True)).T
  results = retriever.retrieve(TEXTS, k=3)
  assert len(results) == len(TEXTS)
  for row, result in zip(cosines, results):
    order = np.argsort(-row, kind="stable")[:3]
    assert [t for t, _ in result] == [titles[i] for i in order]
    np.testing.assert_allclose([s for _, s in result], row[order], atol=1e-5)
    assert all(isinstance(s, float) for _, s in result)


def test_tuples_and_feature_dicts_give_the_same_entities(retriever):
  feats = [mention_features.mention_features(*t) for t in TEXTS]
  mixed = [TEXTS[0], feats[1], dict(feats[2], extra="ignored")]
  _assert_same(retriever.retrieve(mixed, k=4), retriever.retrieve(TEXTS, k=4))


def _assert_same(got, want):
  assert [[t for t, _ in row] for row in got] == [[t for t, _ in row] for row in want]
  np.testing.assert_allclose([[s for _, s in row] for row in got],
                             [[s for _, s in row] for row in want], atol=1e-5)


def test_batches_do_not_change_results(retriever):
  # Batch composition changes float rounding only.
  mentions = TEXTS * 3
  _assert_same(retriever.retrieve(mentions, k=2, batch_size=2), retriever.retrieve(mentions, k=2))


def test_k_above_the_kb_returns_every_entity(retriever):
  result = retriever.retrieve(TEXTS[:1], k=100)[0]
  assert len(result) == retriever.num_entities == 6
  scores = [s for _, s in result]
  assert scores == sorted(scores, reverse=True)
  assert retriever.retrieve([], k=3) == []


def test_load_accepts_an_export_dir_with_the_index_beside_it(workspace, retriever):
  from_export = retriever_lib.EntityRetriever.load(os.path.join(workspace, "export"))
  assert from_export.index_dir == os.path.join(os.path.abspath(workspace), "index")
  _assert_same(from_export.retrieve(TEXTS, k=3), retriever.retrieve(TEXTS, k=3))


@pytest.mark.parametrize("mentions, error, message", [
    ([("text", 0, 99)], ValueError, "mention 0: mention span"),
    ([TEXTS[0], ("abc", 2, 2)], ValueError, "mention 1"),
    ([{schema.MENTION_SPAN: "Zug"}], ValueError, "mention 0: missing features"),
    ([("text", 0)], TypeError, "mention 0"),
    ([("text", "0", 2)], TypeError, r"\(str, int, int\)"),
    ("[[Zug]] is small", TypeError, "list"),
])
def test_bad_mentions_are_clear_errors(retriever, mentions, error, message):
  with pytest.raises(error, match=message):
    retriever.retrieve(mentions, k=2)


def test_bad_k_is_an_error(retriever):
  with pytest.raises(ValueError, match="k must be"):
    retriever.retrieve(TEXTS, k=0)


def test_load_errors_name_what_is_missing(workspace, tmp_path):
  with pytest.raises(FileNotFoundError, match="neither a workspace"):
    retriever_lib.EntityRetriever.load(str(tmp_path))
  with pytest.raises(ValueError, match="unknown index kind"):
    retriever_lib.EntityRetriever.load(workspace, "faiss")
  with pytest.raises(FileNotFoundError, match="ah_tree"):
    retriever_lib.EntityRetriever.load(workspace, "ah_tree")


def copy_index_of_another_model(workspace, destination):
  """Copies WS/index to `destination` as if another model had made it (manifest fingerprint)."""
  shutil.copytree(os.path.join(workspace, "index"), destination)
  for kind in os.listdir(destination):
    path = os.path.join(destination, kind, "index_manifest.json")
    if os.path.isfile(path):
      with open(path) as f:
        manifest = json.load(f)
      manifest["model_fingerprint"] = "another-model"
      with open(path, "w") as f:
        json.dump(manifest, f)
  return str(destination)


def test_index_of_another_model_is_rejected(workspace, tmp_path):
  other = copy_index_of_another_model(workspace, tmp_path / "index")
  with pytest.raises(ValueError, match="rebuild the index"):
    retriever_lib.EntityRetriever.load(workspace, index_dir=other)


# ------------------------------------------------------------------------------ link command

def test_link_prints_top_k_per_mention(workspace, retriever, capsys):
  status = cli.main(["link", "--workspace", workspace, "--k", "2",
                     "The [[Ore River]] meets the sea.", "[[Zug]] lies near [[Lake Ore]]."])
  assert status == 0
  out = capsys.readouterr().out.splitlines()
  expected = retriever.retrieve([TEXTS[0]], k=2)[0]
  assert out[0] == "argument 1: The [[Ore River]] meets the sea."
  assert out[1].split(None, 2)[2] == expected[0][0]
  assert float(out[1].split()[1]) == pytest.approx(expected[0][1], abs=1e-4)
  assert out[3] == "argument 2, mention 1: [[Zug]] lies near Lake Ore."
  assert out[6] == "argument 2, mention 2: Zug lies near [[Lake Ore]]."
  assert len(out) == 9


def test_link_reads_jsonl_and_text_from_stdin(workspace, retriever, capsys, monkeypatch):
  # Loading is covered above; reuse the loaded retriever.
  monkeypatch.setattr(retriever_lib.EntityRetriever, "load",
                      classmethod(lambda cls, path, kind, **kwargs: retriever))
  lines = [json.dumps({"text": TEXTS[1][0], "start": TEXTS[1][1], "end": TEXTS[1][2],
                       "id": 7}),
           "",
           json.dumps({"text": "They sailed to [[Birch Cove]] in May."}),
           "The [[Ore River]] meets the sea."]
  monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
  assert cli.main(["link", "--workspace", workspace, "--k", "3", "--json"]) == 0
  records = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
  assert [r["input"] for r in records] == ["line 1", "line 3", "line 4"]
  assert records[0]["id"] == 7 and records[0]["span"] == "Port Alder"
  assert records[1]["text"] == TEXTS[2][0] and records[1]["span"] == "Birch Cove"
  expected = retriever.retrieve([TEXTS[1], TEXTS[2], TEXTS[0]], k=3)
  for record, want in zip(records, expected):
    assert [e["title"] for e in record["entities"]] == [t for t, _ in want]
    np.testing.assert_allclose([e["score"] for e in record["entities"]],
                               [s for _, s in want], atol=1e-5)


def test_link_names_the_bad_lines_and_links_nothing(workspace, capsys, monkeypatch):
  # Line 6: bytes that are not UTF-8, as Python's stdin decodes them (lone surrogates).
  lines = ["The [[Ore River]] meets the sea.", "no marker", "{\"text\": 3}",
           "{\"text\": \"abc\", \"start\": 1, \"end\": 9}", "{not json",
           b"\xff\xfe[[Zug]]".decode("utf-8", "surrogateescape"),
           "{\"text\": \"a b\", \"start\": 1, \"end\": 2}"]
  monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
  assert cli.main(["link", "--workspace", workspace]) == 2
  captured = capsys.readouterr()
  assert captured.out == ""
  for message in ("line 2: no mention marked", "line 3: a JSON input needs",
                  "line 4: span [1, 9)", "line 5: starts with '{' but is not valid JSON",
                  "line 6: not valid UTF-8 (undecodable bytes at characters 0-1)",
                  "line 7: span [1, 2) holds only whitespace", "6 bad input(s)"):
    assert message in captured.err
  assert "link: line 1:" not in captured.err


def test_link_reports_a_missing_workspace(tmp_path, capsys):
  assert cli.main(["link", "--workspace", str(tmp_path), "[[Zug]]"]) == 1
  assert "neither a workspace" in capsys.readouterr().err
