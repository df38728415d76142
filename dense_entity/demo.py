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
"""

import glob
import json
import os
import time
from typing import Optional, Sequence

from tqdm import tqdm

GENSIM_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def default_input() -> str:
  """Path of gensim's packaged Wikipedia sample (106 articles, 99 redirects).

  Raises:
    FileNotFoundError: when gensim (or its test data) is not installed.
  """
  import gensim  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", GENSIM_SAMPLE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: gensim's Wikipedia sample is not installed; "
                            "pass --input=GLOB")
  return path


ROUNDS_JSON = "rounds.json"


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


def _export_and_index(trainer, ws, mining_round: int, kinds, verbose: bool = False) -> None:
  """Exports the current model to WS/export and encodes + indexes the KB with it."""
  from dense_entity.retrieval import entity_encodings  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  step = int(trainer.step.numpy())
  manifest = savedmodel.export_encoders(trainer.model, ws.export,
                                        extra={"step": step, "mining_round": mining_round,
                                               "model_dir": os.path.abspath(ws.model)})
  if verbose:
    print(f"   {ws.export} (model fingerprint {manifest['model_fingerprint']}, step {step})")
  entities = entity_encodings.read_entities(ws.extract)
  with tqdm(total=len(entities), unit="entity", desc="   encoding",
            disable=not verbose) as bar:
    summary = entity_encodings.encode_and_index(ws.export, ws.extract, ws.index, kinds,
                                               progress=bar.update)
  if verbose:
    for kind, info in summary["indexes"].items():
      print(f"   {kind}: {info['effective_kind']}, {info['index_bytes']} bytes")


def _context_probes(ws) -> dict:
  """Runs the built-in context probes (dense_entity.context_probes) on the workspace."""
  from dense_entity.evaluation import baselines  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import probes  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.kb import schema  # pylint: disable=g-import-not-at-top
  retriever = retriever_lib.EntityRetriever.load(ws.root)
  redirects = baselines.load_redirects(os.path.join(ws.extract, schema.REDIRECTS_FILE))
  return probes.run_probes(retriever, probes.DEFAULT_PROBES, redirects)


def _stage(name):
  print(f"\n== {name}", flush=True)
  return time.time()


def run_demo(workspace: str, inputs: Optional[Sequence[str]] = None,
             descriptions: Optional[str] = None, heldout_fraction: float = 0.1,
             preset: str = "small", train_steps: Optional[int] = None,
             glove: Optional[str] = None, datasets: Sequence[str] = (),
             index_kinds: Sequence[str] = ("brute_force", "ah", "ah_tree"),
             mining_rounds: int = 0, steps_per_round: int = 1000,
             share_span_title_encoder: bool = False,
             context_match_dim: Optional[int] = None,
             context_match_weight: Optional[float] = None) -> dict:
  """Runs extract, train, export, encode + index, evaluate into `workspace`.

  Args:
    workspace: output directory (WORKSPACE.md); stages found finished there are redone, except
      training, which resumes from its checkpoint, and finished mining rounds: a run stopped
      (even killed) in round r restarts in round r, reusing the round's mined negatives when
      the checkpoint already trains on them; earlier rounds' figures are kept
      (WS/reports/rounds.json).
    inputs: dump globs; default: gensim's packaged sample.
    descriptions: optional JSONL of entity descriptions ({"title", "text"}).
    heldout_fraction: fraction of source pages held out (the paper's 0.1% is for full dumps;
      the default sample has 106 pages).
    preset: training preset (config.PRESETS).
    train_steps: override the preset's step count.
    glove: optional GloVe text file for unigram initialisation.
    datasets: extra evaluation sets, FORMAT:PATH.
    index_kinds: indexes built over the entity encodings.
    mining_rounds: rounds of hard negative mining after round 0 (paper section 4.3).
    steps_per_round: training steps after each mining round.
    share_span_title_encoder: one encoder for span and title (config.ModelConfig).
    context_match_dim, context_match_weight: the lexical context-description channel
      (config.ModelConfig); the preset's values when None.

  Returns:
    The evaluation report (also in WS/reports/eval.json).
  """
  # Imported here so `dense-entity --help` stays fast.
  from beam_pipelines import extract_wikipedia  # pylint: disable=g-import-not-at-top
  from beam_pipelines import mine_hard_negatives  # pylint: disable=g-import-not-at-top
  from dense_entity.modeling import config as config_lib  # pylint: disable=g-import-not-at-top
  from dense_entity.common.workspace import Workspace  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from dense_entity.evaluation import reports  # pylint: disable=g-import-not-at-top
  from dense_entity.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  ws = Workspace(workspace)
  inputs = list(inputs or [default_input()])
  files = sorted({f for pattern in inputs for f in glob.glob(pattern)})
  if not files:
    raise FileNotFoundError(f"no input files match {inputs}")
  os.makedirs(workspace, exist_ok=True)
  timings = {}

  t = _stage(f"1/5 extract: {', '.join(inputs)}")
  stats = extract_wikipedia.run(files, ws.extract, heldout_fraction=heldout_fraction,
                                descriptions=descriptions)
  timings["extract"] = time.time() - t
  print(f"   {stats.get('articles', 0)} articles, {stats.get('entities', 0)} entities, "
        f"{stats.get('mentions_train', 0)} train / {stats.get('mentions_heldout', 0)} held-out "
        f"mentions ({timings['extract']:.0f} s)")

  t = _stage(f"2/5 train: preset {preset}, round 0 (in-batch negatives)")
  cfg = config_lib.get_preset(preset)
  if train_steps is not None:
    cfg.train.train_steps = train_steps
  if glove:
    cfg.glove_path = glove
  cfg.model.share_span_title_encoder = share_span_title_encoder
  if context_match_dim is not None:
    cfg.model.context_match_dim = context_match_dim
  if context_match_weight is not None:
    cfg.model.context_match_weight = context_match_weight
  trainer = trainer_lib.Trainer(cfg, ws.extract, ws.model)
  if train_steps is not None:
    # A resumed run keeps the config saved in model_dir; the step budget may still be raised.
    trainer.cfg.train.train_steps = train_steps
  total = trainer.cfg.train.train_steps
  with tqdm(total=total, initial=min(int(trainer.step.numpy()), total), unit="step",
            desc="   training") as bar:
    last = {}

    def progress(n, metrics):
      last.update(metrics)
      bar.update(n)
      bar.set_postfix(loss=f"{metrics['loss']:.3f}",
                      heldout_r1=f"{last.get('heldout_in_batch_recall@1', float('nan')):.3f}")
    metrics = trainer.train(progress)
  timings["train"] = time.time() - t
  print(f"   step {metrics['step']}: held-out in-batch recall@1 "
        f"{metrics.get('heldout_in_batch_recall@1', float('nan')):.3f} "
        f"({timings['train']:.0f} s)")

  # Round r ends at step train_steps + r * steps_per_round. Finished rounds are kept across
  # runs: a run killed in round r restarts there (its mined negatives are reused when the
  # checkpoint already trains on them), and earlier rounds' figures come from rounds.json.
  round0_steps = trainer.cfg.train.train_steps
  rounds_path = os.path.join(ws.reports, ROUNDS_JSON)
  recorded = {r["round"]: r for r in _read_rounds(rounds_path)}
  rounds = []
  for mining_round in range(mining_rounds + 1):
    last = mining_round == mining_rounds
    target = round0_steps + mining_round * steps_per_round
    step = int(trainer.step.numpy())
    if (not last and step >= target and mining_round in recorded
        and recorded[mining_round]["step"] == target):
      print(f"\n== round {mining_round} finished in an earlier run (step {target}); kept")
      rounds.append(recorded[mining_round])
      continue
    if mining_round > 0:
      t = _stage(f"mining round {mining_round}/{mining_rounds}: hard negatives, then "
                 f"{steps_per_round} more steps")
      out = os.path.join(ws.root, "negatives", f"round_{mining_round}")
      if (int(trainer.mining_round.numpy()) >= mining_round
          and os.path.exists(os.path.join(out, "MANIFEST.json"))):
        with open(os.path.join(out, "MANIFEST.json")) as f:
          pairs = json.load(f)["pairs"]
        print(f"   resuming: the checkpoint already trains on {out} ({pairs} pairs)")
      else:
        _export_and_index(trainer, ws, mining_round - 1, ("brute_force",))
        previous = (os.path.join(ws.root, "negatives", f"round_{mining_round - 1}")
                    if mining_round > 1 else None)
        mined = mine_hard_negatives.run(ws.export, ws.index, ws.extract, out, mining_round,
                                        previous_dir=previous)
        pairs = mined["pairs"]
        print(f"   {mined.get('mentions_mined', 0)} mentions: gold first for "
              f"{mined.get('gold_ranked_first', 0)}, {mined.get('negative_pairs_found', 0)} new "
              f"negative pairs ({mined.get('skipped_spelling_variant_of_gold', 0)} spelling "
              f"variants of the gold skipped), {pairs} in all rounds")
      if pairs:
        trainer.set_hard_negatives(glob.glob(os.path.join(out, "hard_negatives-*")),
                                   mining_round, pairs)
      trainer.cfg.train.train_steps = target
      done = min(max(0, step - target + steps_per_round), steps_per_round)
      with tqdm(total=steps_per_round, initial=done, unit="step", desc="   training") as bar:
        metrics = trainer.train(lambda n, m: bar.update(n))
      timings[f"mining_round_{mining_round}"] = time.time() - t

    t = _stage("3/5 export: encoder SavedModels; 4/5 encode entities and build indexes")
    _export_and_index(trainer, ws, mining_round,
                      index_kinds if last else ("brute_force",), verbose=True)
    timings["export_encode_index"] = timings.get("export_encode_index", 0) + time.time() - t

    t = _stage(f"5/5 evaluate (after mining round {mining_round})")
    report = evaluator.evaluate_workspace(workspace, datasets if last else ())
    timings["evaluate"] = timings.get("evaluate", 0) + time.time() - t
    deer = report["systems"]["DEER"]
    rounds.append({"round": mining_round, "step": int(trainer.step.numpy()),
                   "heldout_in_batch_recall@1": metrics.get("heldout_in_batch_recall@1"),
                   "heldout_in_batch_auc": metrics.get("heldout_in_batch_auc"),
                   **{k: deer[k] for k in ("recall@1", "recall@10", "recall@100")}})
    split = report["datasets"]["heldout"].get("by_gold_seen_in_training", {})
    for part, systems in split.items():
      for k in ("recall@1", "recall@100"):
        rounds[-1][f"{part}_{k}"] = systems["DEER"][k]
    _write_rounds(rounds_path, rounds)
    print(f"   DEER after round {mining_round}: recall@1 {deer['recall@1']:.3f}, "
          f"recall@100 {deer['recall@100']:.3f}")
  report["rounds"] = rounds
  reports.plot_rounds(rounds, os.path.join(ws.reports, reports.ROUNDS_FILE))
  report["context_probes"] = _context_probes(ws)
  report["timings_seconds"] = timings
  with open(os.path.join(workspace, reports.REPORT_FILE), "w") as f:
    json.dump(report, f, indent=2, sort_keys=True)
  print(reports.format_table(report))
  probes = report["context_probes"]
  print(f"\ncontext probes (python -m dense_entity.context_probes --workspace {workspace}): "
        f"{probes['probes_correct']}/{probes['probes_scored']} right; top-1 follows the context "
        f"in {probes['groups_top1_differs']} of {probes['groups']} span pairs")
  print(f"\nreport: {os.path.join(workspace, reports.REPORT_FILE)}")
  return report
