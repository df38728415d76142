"""KB updates (`dense-entity kb`): entities added after training are found, removed ones never
come back, other results stay, readers see whole versions, a failed update changes nothing."""

import io
import json
import os
import shutil
import threading

import numpy as np
import pytest
import tensorflow as tf

from dense_entity import cli
from dense_entity.kb import mention_features
from dense_entity.kb import schema
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder
from dense_entity.retrieval import kb_update
from dense_entity.retrieval import kb_versions
from dense_entity.retrieval import serving_model
from dense_entity.serving import savedmodel
from tests.dense_entity.retrieval.test_retriever import build_tiny_workspace

KINDS = ("brute_force", "ah", "ah_tree")
NEW = [
    {"title": "Zorvath Quarry", "text": "Zorvath Quarry is a granite quarry above the Ore River.",
     "categories": ["Quarries"], "aliases": ["Zorvath Pit"]},
    {"title": "Quillmere", "text": "Quillmere is a lake town.", "categories": "Towns|Lakes"},
]
MENTIONS = [  # (text, start, end) of a new entity, then of entities of the built KB
    ("Trucks left Zorvath Quarry at dawn.", 12, 26),
    ("The Ore River meets the sea.", 4, 13),
    ("A ferry near Port Alder at dusk.", 13, 23),
    ("We walked to Place 0042 by the hill.", 13, 23),
]


@pytest.fixture(scope="module")
def base_workspace(tmp_path_factory):
  root = build_tiny_workspace(tmp_path_factory.mktemp("kbws"), kinds=KINDS, extra_entities=300,
                              name_match_weight=0.8)
  serving_model.export_serving_model(os.path.join(root, "export"), os.path.join(root, "index"),
                                     k=5, search="brute_force")
  return root


@pytest.fixture(scope="module")
def encoder(base_workspace):
  return savedmodel.load_encoder(os.path.join(base_workspace, "export",
                                              savedmodel.ENTITY_ENCODER_DIR))


def _update(ws, operation, records, encoder, **kwargs):
  """kb_update.update_kb without re-exporting the serving model (seconds each), with the
  module's loaded entity encoder."""
  return kb_update.update_kb(ws, operation, records, serving=kwargs.pop("serving", False),
                             entity_encoder=encoder, **kwargs)


def _current_titles(ws):
  index_dir = kb_versions.resolve_index_dir(os.path.join(ws, "index"))
  return index_builder.read_titles(os.path.join(index_dir, index_lib.TITLES_FILENAME))


@pytest.fixture
def ws(base_workspace, tmp_path):
  """A fresh copy of the built workspace (symlinks kept)."""
  root = str(tmp_path / "ws")
  shutil.copytree(base_workspace, root, symlinks=True)
  return root


def _write_jsonl(path, records):
  with open(path, "w", encoding="utf-8") as f:
    for r in records:
      f.write(json.dumps(r) + "\n")
  return str(path)


def _link(ws, texts, index="brute_force", k=5):
  """`dense-entity link --json` on marked texts -> [[titles]]."""
  out, err = io.StringIO(), io.StringIO()
  args = cli.build_parser().parse_args(["link", "--workspace", ws, "--index", index, "--k",
                                        str(k), "--json", "--nil_calibrator", "none"] + texts)
  assert cli._link(args, stdout=out, stderr=err) == 0, err.getvalue()
  return [[e["title"] for e in json.loads(line)["entities"]]
          for line in out.getvalue().splitlines()]


def _marked(mentions):
  return [f"{t[:s]}[[{t[s:e]}]]{t[e:]}" for t, s, e in mentions]


def _serve(ws, mentions):
  """Top titles of the serving SavedModel under WS/export/serving (resolved once)."""
  import tensorflow_text  # noqa: F401  # pylint: disable=unused-import,g-import-not-at-top
  path = os.path.realpath(os.path.join(ws, "export", "serving"))
  serve = tf.saved_model.load(path).signatures["serving_default"]
  feats = [mention_features.mention_features(*m) for m in mentions]
  out = serve(**{n: tf.constant([f[n] for f in feats]) for n in schema.MENTION_FEATURES})
  return [[t.decode() for t in row] for row in out["titles"].numpy()]


def _kb(ws, *argv):
  assert cli.main(["kb", argv[0], "--workspace", ws] + list(argv[1:])) == 0


def test_added_entity_is_linked_and_removed_one_never_comes_back_end_to_end(ws, tmp_path):
  # Through `dense-entity kb` and `dense-entity link` (every index kind), and the serving
  # SavedModel under WS/export/serving.
  texts = _marked(MENTIONS) + ["Trucks left [[Zorvath Pit]] at dawn."]  # + an alias
  everything = 400  # above the 306 entities: every entity is returned
  before = _link(ws, texts, "brute_force", k=everything)
  served_before = _serve(ws, MENTIONS)
  assert before[0][0] != "Zorvath Quarry" and served_before[0][0] != "Zorvath Quarry"

  _kb(ws, "add", _write_jsonl(tmp_path / "new.jsonl", NEW))
  assert os.path.islink(os.path.join(ws, "index"))
  assert os.path.islink(os.path.join(ws, "export", "serving"))
  for kind in KINDS:
    after = _link(ws, texts, kind, k=everything if kind == "brute_force" else 5)
    assert after[0][0] == "Zorvath Quarry" and after[-1][0] == "Zorvath Quarry", kind
    if kind == "brute_force":  # the other mentions: the same ranking, the new entities aside
      for got, want in zip(after[1:-1], before[1:-1]):
        assert [t for t in got if t not in ("Zorvath Quarry", "Quillmere")] == want
  served = _serve(ws, MENTIONS)
  assert served[0][0] == "Zorvath Quarry"
  assert [row[0] for row in served[1:]] == [row[0] for row in served_before[1:]]
  manifest = kb_versions.read_manifest(os.path.realpath(os.path.join(ws, "index")))
  assert manifest["kb_version"] == 1 and manifest["update"]["entities"]["add"] == 2
  assert manifest["model_fingerprint"] == savedmodel.read_manifest(
      os.path.join(ws, "export"))["model_fingerprint"]
  with open(os.path.join(ws, "index", schema.REDIRECTS_FILE)) as f:
    assert "Zorvath Pit\tZorvath Quarry\n" in f.read()

  gone = ("Zorvath Quarry", "Port Alder", "Place 0042")
  (tmp_path / "gone.txt").write_text("".join(t + "\n" for t in gone))
  _kb(ws, "remove", str(tmp_path / "gone.txt"))
  for kind in KINDS:
    after = _link(ws, texts, kind, k=everything)
    assert not any(t in row for row in after for t in gone), kind
    if kind == "brute_force":
      for got, want in zip(after[1:-1], before[1:-1]):
        assert [t for t in got if t != "Quillmere"] == [t for t in want if t not in gone]
  assert not any(t in row for row in _serve(ws, MENTIONS) for t in gone)
  version = os.path.realpath(os.path.join(ws, "index"))
  assert kb_versions.read_manifest(version)["kb_version"] == 2
  with open(os.path.join(version, schema.ALIAS_COUNTS_FILE)) as f:
    assert "Port Alder" not in f.read()
  with open(os.path.join(version, schema.REDIRECTS_FILE)) as f:
    assert "Zorvath" not in f.read()
  titles = index_builder.read_titles(os.path.join(version, index_lib.TITLES_FILENAME))
  assert len(titles) == 306 - 2 + 1 and not set(gone) & set(titles)
  # AH was edited with ScaNN's delete (rows swap-removed as in brute force: every row finds
  # its own id); AH+tree with SOAR was rebuilt (scann 1.4.2's delete is unsafe there).
  strategies = kb_versions.read_manifest(version)["indexes"]
  assert strategies["ah"]["strategy"].startswith("ScaNN delete + upsert")
  assert strategies["ah_tree"]["strategy"].startswith("rebuilt (rows removed")
  exact = np.load(os.path.join(version, "brute_force", index_lib.BRUTE_FORCE_FILENAME))
  ids = index_lib.EntityIndex.load(os.path.join(version, "ah")).search(exact, 1)[0][:, 0]
  assert np.mean(ids == np.arange(len(exact))) > 0.98


def test_export_serving_after_an_update_stays_behind_the_symlink(ws, tmp_path, encoder):
  # After an update (WS/export/serving -> ../index/serving), `python -m export.serving` with
  # other settings replaced the symlink by a directory (and left the link beside it as
  # serving.old-...); the next update re-exported the version's model with the old settings
  # and left WS/export/serving on the old KB: a new entity was not served.
  _update(ws, kb_update.ADD, kb_update.read_entities(
      _write_jsonl(tmp_path / "first.jsonl", NEW[1:])), encoder, serving=True)
  serving_link = os.path.join(ws, "export", "serving")
  assert os.path.islink(serving_link)
  serving_model.export_serving_model(os.path.join(ws, "export"), os.path.join(ws, "index"),
                                     k=3, search="brute_force")
  assert os.path.islink(serving_link)
  assert not [n for n in os.listdir(os.path.join(ws, "export")) if ".old-" in n]
  assert serving_model.read_manifest(serving_link)["k"] == 3  # the version's model, replaced
  _update(ws, kb_update.ADD, kb_update.read_entities(
      _write_jsonl(tmp_path / "second.jsonl", NEW[:1])), encoder, serving=True)
  assert os.path.islink(serving_link)
  assert serving_model.read_manifest(serving_link)["k"] == 3  # re-exported with this k
  assert _serve(ws, MENTIONS[:1])[0][0] == "Zorvath Quarry"


def test_an_update_takes_over_a_serving_directory_left_by_an_older_export(ws, tmp_path,
                                                                          encoder):
  # A versioned workspace whose WS/export/serving is a directory (what export.serving wrote
  # over the symlink before round 25): the update re-exports with that model's settings and
  # puts the symlink back.
  _update(ws, kb_update.ADD, kb_update.read_entities(
      _write_jsonl(tmp_path / "first.jsonl", NEW[1:])), encoder, serving=True)
  serving_link = os.path.join(ws, "export", "serving")
  os.unlink(serving_link)
  serving_model.export_serving_model(os.path.join(ws, "export"), os.path.join(ws, "index"),
                                     k=4, search="brute_force")
  assert os.path.isdir(serving_link) and not os.path.islink(serving_link)
  _update(ws, kb_update.ADD, kb_update.read_entities(
      _write_jsonl(tmp_path / "second.jsonl", NEW[:1])), encoder, serving=True)
  assert os.path.islink(serving_link)
  assert serving_model.read_manifest(serving_link)["k"] == 4
  assert _serve(ws, MENTIONS[:1])[0][0] == "Zorvath Quarry"
  assert not [n for n in os.listdir(os.path.join(ws, "export")) if ".old-" in n]


def test_update_reencodes_an_entity_and_keeps_its_id(ws, tmp_path, encoder):
  before = _current_titles(ws)
  entity = before.index("Ore River")
  changed = {"title": "Ore River", "text": "A new text.", "categories": ["Rivers"],
             "aliases": ["Ore Brook"]}
  _update(ws, kb_update.UPDATE, kb_update.read_entities(
      _write_jsonl(tmp_path / "u.jsonl", [changed])), encoder)
  version = os.path.realpath(os.path.join(ws, "index"))
  titles = index_builder.read_titles(os.path.join(version, index_lib.TITLES_FILENAME))
  assert titles == before and titles.index("Ore River") == entity
  rows = np.load(os.path.join(version, index_lib.ROW_ENTITIES_FILENAME))
  encodings = np.load(os.path.join(version, "brute_force", index_lib.BRUTE_FORCE_FILENAME))
  want = encoder({schema.ENTITY_TITLE: ["Ore River", "Ore Brook"],
                  schema.ENTITY_TEXT: ["A new text."] * 2,
                  schema.ENTITY_CATEGORIES: ["Rivers"] * 2,
                  schema.ENTITY_ALIASES: ["Ore Brook", ""]})
  np.testing.assert_allclose(encodings[np.flatnonzero(rows == entity)], want, atol=1e-6)
  with open(os.path.join(version, schema.REDIRECTS_FILE)) as f:
    redirects = f.read()
  assert "Ore Brook\tOre River\n" in redirects and "Ore Stream\tOre River" not in redirects


def test_scann_indexes_hold_the_new_rows_exactly(ws, tmp_path, encoder):
  _update(ws, kb_update.ADD, kb_update.read_entities(
      _write_jsonl(tmp_path / "new.jsonl", NEW)), encoder)
  version = os.path.realpath(os.path.join(ws, "index"))
  exact = np.load(os.path.join(version, "brute_force", index_lib.BRUTE_FORCE_FILENAME))
  for kind in ("ah", "ah_tree"):
    index = index_lib.EntityIndex.load(os.path.join(version, kind))
    assert index.num_entities == exact.shape[0]
    ids, _ = index.search(exact[-3:], 1)  # the appended rows find themselves
    assert ids[:, 0].tolist() == list(range(exact.shape[0] - 3, exact.shape[0])), kind
  manifest = kb_versions.read_manifest(version)
  assert manifest["indexes"]["ah_tree"]["rows_changed_since_trained"] == 3  # 2 + 1 alias
  assert manifest["indexes"]["ah_tree"]["rebalance_advised"] is False
  # Rebalance: ScaNN retrained on the same rows; the brute-force file is shared.
  rebalanced = kb_update.rebalance(ws, serving=False)
  assert rebalanced["kb_version"] == 2 and rebalanced["num_rows"] == exact.shape[0]
  assert rebalanced["indexes"]["ah_tree"]["rows_changed_since_trained"] == 0
  after = os.path.realpath(os.path.join(ws, "index"))
  assert os.path.samefile(os.path.join(after, "brute_force", index_lib.BRUTE_FORCE_FILENAME),
                          os.path.join(version, "brute_force", index_lib.BRUTE_FORCE_FILENAME))
  index = index_lib.EntityIndex.load(os.path.join(after, "ah_tree"))
  assert index.search(exact[-3:], 1)[0][:, 0].tolist() == list(range(exact.shape[0] - 3,
                                                                      exact.shape[0]))


def test_a_failed_update_leaves_the_previous_version(ws, tmp_path, encoder):
  records = kb_update.read_entities(_write_jsonl(tmp_path / "new.jsonl", NEW))
  _update(ws, kb_update.ADD, records[1:], encoder, serving=True)
  version = os.path.realpath(os.path.join(ws, "index"))
  assert os.path.isdir(os.path.join(version, "serving"))
  for failing in ("encoded", "indexes", "serving", "staged"):
    def step(name, failing=failing):
      if name == failing:
        raise KeyboardInterrupt(f"killed after {name}")
    with pytest.raises(KeyboardInterrupt):
      _update(ws, kb_update.ADD, records[:1], encoder, step=step,
              serving=failing == "serving")
    assert os.path.realpath(os.path.join(ws, "index")) == version
    assert "Zorvath Quarry" not in _current_titles(ws)
  # The previous version is whole: `link` loads it.
  assert _link(ws, _marked(MENTIONS[:1]))[0][0] != "Zorvath Quarry"
  # A staged version left by a killed process is removed by the next update.
  os.makedirs(os.path.join(ws, "index.kb", ".v000009.tmp-dead"))
  _update(ws, kb_update.ADD, records[:1], encoder)
  assert not [n for n in os.listdir(os.path.join(ws, "index.kb")) if ".tmp-" in n]
  assert "Zorvath Quarry" in _current_titles(ws)
  assert kb_versions.versions(os.path.join(ws, "index.kb")) == [1, 2]  # keep_versions=2


def test_a_concurrent_reader_sees_whole_versions(ws, tmp_path, encoder):
  adds = kb_update.read_entities(_write_jsonl(tmp_path / "new.jsonl", NEW))
  removes = [kb_update.EntityRecord(r.title, where="test") for r in adds]
  base = set(_current_titles(ws))
  allowed = [base, base | {"Zorvath Quarry", "Quillmere"}]
  # The first update moves the plain WS/index into WS/index.kb (kb_versions.migrate); the
  # reader starts on a versioned KB.
  _update(ws, kb_update.ADD, adds, encoder)
  seen, errors, stop = set(), [], threading.Event()
  export = savedmodel.read_manifest(os.path.join(ws, "export"))

  def read():
    while not stop.is_set():
      try:
        index_dir = kb_versions.resolve_index_dir(os.path.join(ws, "index"))
        titles = index_builder.read_titles(os.path.join(index_dir, index_lib.TITLES_FILENAME))
        for kind in KINDS:
          index = index_lib.load_index(index_dir, kind, export["model_fingerprint"])
          assert index.num_entities == len(titles)
        manifest = kb_versions.read_manifest(index_dir)
        assert set(titles) in allowed
        assert manifest["num_entities"] == len(titles)
        seen.add(manifest["kb_version"])
      except Exception as e:  # pylint: disable=broad-except
        errors.append(repr(e))

  reader = threading.Thread(target=read)
  reader.start()
  try:
    for _ in range(2):
      _update(ws, kb_update.REMOVE, removes, encoder)
      _update(ws, kb_update.ADD, adds, encoder)
  finally:
    stop.set()
    reader.join()
  assert not errors, errors[:3]
  assert len(seen) >= 3, seen  # versions on both sides of several updates


def test_an_index_of_another_model_is_refused(ws, tmp_path):
  path = os.path.join(ws, "index", "ah", index_lib.MANIFEST_FILENAME)
  with open(path) as f:
    manifest = json.load(f)
  manifest["model_fingerprint"] = "another-model"
  with open(path, "w") as f:
    json.dump(manifest, f)
  with pytest.raises(ValueError, match="built by model 'another-model'"):
    kb_update.update_kb(ws, kb_update.ADD, kb_update.read_entities(
        _write_jsonl(tmp_path / "new.jsonl", NEW)))
  assert not os.path.islink(os.path.join(ws, "index"))  # refused before any change


def test_bad_inputs_name_the_line_and_change_nothing(ws, tmp_path):
  records = kb_update.read_entities(_write_jsonl(tmp_path / "a.jsonl", [{"title": "Zug"}]))
  with pytest.raises(ValueError, match=r"a.jsonl:1: entity 'Zug' is already in the KB"):
    kb_update.update_kb(ws, kb_update.ADD, records)
  gone = tmp_path / "gone.txt"
  gone.write_text("Port Alder\nNo Such Place\n")
  with pytest.raises(ValueError, match=r"gone.txt:2: entity 'No Such Place' is not in the KB"):
    kb_update.update_kb(ws, kb_update.REMOVE, kb_update.read_entities(str(gone)))
  with pytest.raises(ValueError, match=r"b.jsonl:2: entity 'Quillmere' is given twice"):
    kb_update.read_entities(_write_jsonl(tmp_path / "b.jsonl", [NEW[1], NEW[1]]))
  with pytest.raises(ValueError, match=r"c.jsonl:1: \"categories\" must be"):
    kb_update.read_entities(_write_jsonl(tmp_path / "c.jsonl", [{"title": "X", "categories": 3}]))
  with pytest.raises(ValueError, match=r"d.jsonl:1: a string \"title\""):
    kb_update.read_entities(_write_jsonl(tmp_path / "d.jsonl", [{"text": "no title"}]))
  assert not os.path.islink(os.path.join(ws, "index"))
  assert cli.main(["kb", "add", "--workspace", ws, str(tmp_path / "a.jsonl")]) == 2


def test_a_second_update_while_one_runs_is_refused(ws, tmp_path):
  records = kb_update.read_entities(_write_jsonl(tmp_path / "new.jsonl", NEW))
  with kb_versions.update_lock(kb_versions.store_dir(os.path.join(ws, "index"))):
    with pytest.raises(kb_versions.KBUpdateError, match="another KB update is running"):
      kb_update.update_kb(ws, kb_update.ADD, records)
