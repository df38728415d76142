"""The demo's stage list and resume rules, on a fake trainer (the full run: test_end_to_end)."""

import json
import os
import types

import pytest

from dense_entity import demo
from dense_entity.common.workspace import Workspace


def _variable(value: int):
  return types.SimpleNamespace(numpy=lambda: value)


def _trainer(step: int, mining_round: int = 0):
  """Stands in for training.trainer.Trainer: its step and mining round variables."""
  return types.SimpleNamespace(step=_variable(step), mining_round=_variable(mining_round))


def _state(tmp_path, step, recorded, mining_round=0):
  return demo.DemoState(Workspace(str(tmp_path)), recorded=recorded,
                        trainer=_trainer(step, mining_round), round0_steps=200)


def test_rounds_brute_force_and_no_datasets_but_the_last():
  rounds = [demo.Round.make(r, 2, 100, ("brute_force", "ah"), ["aida:k.tsv"]) for r in range(3)]
  assert [[type(s).__name__ for s in r.stages] for r in rounds] == [
      ["ExportAndIndex", "Evaluate"]] + [["MineAndTrain", "ExportAndIndex", "Evaluate"]] * 2
  assert [r.stages[-2].kinds for r in rounds] == [("brute_force",)] * 2 + [("brute_force", "ah")]
  assert [r.stages[-1].datasets for r in rounds] == [(), (), ["aida:k.tsv"]]
  assert [r.last for r in rounds] == [False, False, True]
  ws = Workspace("WS")
  assert rounds[2].stages[0].inputs(ws) == ["WS/model", "WS/extract", "WS/negatives/round_1"]
  assert "WS/negatives/round_2" in rounds[2].outputs(ws)


def _kept(round_, state) -> bool:
  round_.begin(state)
  return round_.is_done(state)


def test_a_round_is_kept_when_recorded_at_its_step_and_the_checkpoint_is_there(tmp_path):
  round_1 = demo.Round.make(1, 2, 100, ("brute_force",), ())
  recorded = {1: {"round": 1, "step": 300, "recall@1": 0.5}}
  assert _kept(round_1, _state(tmp_path, 300, recorded))
  assert _kept(round_1, _state(tmp_path, 400, recorded))
  assert not _kept(round_1, _state(tmp_path, 299, recorded))  # killed inside the round
  assert not _kept(round_1, _state(tmp_path, 300, {1: {"round": 1, "step": 250}}))
  assert not _kept(round_1, _state(tmp_path, 300, {}))
  # The last round is always redone.
  last = demo.Round.make(2, 2, 100, ("brute_force",), ())
  assert not _kept(last, _state(tmp_path, 400, {2: {"round": 2, "step": 400}}))


def test_mined_negatives_are_reused_only_when_the_checkpoint_trains_on_them(tmp_path):
  stage = demo.MineAndTrain(1, 2, 100)
  assert not stage.negatives_reusable(_state(tmp_path, 250, {}, mining_round=1))
  out = os.path.join(str(tmp_path), "negatives", "round_1")
  os.makedirs(out)
  with open(os.path.join(out, "MANIFEST.json"), "w") as f:
    json.dump({"pairs": 3}, f)
  assert stage.negatives_reusable(_state(tmp_path, 250, {}, mining_round=1))
  assert not stage.negatives_reusable(_state(tmp_path, 250, {}, mining_round=0))


def test_run_stages_keeps_done_stages_and_times_the_others(tmp_path, capsys):
  ran = []

  class Step(demo.Stage):

    def __init__(self, name, done):
      self.title, self.timing, self.done = name, "steps", done

    def is_done(self, state):
      return self.done

    def keep(self, state):
      ran.append(f"kept {self.title}")

    def run(self, state):
      ran.append(self.title)

    def summary(self, state, seconds):
      return f"   {self.title} done"

  state = _state(tmp_path, 0, {})
  demo.run_stages([Step("a", False), Step("b", True), Step("c", False)], state)
  assert ran == ["a", "kept b", "c"]
  assert capsys.readouterr().out == "\n== a\n   a done\n\n== c\n   c done\n"
  assert list(state.timings) == ["steps"]


def test_demo_command_passes_the_index_kinds_and_refuses_a_list_without_brute_force(
    monkeypatch, tmp_path):
  from dense_entity import cli  # pylint: disable=g-import-not-at-top
  from dense_entity import demo as demo_lib  # pylint: disable=g-import-not-at-top
  seen = {}
  monkeypatch.setattr(demo_lib, "run_demo", lambda *args, **kwargs: seen.update(kwargs))
  cli.main(["demo", "--workspace", str(tmp_path / "ws"), "--index_kinds", "brute_force,ah_tree"])
  assert seen["index_kinds"] == ("brute_force", "ah_tree")
  cli.main(["demo", "--workspace", str(tmp_path / "ws")])
  assert seen["index_kinds"] == ("brute_force", "ah", "ah_tree")
  with pytest.raises(SystemExit, match="must list brute_force"):
    cli.main(["demo", "--workspace", str(tmp_path / "ws"), "--index_kinds", "ah_tree"])


def test_no_heldout_mentions_stop_the_demo_before_training(monkeypatch, tmp_path, capsys):
  # A small input with a held-out fraction that holds out no page (the stage commands' 0.001
  # on the default input): the demo says so and trains nothing, instead of reporting 0.000.
  from dense_entity import cli  # pylint: disable=g-import-not-at-top
  dump = tmp_path / "dump.xml"
  dump.write_text("<mediawiki/>")

  def extract(files, output_dir, **kwargs):
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "MANIFEST.json"), "w") as f:
      json.dump({"heldout_fraction": kwargs["heldout_fraction"],
                 "counts": {"articles": 106, "mentions_train": 2000, "mentions_heldout": 0}}, f)
    return {"articles": 106, "mentions_train": 2000, "mentions_heldout": 0}

  fake = types.SimpleNamespace(extraction=types.SimpleNamespace(run=extract), mining=None)
  monkeypatch.setattr(demo, "_beam", lambda: fake)
  ws = tmp_path / "ws"
  status = cli.main(["demo", "--workspace", str(ws), "--input", str(dump),
                     "--heldout_fraction", "0.001"])
  err = capsys.readouterr().err
  assert status == 2
  assert (f"error: {ws}/extract: the held-out split has 0 mentions (heldout_fraction 0.001, "
          "106 articles, 2000 training mentions)") in err
  assert "stops before training" in err and not (ws / "model").exists()


@pytest.mark.parametrize("datasets, glove, error, message", [
    (["aida_testa.jsonl"], None, ValueError, "must be FORMAT:PATH"),
    (["jsonl:{tmp}/missing.jsonl"], None, FileNotFoundError, "missing.jsonl"),
    (["jsonl:{tmp}/spaces.jsonl"], None, ValueError, "spaces.jsonl"),
    ([], "{tmp}/glove.6B.50d.txt", FileNotFoundError, "--glove=.*glove.6B.50d.txt: no such file"),
])
def test_datasets_and_glove_are_checked_before_the_first_stage(tmp_path, datasets, glove, error,
                                                               message):
  (tmp_path / "spaces.jsonl").write_text("not json at all\n", encoding="utf-8")
  workspace = tmp_path / "ws"
  with pytest.raises(error, match=message):
    demo.run_demo(str(workspace), datasets=[d.format(tmp=tmp_path) for d in datasets],
                  glove=glove and glove.format(tmp=tmp_path))
  assert not workspace.exists()  # nothing extracted, nothing trained


def test_demo_command_passes_the_training_source_flags_and_the_heldout_sample(
    monkeypatch, tmp_path):
  from dense_entity import cli  # pylint: disable=g-import-not-at-top
  from dense_entity import demo as demo_lib  # pylint: disable=g-import-not-at-top
  seen = {}
  monkeypatch.setattr(demo_lib, "run_demo", lambda *args, **kwargs: seen.update(kwargs))
  cli.main(["demo", "--workspace", str(tmp_path / "ws")])
  assert (seen["logq_correction"], seen["link_sources"], seen["max_heldout_mentions"]) == (
      None, None, 0)
  cli.main(["demo", "--workspace", str(tmp_path / "ws"), "--logq_correction", "--link_sources",
            "prose,template", "--max_heldout_mentions", "5000"])
  assert (seen["logq_correction"], seen["link_sources"], seen["max_heldout_mentions"]) == (
      True, "prose,template", 5000)
  cli.main(["demo", "--workspace", str(tmp_path / "ws"), "--no-logq_correction",
            "--mining_index", "ah_tree"])
  assert seen["logq_correction"] is False and seen["mining_index"] == "ah_tree"


def test_the_heldout_sample_and_the_mining_index_reach_every_round():
  rounds = [demo.Round.make(r, 1, 100, ("brute_force",), (), 700, "ah_tree") for r in range(2)]
  assert [r.stages[-1].max_heldout_mentions for r in rounds] == [700, 700]
  assert rounds[1].stages[0].index_kind == "ah_tree"
  assert demo.Round.make(1, 1, 100, ("brute_force",), ()).stages[0].index_kind == "brute_force"
