"""The main job: every stage of the paper, in order, into one workspace.

`dense-entity demo [--workspace DIR] [--input GLOB]`:
  1. extract   Beam (DirectRunner): dump -> entities, train/held-out mentions, alias counts
  2. train     round 0, in-batch negatives (small preset unless --preset)
  3. export    mention + entity encoder SavedModels (raw strings in)
  4. encode    entity encodings + brute-force / ScaNN AH / ScaNN AH+tree indexes
  5. evaluate  recall@1/@10/@100 of DEER, AT-Prior, AT-Ext, BM25 on the held-out mentions
  then, for each hard negative mining round (paper section 4.3): mine with the exported model
  (Beam), train on with softmax + logistic tasks, and repeat 3-5; recall after every round goes
  to the report ("rounds") and to reports/recall_by_round.png (the paper's Figure 2); last, the
  built-in context probes (dense_entity.context_probes; report key "context_probes").
The default input is the real Wikipedia sample shipped in gensim's wheel, found at run time.

Each stage is a `Stage` (its inputs, outputs, resume rule and run) and `run_demo` walks the
list: Extract, TrainRound0, Round 0..N (MineAndTrain from round 1 on, ExportAndIndex,
Evaluate), ContextProbes, Report. What a resumed run keeps:
  Extract, ExportAndIndex, Evaluate, ContextProbes, Report  always redone;
  TrainRound0   resumes from the checkpoint in WS/model (its config for settings not given;
                --train_steps may change the budget; another --preset, model setting, --glove
                or extraction is refused, naming it);
  Round r       kept (with its figures) when WS/reports/rounds.json records it at its expected
                step and the checkpoint is there, except the last round, always redone;
  MineAndTrain  reuses the round's mined negatives when the checkpoint already trains on them
                (WS/negatives/round_r/MANIFEST.json), then trains on from the checkpoint.
"""

import dataclasses
import glob
import json
import os
import time
import types
from typing import Any, Optional, Sequence

from tqdm import tqdm

from beam_pipelines.dumps import samples
from dense_entity.common import fileio
from dense_entity.common.workspace import Workspace

ROUNDS_JSON = "rounds.json"


def _beam():
  """The Beam jobs the demo runs, as `.extraction` and `.mining` (each has a `run`).

  Every Beam import of the demo is here; imported late so `dense-entity --help` stays fast.
  """
  from beam_pipelines.pipelines import extraction  # pylint: disable=g-import-not-at-top
  from beam_pipelines.pipelines import mining  # pylint: disable=g-import-not-at-top
  return types.SimpleNamespace(extraction=extraction, mining=mining)


def _read_rounds(path: str) -> list:
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return json.load(f)


def _write_rounds(path: str, rounds: list) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(rounds, f, indent=2, sort_keys=True)
  os.replace(path + ".tmp", path)


def _rounds_path(ws) -> str:
  return os.path.join(ws.reports, ROUNDS_JSON)


def _negatives_dir(ws, mining_round: int) -> str:
  return os.path.join(ws.root, "negatives", f"round_{mining_round}")


def _export_and_index(trainer, ws, mining_round: int, kinds, verbose: bool = False) -> None:
  """Exports the current model to WS/export and encodes + indexes the KB with it."""
  from dense_entity.kb import records  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import entity_encodings  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  step = int(trainer.step.numpy())
  manifest = savedmodel.export_encoders(trainer.model, ws.export,
                                        extra={"step": step, "mining_round": mining_round,
                                               "model_dir": os.path.abspath(ws.model)})
  if verbose:
    print(f"   {ws.export} (model fingerprint {manifest['model_fingerprint']}, step {step})")
  total = records.require_extraction(ws.extract).get("counts", {}).get("entities")
  with tqdm(total=total, unit="entity", desc="   encoding", disable=not verbose) as bar:
    summary = entity_encodings.encode_and_index(ws.export, ws.extract, ws.index, kinds,
                                               progress=bar.update)
  if verbose:
    for kind, info in summary["indexes"].items():
      print(f"   {kind}: {info['effective_kind']}, {info['index_bytes']} bytes")


def _context_probes(ws) -> dict:
  """Runs the built-in context probes (dense_entity.context_probes) on the workspace."""
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import probes  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import retriever  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  redirects = baselines.load_redirects(os.path.join(ws.extract, schema.REDIRECTS_FILE))
  return probes.run_probes(retriever.EntityRetriever.load(ws.root), probes.DEFAULT_PROBES,
                           redirects)


@dataclasses.dataclass
class DemoState:
  """What one run's stages hand on to each other.

  Attributes:
    ws: the workspace's paths (WORKSPACE.md).
    recorded: {round: figures} of the rounds finished in earlier runs, as WS/reports/rounds.json
      held them when this run started.
    timings: seconds per stage kind (report key "timings_seconds").
    stats: the extraction's counts.
    trainer: the Trainer on WS/model (from the round 0 training stage on).
    round0_steps: round 0's step budget; mining round r ends at step
      round0_steps + r * steps_per_round.
    round_start_step: the checkpoint's step when the current round began.
    metrics: the latest training metrics (loss, held-out in-batch recall@1 and AUC, step).
    rounds: this run's figures per round, in order (report key "rounds").
    report: the latest evaluation report.
    probes: the context probes' results (report key "context_probes").
  """
  ws: Workspace
  recorded: dict
  timings: dict = dataclasses.field(default_factory=dict)
  stats: dict = dataclasses.field(default_factory=dict)
  trainer: Any = None
  round0_steps: int = 0
  round_start_step: int = 0
  metrics: dict = dataclasses.field(default_factory=dict)
  rounds: list = dataclasses.field(default_factory=list)
  report: dict = dataclasses.field(default_factory=dict)
  probes: dict = dataclasses.field(default_factory=dict)


class Stage:
  """One stage of the demo: the paths it reads and writes, when it is kept, how it runs.

  `title` is its progress line ("== TITLE"; None: no line and not timed); `timing` its key in
  the report's "timings_seconds" (stages with the same key add up).
  """
  title: Optional[str] = None
  timing: Optional[str] = None

  def inputs(self, ws) -> list[str]:
    """Paths (workspace artifacts, input files) the stage reads."""
    del ws
    return []

  def outputs(self, ws) -> list[str]:
    """Paths the stage writes."""
    del ws
    return []

  def begin(self, state: DemoState) -> None:
    """Notes in `state` what both the resume check and the run read (called first)."""
    del state

  def is_done(self, state: DemoState) -> bool:
    """Whether an earlier run finished the stage; it is then kept instead of redone."""
    del state
    return False

  def keep(self, state: DemoState) -> None:
    """Takes over what the earlier run's stage produced (called instead of `run`)."""
    del state

  def run(self, state: DemoState) -> None:
    """Does the stage's work, reading and setting `state`."""
    raise NotImplementedError

  def summary(self, state: DemoState, seconds: float) -> Optional[str]:
    """The line printed after the stage ran for `seconds`; None: nothing."""
    del state, seconds
    return None


def run_stages(stages: Sequence[Stage], state: DemoState) -> None:
  """Runs `stages` in order: a stage found done is kept, any other one runs (timed)."""
  for stage in stages:
    stage.begin(state)
    if stage.is_done(state):
      stage.keep(state)
      continue
    start = time.time()
    if stage.title:
      print(f"\n== {stage.title}", flush=True)
    stage.run(state)
    seconds = time.time() - start
    if stage.timing:
      state.timings[stage.timing] = state.timings.get(stage.timing, 0) + seconds
    line = stage.summary(state, seconds)
    if line:
      print(line)


@dataclasses.dataclass
class Extract(Stage):
  """Beam (DirectRunner): dump -> entities, train/held-out mentions, alias counts.

  Always redone. An extraction with no held-out mention stops the demo (ValueError naming
  WS/extract and the held-out fraction) before anything is trained.
  """
  patterns: Sequence[str]
  files: Sequence[str]
  heldout_fraction: float
  descriptions: Optional[str]
  titles: Sequence[str] = ()
  redirects_tsv: Sequence[str] = ()
  timing = "extract"

  @property
  def title(self):
    return f"1/5 extract: {', '.join(self.patterns)}"

  def inputs(self, ws):
    return (list(self.files) + ([self.descriptions] if self.descriptions else [])
            + list(self.titles) + list(self.redirects_tsv))

  def outputs(self, ws):
    return [ws.extract]

  def run(self, state):
    state.stats = _beam().extraction.run(self.files, state.ws.extract,
                                         heldout_fraction=self.heldout_fraction,
                                         descriptions=self.descriptions,
                                         title_lists=self.titles,
                                         redirect_lists=self.redirects_tsv)
    if not state.stats.get("mentions_heldout"):
      # Every round is measured on the held-out mentions: stop before training.
      from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
      raise ValueError(evaluator.empty_heldout_message(state.ws.extract)
                       + "; the demo measures every round on held-out mentions, so it stops "
                       "before training")

  def summary(self, state, seconds):
    stats = state.stats
    return (f"   {stats.get('articles', 0)} articles, {stats.get('entities', 0)} entities, "
            f"{stats.get('mentions_train', 0)} train / {stats.get('mentions_heldout', 0)} "
            f"held-out mentions ({seconds:.0f} s)")


@dataclasses.dataclass
class TrainRound0(Stage):
  """Round 0: trains with in-batch negatives up to the step budget.

  Always runs, resuming from the checkpoint in WS/model: settings not given (None) keep the
  checkpoint's values (config.json); `train_steps` may change the budget; a preset, model
  setting, GloVe file or extraction other than the checkpoint's is refused before anything is
  written (training.provenance). A checkpoint already at (or past) the budget trains no step.
  """
  preset: Optional[str]
  train_steps: Optional[int]
  glove: Optional[str]
  share_span_title_encoder: Optional[bool]
  context_match_dim: Optional[int]
  context_match_weight: Optional[float]
  # Other config.ModelConfig fields set over the preset's (None or absent: not given).
  model_overrides: dict = dataclasses.field(default_factory=dict)
  # config.TrainConfig fields set over the preset's (logq_correction, link_sources).
  train_overrides: dict = dataclasses.field(default_factory=dict)
  timing = "train"

  @property
  def title(self):
    preset = self.preset or "small unless WS/model holds a model"
    return f"2/5 train: preset {preset}, round 0 (in-batch negatives)"

  def inputs(self, ws):
    return [ws.extract, ws.model]

  def outputs(self, ws):
    return [ws.model]

  def run(self, state):
    from dense_entity.training import provenance  # pylint: disable=g-import-not-at-top
    from dense_entity.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
    cfg = provenance.run_config(
        state.ws.model, self.preset,
        model_settings={"share_span_title_encoder": self.share_span_title_encoder,
                        "context_match_dim": self.context_match_dim,
                        "context_match_weight": self.context_match_weight,
                        **self.model_overrides},
        train_settings={"train_steps": self.train_steps, **self.train_overrides},
        glove=self.glove)
    trainer = trainer_lib.Trainer(cfg, state.ws.extract, state.ws.model)
    total = trainer.cfg.train.train_steps
    with tqdm(total=total, initial=min(int(trainer.step.numpy()), total), unit="step",
              desc="   training") as bar:
      last = {}

      def progress(n, metrics):
        last.update(metrics)
        bar.update(n)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}",
                        heldout_r1=f"{last.get('heldout_in_batch_recall@1', float('nan')):.3f}")
      state.metrics = trainer.train(progress)
    state.trainer = trainer
    state.round0_steps = trainer.cfg.train.train_steps

  def summary(self, state, seconds):
    metrics = state.metrics
    return (f"   step {metrics['step']}: held-out in-batch recall@1 "
            f"{metrics.get('heldout_in_batch_recall@1', float('nan')):.3f} ({seconds:.0f} s)")


@dataclasses.dataclass
class MineAndTrain(Stage):
  """Mining round r (r >= 1, paper section 4.3): mines hard negatives with the current model
  (exported and brute-force indexed first), then trains `steps_per_round` more steps on them.

  Resumes a run killed in this round: the round's mined negatives are reused (not mined again)
  when the checkpoint already trains on them (`negatives_reusable`), and training goes on from
  the checkpoint's step.
  """
  mining_round: int
  mining_rounds: int
  steps_per_round: int
  # The index mined with: 'brute_force' (exact), or 'ah_tree' for all of Wikipedia, where
  # exact search of every training mention against 5.7M rows takes hours on 2 cores.
  index_kind: str = "brute_force"

  @property
  def title(self):
    return (f"mining round {self.mining_round}/{self.mining_rounds}: hard negatives, then "
            f"{self.steps_per_round} more steps")

  @property
  def timing(self):
    return f"mining_round_{self.mining_round}"

  def inputs(self, ws):
    previous = [_negatives_dir(ws, self.mining_round - 1)] if self.mining_round > 1 else []
    return [ws.model, ws.extract] + previous

  def outputs(self, ws):
    return [ws.export, ws.index, _negatives_dir(ws, self.mining_round), ws.model]

  def negatives_reusable(self, state) -> bool:
    """Whether the checkpoint already trains on this round's mined negatives (in WS/negatives)."""
    manifest = os.path.join(_negatives_dir(state.ws, self.mining_round), "MANIFEST.json")
    return (int(state.trainer.mining_round.numpy()) >= self.mining_round
            and os.path.exists(manifest))

  def run(self, state):
    ws, trainer, r = state.ws, state.trainer, self.mining_round
    step = state.round_start_step
    target = state.round0_steps + r * self.steps_per_round
    out = _negatives_dir(ws, r)
    if self.negatives_reusable(state):
      with open(os.path.join(out, "MANIFEST.json")) as f:
        pairs = json.load(f)["pairs"]
      print(f"   resuming: the checkpoint already trains on {out} ({pairs} pairs)")
    else:
      _export_and_index(trainer, ws, r - 1, tuple(dict.fromkeys(("brute_force",
                                                                  self.index_kind))))
      previous = _negatives_dir(ws, r - 1) if r > 1 else None
      from dense_entity.modeling import config as config_lib  # pylint: disable=g-import-not-at-top
      mined = _beam().mining.run(ws.export, ws.index, ws.extract, out, r, previous_dir=previous,
                                 index_kind=self.index_kind,
                                 link_sources=config_lib.link_sources(trainer.cfg.train))
      pairs = mined["pairs"]
      print(f"   {mined.get('mentions_mined', 0)} mentions: gold first for "
            f"{mined.get('gold_ranked_first', 0)}, {mined.get('negative_pairs_found', 0)} new "
            f"negative pairs ({mined.get('skipped_spelling_variant_of_gold', 0)} spelling "
            f"variants of the gold skipped), {pairs} in all rounds")
    if pairs:
      trainer.set_hard_negatives(glob.glob(os.path.join(out, "hard_negatives-*")), r, pairs)
    trainer.cfg.train.train_steps = target
    done = min(max(0, step - target + self.steps_per_round), self.steps_per_round)
    with tqdm(total=self.steps_per_round, initial=done, unit="step", desc="   training") as bar:
      state.metrics = trainer.train(lambda n, m: bar.update(n))


@dataclasses.dataclass
class ExportAndIndex(Stage):
  """Exports the mention + entity encoder SavedModels, encodes the entities and builds the
  indexes `kinds` over them. Always redone."""
  mining_round: int
  kinds: Sequence[str]
  title = "3/5 export: encoder SavedModels; 4/5 encode entities and build indexes"
  timing = "export_encode_index"

  def inputs(self, ws):
    return [ws.model, ws.extract]

  def outputs(self, ws):
    return [ws.export, ws.index]

  def run(self, state):
    _export_and_index(state.trainer, state.ws, self.mining_round, self.kinds, verbose=True)


@dataclasses.dataclass
class Evaluate(Stage):
  """Recall@1/@10/@100 of DEER, AT-Prior, AT-Ext, BM25 on the held-out mentions (and on
  `datasets`); adds the round's figures to WS/reports/rounds.json. Always redone."""
  mining_round: int
  datasets: Sequence[str]
  max_heldout_mentions: int = 0  # 0: all; else a fixed uniform sample (read_heldout_mentions)
  timing = "evaluate"

  @property
  def title(self):
    return f"5/5 evaluate (after mining round {self.mining_round})"

  def inputs(self, ws):
    return [ws.extract, ws.export, ws.index] + [d.partition(":")[2] for d in self.datasets]

  def outputs(self, ws):
    return [ws.reports, _rounds_path(ws)]

  def run(self, state):
    from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
    report = evaluator.evaluate_workspace(state.ws.root, self.datasets,
                                          max_mentions=self.max_heldout_mentions)
    state.report = report
    deer = report["systems"]["DEER"]
    figures = {"round": self.mining_round, "step": int(state.trainer.step.numpy()),
               "heldout_in_batch_recall@1": state.metrics.get("heldout_in_batch_recall@1"),
               "heldout_in_batch_auc": state.metrics.get("heldout_in_batch_auc"),
               **{k: deer[k] for k in ("recall@1", "recall@10", "recall@100")}}
    split = report["datasets"]["heldout"].get("by_gold_seen_in_training", {})
    for part, systems in split.items():
      for k in ("recall@1", "recall@100"):
        figures[f"{part}_{k}"] = systems["DEER"][k]
    state.rounds.append(figures)
    _write_rounds(_rounds_path(state.ws), state.rounds)

  def summary(self, state, seconds):
    deer = state.report["systems"]["DEER"]
    return (f"   DEER after round {self.mining_round}: recall@1 {deer['recall@1']:.3f}, "
            f"recall@100 {deer['recall@100']:.3f}")


@dataclasses.dataclass
class Round(Stage):
  """One round's stages (round 0: export + index, evaluate; round r >= 1: mine + train first).

  Kept, with the figures recorded then, when an earlier run finished it: WS/reports/rounds.json
  holds the round at its expected step and the checkpoint was at or past that step when the
  round began (`begin` notes it; MineAndTrain's progress starts there too). The last round is
  always redone (its export holds every index kind, its evaluation the datasets).
  """
  mining_round: int
  last: bool
  steps_per_round: int
  stages: Sequence[Stage]

  @classmethod
  def make(cls, mining_round: int, mining_rounds: int, steps_per_round: int,
           index_kinds: Sequence[str], datasets: Sequence[str],
           max_heldout_mentions: int = 0, mining_index: str = "brute_force") -> "Round":
    """Round `mining_round` of 0..mining_rounds: brute force only and no datasets but last."""
    last = mining_round == mining_rounds
    stages = ([MineAndTrain(mining_round, mining_rounds, steps_per_round, mining_index)]
              if mining_round else [])
    stages += [ExportAndIndex(mining_round, index_kinds if last else ("brute_force",)),
               Evaluate(mining_round, datasets if last else (), max_heldout_mentions)]
    return cls(mining_round, last, steps_per_round, stages)

  def target_step(self, state) -> int:
    return state.round0_steps + self.mining_round * self.steps_per_round

  def inputs(self, ws):
    paths = [_rounds_path(ws), ws.model] + [p for s in self.stages for p in s.inputs(ws)]
    return list(dict.fromkeys(paths))

  def outputs(self, ws):
    return list(dict.fromkeys(p for s in self.stages for p in s.outputs(ws)))

  def begin(self, state):
    state.round_start_step = int(state.trainer.step.numpy())

  def is_done(self, state):
    recorded = state.recorded.get(self.mining_round)
    target = self.target_step(state)
    return (not self.last and state.round_start_step >= target
            and recorded is not None and recorded["step"] == target)

  def keep(self, state):
    print(f"\n== round {self.mining_round} finished in an earlier run "
          f"(step {self.target_step(state)}); kept")
    state.rounds.append(state.recorded[self.mining_round])

  def run(self, state):
    run_stages(self.stages, state)


class ContextProbes(Stage):
  """The built-in context probes (dense_entity.context_probes) on the final model and index.

  Always redone.
  """

  def inputs(self, ws):
    return [ws.export, ws.index, ws.extract]

  def run(self, state):
    state.probes = _context_probes(state.ws)


class Report(Stage):
  """The report: WS/reports/eval.json (the last evaluation with "rounds", "context_probes",
  "timings_seconds"), the recall-by-round plot and the printed table. Always redone."""

  def outputs(self, ws):
    from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
    return [os.path.join(ws.root, reports.REPORT_FILE),
            os.path.join(ws.reports, reports.ROUNDS_FILE)]

  def run(self, state):
    from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
    ws, report = state.ws, state.report
    report["rounds"] = state.rounds
    reports.plot_rounds(state.rounds, os.path.join(ws.reports, reports.ROUNDS_FILE))
    report["context_probes"] = state.probes
    report["timings_seconds"] = state.timings
    fileio.write_text_atomically(os.path.join(ws.root, reports.REPORT_FILE),
                                 json.dumps(report, indent=2, sort_keys=True))
    print(reports.format_table(report))
    probes = state.probes
    print(f"\ncontext probes (python -m dense_entity.context_probes --workspace {ws.root}): "
          f"{probes['probes_correct']}/{probes['probes_scored']} right; top-1 follows the "
          f"context in {probes['groups_top1_differs']} of {probes['groups']} span pairs")
    print(f"\nreport: {os.path.join(ws.root, reports.REPORT_FILE)}")


def check_inputs(datasets: Sequence[str], glove: Optional[str]) -> None:
  """Checks the inputs that later stages read, before the first stage: a dataset spec, file or
  record that evaluation would refuse, or a missing GloVe file, would otherwise stop the demo
  only after extraction and training (minutes; an hour at full scale).

  Raises:
    ValueError / FileNotFoundError: as evaluation.datasets.load, naming the spec or file; a
      missing GloVe file, naming it.
  """
  from dense_entity.evaluation import datasets as eval_datasets  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for spec in datasets:
    eval_datasets.load(spec)
  if glove and not tf.io.gfile.exists(glove):
    raise FileNotFoundError(f"--glove={glove}: no such file")


def run_demo(workspace: str, inputs: Optional[Sequence[str]] = None,
             descriptions: Optional[str] = None, titles: Sequence[str] = (),
             redirects_tsv: Sequence[str] = (), heldout_fraction: float = 0.1,
             preset: Optional[str] = None, train_steps: Optional[int] = None,
             glove: Optional[str] = None, datasets: Sequence[str] = (),
             index_kinds: Sequence[str] = ("brute_force", "ah", "ah_tree"),
             mining_rounds: int = 0, steps_per_round: int = 1000,
             share_span_title_encoder: Optional[bool] = None,
             context_match_dim: Optional[int] = None,
             context_match_weight: Optional[float] = None,
             char_ngrams: Optional[bool] = None, name_match_dim: Optional[int] = None,
             name_match_weight: Optional[float] = None,
             logq_correction: Optional[bool] = None, link_sources: Optional[str] = None,
             max_heldout_mentions: int = 0, mining_index: str = "brute_force") -> dict:
  """Runs extract, train, export, encode + index, evaluate into `workspace`.

  The stages, in order: Extract, TrainRound0, one Round per mining round 0..mining_rounds
  (MineAndTrain from round 1 on, ExportAndIndex, Evaluate), ContextProbes, Report.

  Args:
    workspace: output directory (WORKSPACE.md); stages found finished there are redone, except
      training, which resumes from its checkpoint, and finished mining rounds: a run stopped
      (even killed) in round r restarts in round r, reusing the round's mined negatives when
      the checkpoint already trains on them; earlier rounds' figures are kept
      (WS/reports/rounds.json).
    inputs: dump globs; default: gensim's packaged sample.
    descriptions: optional JSONL of entity descriptions ({"title", "text"}).
    titles: title list globs: every title a KB entity (extraction.build_pipeline).
    redirects_tsv: redirect list globs: redirect titles become aliases.
    heldout_fraction: fraction of source pages held out (the paper's 0.1% is for full dumps;
      the default sample has 106 pages).
    preset: training preset (config.PRESETS); None: 'small', or the model's own in a
      workspace whose WS/model holds one. Model settings left None likewise keep the model's
      own on resume; given ones must agree with it (ValueError naming the setting).
    train_steps: override the preset's (or the checkpoint's) step count.
    glove: optional GloVe text file for unigram initialisation.
    datasets: extra evaluation sets, FORMAT:PATH.
    index_kinds: indexes built over the entity encodings.
    mining_rounds: rounds of hard negative mining after round 0 (paper section 4.3).
    steps_per_round: training steps after each mining round.
    mining_index: the index kind each mining round searches ('brute_force', exact; 'ah_tree'
      for all of Wikipedia).
    share_span_title_encoder: one encoder for span and title (config.ModelConfig).
    context_match_dim, context_match_weight: the lexical context-description channel
      (config.ModelConfig); the preset's values when None.
    char_ngrams, name_match_dim, name_match_weight: character trigrams of names and the
      lexical name channel (config.ModelConfig); the preset's values when None.
    logq_correction, link_sources: the sampling-bias correction and the link sources trained
      on (config.TrainConfig); the preset's (or the checkpoint's) when None.
    max_heldout_mentions: evaluate a fixed uniform sample of this many held-out mentions
      (evaluator.read_heldout_mentions; 0: all of them).

  Returns:
    The evaluation report (also in WS/reports/eval.json).

  Raises:
    FileNotFoundError: when no input file matches `inputs`, or a dataset or the GloVe file
      is missing (checked before any stage runs).
    ValueError: for a dataset spec or file that cannot be read (before any stage runs).
  """
  ws = Workspace(workspace)
  inputs = list(inputs or [samples.gensim_sample_path()])
  files = sorted({f for pattern in inputs for f in glob.glob(pattern)})
  if not files:
    raise FileNotFoundError(f"no input files match {inputs}")
  check_inputs(datasets, glove)
  os.makedirs(workspace, exist_ok=True)
  stages = [
      Extract(inputs, files, heldout_fraction, descriptions, titles, redirects_tsv),
      TrainRound0(preset, train_steps, glove, share_span_title_encoder, context_match_dim,
                  context_match_weight,
                  {name: value for name, value in (("char_ngrams", char_ngrams),
                                                   ("name_match_dim", name_match_dim),
                                                   ("name_match_weight", name_match_weight))
                   if value is not None},
                  {name: value for name, value in (("logq_correction", logq_correction),
                                                   ("link_sources", link_sources))
                   if value is not None}),
      *(Round.make(r, mining_rounds, steps_per_round, index_kinds, datasets,
                   max_heldout_mentions, mining_index)
        for r in range(mining_rounds + 1)),
      ContextProbes(),
      Report(),
  ]
  state = DemoState(ws, recorded={r["round"]: r for r in _read_rounds(_rounds_path(ws))})
  run_stages(stages, state)
  return state.report
