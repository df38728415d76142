"""Recall@k of DEER and the baselines on the same mentions and the same KB (paper section 5).

Systems (paper Table 2): DEER (mention encoder + nearest-neighbour search over the pre-encoded
KB), AT-Prior (alias table P(e|m) from training anchors, top 100), AT-Ext (plus unigram and
bigram aliases of the mention) and BM25 over entity titles and redirect titles; and, not in
the paper, AT-Prior+TR (AT-Prior with the KB's titles and redirects as aliases too). Every
system ranks up to 100 entities for every mention; scoring (evaluation.metrics with the KB's
kb.titles.TitleResolver) resolves gold and predictions alike, through redirects and the KB's
case- and accent-insensitive matching key, and reports in-KB and overall recall with counts.

`python -m dense_entity.evaluate --workspace=WS [--dataset=aida:PATH ...]` runs
`evaluate_workspace`.

Writes WS/reports/eval.md (Markdown tables), WS/reports/recall_at_k.png (recall@k curves,
k = 1..100), WS/reports/deer_misses.jsonl (DEER's in-KB misses: mention, context, gold, gold rank,
top 5) and WS/reports/eval.json:
  {"num_mentions": N, "num_entities": M, "systems": {"DEER": {"recall@1": x, "recall@10": y,
   "recall@100": z, ...}, "AT-Prior": {...}, "AT-Ext": {...}, "BM25": {...}},
   "datasets": {"heldout": {same as above}, "<dataset name>": {...}}, ...}
The top-level "systems" are the held-out Wikipedia mentions (the training split's heldout part);
when that split is empty and datasets are given it is skipped: no top-level "systems", and
"heldout_skipped" says why. Inputs with nothing to score are errors raised before anything is
written (`evaluate_workspace`).
"""

import hashlib
import json
import logging
import os
import time
from typing import Dict, List, Optional, Sequence

from dense_entity.common import fileio
from dense_entity.common.workspace import Workspace
from dense_entity.evaluation import baselines
from dense_entity.evaluation import datasets as datasets_lib
from dense_entity.evaluation import metrics
from dense_entity.evaluation import nil_calibration
from dense_entity.evaluation import reports
from dense_entity.evaluation.reports import KS, SYSTEMS
from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.kb import titles as titles_lib
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder
from dense_entity.retrieval import kb_versions
from dense_entity.retrieval import nil as nil_lib
from dense_entity.serving import savedmodel

TOP_K = 100


def read_heldout_mentions(extract_dir: str, max_mentions: int = 0) -> List[dict]:
  """Held-out mention records (4 mention features + ENTITY_TITLE gold + MENTION_ID +
  LINK_SOURCE, '' in older extractions), file order.

  With `max_mentions` (> 0) and more held-out mentions than that: a uniform sample of
  `max_mentions` of them, the same for every run and reader (those whose sha256 of
  MENTION_ID is smallest), in file order; not the first ones, whose shards may come from a
  few inputs only (an HTML dump's table-heavy pages beside XML dumps, say).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records.require_extraction(extract_dir)
  files = sorted(tf.io.gfile.glob(os.path.join(extract_dir,
                                               schema.HELDOUT_MENTIONS_PREFIX + "-*")))
  rows = []
  if not files:
    return rows
  names = schema.MENTION_FEATURES + (schema.ENTITY_TITLE, schema.MENTION_ID, schema.LINK_SOURCE)
  spec = {k: tf.io.FixedLenFeature([], tf.string, default_value="") for k in names}
  for serialized in tf.data.TFRecordDataset(files).batch(4096):
    batch = tf.io.parse_example(serialized, spec)
    cols = {k: [v.decode("utf-8") for v in batch[k].numpy()] for k in names}
    rows.extend(dict(zip(cols, values)) for values in zip(*cols.values()))
  if max_mentions and len(rows) > max_mentions:
    rank = sorted(range(len(rows)), key=lambda i: hashlib.sha256(
        rows[i][schema.MENTION_ID].encode("utf-8")).digest())
    rows = [rows[i] for i in sorted(rank[:max_mentions])]
  return rows


class Retrievers:
  """The systems (reports.SYSTEMS) over one KB, each mapping mention features to ranked
  titles."""

  def __init__(self, ws: Workspace, index_kind: str = "brute_force",
               systems: Sequence[str] = SYSTEMS):
    """Loads the index, the mention encoder and the baselines in `systems` (which must hold
    DEER, the system the report's counts, NIL and misses come from).

    Raises:
      ValueError: naming an unknown system, or when DEER is not among `systems`.
    """
    self.systems = check_systems(systems)
    manifest = savedmodel.read_manifest(ws.export)
    # One KB version throughout (retrieval.kb_versions); an updated KB keeps its aliases
    # (redirects.tsv, alias_counts.tsv) beside its index, else they are the extraction's.
    index_dir = kb_versions.resolve_index_dir(ws.index)
    self.titles = index_builder.read_titles(os.path.join(index_dir, index_lib.TITLES_FILENAME))
    self.index = index_lib.load_index(
        index_dir, index_kind,
        expected_model_fingerprint=manifest["model_fingerprint"],
        expected_dim=manifest["encoding_dim"])
    self.mention_encoder = savedmodel.load_encoder(
        os.path.join(ws.export, savedmodel.MENTION_ENCODER_DIR))
    redirects_path = kb_versions.kb_file(index_dir, schema.REDIRECTS_FILE, ws.extract)
    self.redirects = baselines.load_redirects(redirects_path)
    self.alias_table = baselines.AliasTable.from_tsv(
        kb_versions.kb_file(index_dir, schema.ALIAS_COUNTS_FILE, ws.extract), redirects_path)
    self.kb_titles = set(self.titles)
    self.title_aliases = baselines.TitleAliases(self.kb_titles, self.redirects)
    # BM25 over every title is the slowest baseline to build (minutes at 5.9M titles).
    self.bm25 = (baselines.BM25Index(self.titles, aliases=self.redirects)
                 if "BM25" in self.systems else None)
    # Gold and predicted titles resolve to KB entities through redirects and the KB's
    # case- and accent-insensitive matching key (kb.titles.TitleResolver).
    self.resolver = titles_lib.TitleResolver(self.kb_titles, self.redirects)

  def deer(self, features: Sequence[Dict[str, str]], k: int = TOP_K):
    """Returns (titles [mentions][k], scores [mentions][k]) from nearest-neighbour search."""
    if not features:
      return [], []
    enc = self.mention_encoder({n: [f[n] for f in features] for n in schema.MENTION_FEATURES})
    ids, scores = self.index.search(enc, k)
    return [[self.titles[i] for i in row] for row in ids], scores.tolist()

  def rank_all(self, features: Sequence[Dict[str, str]],
               deer_scores: Optional[list] = None) -> Dict[str, List[List[str]]]:
    """{system: [mentions][<= TOP_K] ranked titles}; DEER's scores are appended to
    `deer_scores` when it is a list (for the NIL calibrator)."""
    spans = [f[schema.MENTION_SPAN] for f in features]
    deer_titles, scores = self.deer(features)
    if deer_scores is not None:
      deer_scores.extend(scores)
    rankers = {
        "AT-Prior": lambda s: self.alias_table.at_prior(s, TOP_K),
        "AT-Ext": lambda s: self.alias_table.at_ext(s, TOP_K),
        "AT-Prior+TR": lambda s: baselines.at_prior_tr(self.alias_table, self.title_aliases, s,
                                                        TOP_K),
        "BM25": lambda s: self.bm25.search(s, TOP_K),
    }
    rankings = {"DEER": deer_titles}
    for name in self.systems:
      if name != "DEER":
        rankings[name] = [[t for t, _ in rankers[name](s)] for s in spans]
    return rankings


def check_systems(systems: Sequence[str]) -> tuple:
  """The systems to evaluate in report order (reports.SYSTEMS), checked.

  Raises:
    ValueError: naming an unknown system, or when DEER is missing (the report's counts, the
      NIL calibrator and the misses file come from DEER's rankings).
  """
  unknown = sorted(set(systems) - set(SYSTEMS))
  if unknown:
    raise ValueError(f"unknown system(s) {unknown}; choose among {list(SYSTEMS)}")
  if "DEER" not in systems:
    raise ValueError(f"the systems {list(systems)} lack DEER, which every report needs")
  return tuple(name for name in SYSTEMS if name in systems)


def evaluate_mentions(retrievers: Retrievers, features: Sequence[Dict[str, str]],
                      gold: Sequence[str]) -> dict:
  """Scores every system on the same mentions; returns the per-dataset report section."""
  t0 = time.time()
  deer_scores = []
  rankings = retrievers.rank_all(features, deer_scores)
  section = {"systems": {}, "recall_curves": {}}
  for name in retrievers.systems:
    scored = metrics.score_rankings(rankings[name], gold, retrievers.kb_titles,
                                    retrievers.resolver, KS)
    section["systems"][name] = scored
    section["recall_curves"][name] = metrics.recall_curve(
        rankings[name], gold, retrievers.kb_titles, retrievers.resolver, TOP_K)
  counts = section["systems"]["DEER"]
  section.update({k: counts[k] for k in ("num_mentions", "num_in_kb",
                                         "num_gold_missing_from_kb", "num_nil",
                                         "num_unresolvable_gold")})
  section["seconds"] = time.time() - t0
  section["_rankings"] = rankings
  section["_deer_scores"] = deer_scores
  return section


def training_entities(extract_dir: str, redirects) -> set:
  """Normalized, redirect-resolved titles that are the gold entity of some training mention
  (the entity column of `alias_counts.tsv`, which counts training anchors only)."""
  seen = set()
  path = os.path.join(extract_dir, schema.ALIAS_COUNTS_FILE)
  with open(path, encoding="utf-8") as f:
    for line in f:
      parts = line.rstrip("\n").split("\t")
      if len(parts) == 3:
        seen.add(metrics.resolve_title(parts[1], redirects))
  seen.discard(None)
  return seen


def split_by_training_gold(gold, rankings, retrievers, extract_dir) -> dict:
  """Recall of every system on held-out mentions whose gold entity is (seen) or is not
  (unseen) the gold of some training mention.

  A dual encoder generalises to unseen entities from their title and description alone (paper
  section 5.3); on a small dump most held-out gold entities are unseen, so this split tells
  zero-shot retrieval apart from disambiguation among entities trained on. Gold titles are
  resolved as in scoring (metrics.resolve_title); unresolvable ones count as unseen.
  """
  seen_titles = training_entities(extract_dir, retrievers.resolver)
  is_seen = [metrics.resolve_title(g, retrievers.resolver) in seen_titles for g in gold]
  return {part: _score_subset([i for i, s in enumerate(is_seen) if s == (part == "seen")],
                              gold, rankings, retrievers)
          for part in ("seen", "unseen")}


def split_by_link_source(features, gold, rankings, retrievers) -> dict:
  """{link source: {system: metrics.score_rankings}} of the held-out mentions by where their
  link was written (schema.LINK_SOURCES: prose, table cells, template values, ...); {} for
  an extraction without link sources. Table cells and running text are different tasks (a
  cell's sentence is the cell), and an input's mix of them moves the held-out figures."""
  by_source: Dict[str, List[int]] = {}
  for i, f in enumerate(features):
    by_source.setdefault(f.get(schema.LINK_SOURCE, ""), []).append(i)
  if set(by_source) <= {""}:
    return {}
  return {source or "unknown": _score_subset(keep, gold, rankings, retrievers)
          for source, keep in sorted(by_source.items())}


def _score_subset(keep: Sequence[int], gold, rankings, retrievers) -> dict:
  """{system: metrics.score_rankings} of every system on the mentions at indices `keep`."""
  subset_gold = [gold[i] for i in keep]
  return {name: metrics.score_rankings([ranked[i] for i in keep], subset_gold,
                                       retrievers.kb_titles, retrievers.resolver, KS)
          for name, ranked in rankings.items()}


def split_ambiguous_spans(features, gold, rankings, retrievers) -> dict:
  """Recall on held-out mentions whose span the context has to disambiguate.

  A mention is kept when its span is an alias of two or more entities in the training alias
  table (AT-Prior's) and its gold entity is one of them ('Georgia' for the country or the U.S.
  state). DEER is scored twice: as is, and with the mention's left context, right context and
  sentence blanked ("DEER (no context)"); the difference is what the context adds (the paper's
  Table 6 idea, measured instead of shown by examples).

  Returns:
    {"num_mentions": n, "systems": {system: metrics.score_rankings(...)}} with the SYSTEMS and
    "DEER (no context)".
  """
  resolve = lambda t: metrics.resolve_title(t, retrievers.resolver)
  keep = []
  for i, (f, g) in enumerate(zip(features, gold)):
    candidates = {resolve(t) for t in retrievers.alias_table.counts(f[schema.MENTION_SPAN])}
    candidates.discard(None)
    if len(candidates) >= 2 and resolve(g) in candidates:
      keep.append(i)
  blank = [dict(features[i], **{schema.MENTION_LEFT: "", schema.MENTION_RIGHT: "",
                                 schema.MENTION_SENTENCE: ""}) for i in keep]
  systems = _score_subset(keep, gold, rankings, retrievers)
  systems["DEER (no context)"] = metrics.score_rankings(
      retrievers.deer(blank)[0], [gold[i] for i in keep], retrievers.kb_titles,
      retrievers.resolver, KS)
  return {"num_mentions": len(keep), "systems": systems}


def empty_heldout_message(extract_dir: str) -> str:
  """Why the extraction in `extract_dir` has no held-out mention, for an error or a warning."""
  manifest = records.require_extraction(extract_dir)
  counts = manifest.get("counts", {})
  fraction = manifest.get("heldout_fraction")
  detail = []
  if fraction is not None:
    detail.append(f"heldout_fraction {fraction}")
  if counts.get("articles") is not None:
    detail.append(f"{counts['articles']} articles")
  if counts.get(schema.TRAIN_MENTIONS_PREFIX) is not None:
    detail.append(f"{counts[schema.TRAIN_MENTIONS_PREFIX]} training mentions")
  return (f"{extract_dir}: the held-out split has 0 mentions"
          + (f" ({', '.join(detail)})" if detail else "")
          + "; re-extract with a larger --heldout_fraction (0.001 holds out about one page in "
          "a thousand)")


def _check_scorable(name: str, spec: str, gold: Sequence[str], retrievers: "Retrievers") -> None:
  """Raises ValueError when no mention of a dataset can be scored (all NIL); warns when none
  has its gold entity in the KB (in-KB recall is then undefined, shown as n/a)."""
  counts = metrics.score_rankings([[] for _ in gold], gold, retrievers.kb_titles,
                                  retrievers.resolver, KS)
  if not counts["num_mentions"]:
    raise ValueError(f"{spec}: none of its {len(gold)} mentions can be scored ("
                     f"{counts['num_nil']} NIL); nothing to evaluate")
  if not counts["num_in_kb"]:
    logging.warning("%s: none of its %d scored mentions has its gold entity in the KB of %d "
                    "entities (%d missing, %d unresolvable): in-KB recall is undefined (n/a); "
                    "overall recall counts them as misses", name, counts["num_mentions"],
                    len(retrievers.kb_titles), counts["num_gold_missing_from_kb"],
                    counts["num_unresolvable_gold"])


def evaluate_workspace(root: str, dataset_specs: Sequence[str] = (), max_mentions: int = 0,
                       index_kind: str = "brute_force", fit_nil_calibrator: str = "",
                       nil_dataset: str = "", nil_calibrator: Optional[str] = "auto",
                       nil_objective: str = "accuracy",
                       systems: Sequence[str] = SYSTEMS) -> dict:
  """Evaluates the systems on the held-out mentions and on each dataset; writes the report.

  `systems` (reports.SYSTEMS by default) chooses the systems scored; it must hold DEER. Without
  the baselines an evaluation over all of Wikipedia takes about 20 instead of 28 minutes (BM25
  over 5.9M titles is built and searched on the CPU).

  NIL prediction (retrieval.nil, evaluation.nil_calibration): with `fit_nil_calibrator` (a
  path) a calibrator is fitted on DEER's scores of the dataset named `nil_dataset` (default:
  the first dataset given with a NIL-labelled mention) and written there; that calibrator, or
  else `nil_calibrator` ('auto': WS/export/nil_calibrator.json when it exists; None or '':
  none), is scored on every section with a NIL-labelled mention: report section "nil"
  (NIL precision / recall / F1, accuracy over all mentions, reliability bins; in-sample on the
  dataset it was fitted on), and WS/reports/nil_reliability.png.

  Every input is read and checked before the model is loaded and before any report file is
  written, so a run that has nothing to score leaves an earlier report as it was. An empty
  held-out split is skipped with a warning when datasets are given (the report then has no
  top-level "systems", and "heldout_skipped" says why).

  Returns:
    The report written to WS/reports/eval.json (see the module docstring).

  Raises:
    ValueError: naming the extraction when the held-out split has no mention and no dataset
      is given; naming the file of a dataset with no mention, or with no mention that can be
      scored (all NIL); for malformed datasets (datasets.load).
    FileNotFoundError: naming a missing stage output or dataset file.
  """
  if nil_objective not in nil_lib.OBJECTIVES:
    raise ValueError(f"NIL objective must be one of {nil_lib.OBJECTIVES}, got "
                     f"{nil_objective!r}")
  if nil_dataset and not fit_nil_calibrator:
    raise ValueError("a NIL dataset is given but no path to fit the NIL calibrator to")
  systems = check_systems(systems)
  ws = Workspace(root)
  heldout = read_heldout_mentions(ws.extract, max_mentions)
  sections, specs, skipped = {}, {}, None
  if heldout:
    sections["heldout"] = (heldout, [m[schema.ENTITY_TITLE] for m in heldout])
    specs["heldout"] = ws.extract
  elif dataset_specs:
    skipped = empty_heldout_message(ws.extract)
    logging.warning("%s; held-out evaluation skipped, evaluating the %d dataset(s) given",
                    skipped, len(dataset_specs))
  else:
    raise ValueError(empty_heldout_message(ws.extract) + ", or evaluate on --dataset "
                     "FORMAT:PATH; nothing was evaluated")
  for spec in dataset_specs:
    mentions = datasets_lib.load(spec)
    name = datasets_lib.name_of(spec)
    if name in sections:
      raise ValueError(f"dataset {spec!r}: another dataset (or the held-out split) is already "
                       f"reported as {name!r}; rename the file")
    sections[name] = (datasets_lib.all_features(mentions), [m.gold for m in mentions])
    specs[name] = spec.partition(":")[2]
  if fit_nil_calibrator:
    nil_dataset = _nil_dataset(nil_dataset, sections)
  retrievers = Retrievers(ws, index_kind, systems)
  for name, (_, gold) in sections.items():
    _check_scorable(name, specs[name], gold, retrievers)
  # Read (and checked against the model) before the evaluation runs.
  given_calibrator = None if fit_nil_calibrator else nil_lib.find_calibrator(
      ws.export, nil_calibrator, retrievers.index.model_fingerprint)
  report = {"num_entities": len(retrievers.titles), "index": index_kind,
            "systems_evaluated": list(systems),
            "model_fingerprint": retrievers.index.model_fingerprint, "datasets": {}}
  if skipped:
    report["heldout_skipped"] = skipped
  misses, outcomes = [], {}
  for name, (features, gold) in sections.items():
    section = evaluate_mentions(retrievers, features, gold)
    all_rankings = section.pop("_rankings")
    outcomes[name] = (section.pop("_deer_scores"),) + metrics.top1_outcomes(
        all_rankings["DEER"], gold, retrievers.kb_titles, retrievers.resolver)
    if name == "heldout":
      section["by_gold_seen_in_training"] = split_by_training_gold(
          gold, all_rankings, retrievers, ws.extract)
      section["ambiguous_spans"] = split_ambiguous_spans(features, gold, all_rankings,
                                                         retrievers)
      by_source = split_by_link_source(features, gold, all_rankings, retrievers)
      if by_source:
        section["by_link_source"] = by_source
    rankings = all_rankings["DEER"]
    misses.extend(_deer_misses(name, features, gold, rankings, retrievers))
    report["datasets"][name] = section
  held = report["datasets"].get("heldout")
  if held is not None:
    report["num_mentions"] = held["num_mentions"]
    report["systems"] = {name: {f"recall@{k}": held["systems"][name][f"recall@{k}"]
                                for k in KS} for name in systems}
  calibrator = _nil_calibrator(ws, report, outcomes, fit_nil_calibrator, nil_dataset,
                               given_calibrator, nil_calibrator, nil_objective, specs)
  os.makedirs(ws.reports, exist_ok=True)
  if calibrator is not None:
    if fit_nil_calibrator:
      calibrator.save(fit_nil_calibrator)
    reports.plot_reliability(report, os.path.join(ws.reports, reports.RELIABILITY_FILE))
  fileio.write_text_atomically(os.path.join(ws.reports, reports.MISSES_FILE),
                    "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in misses))
  fileio.write_text_atomically(os.path.join(ws.reports, reports.TABLE_FILE),
                               reports.format_markdown(report))
  reports.plot_recall_curves(report, os.path.join(ws.reports, reports.CURVE_FILE))
  fileio.write_text_atomically(os.path.join(root, reports.REPORT_FILE),
                    json.dumps(report, indent=2, sort_keys=True))
  return report


def _nil_dataset(name: str, sections: dict) -> str:
  """The dataset the NIL calibrator is fitted on: `name`, or the first dataset with a
  NIL-labelled mention. ValueError when there is none or `name` is not evaluated."""
  if name:
    if name not in sections:
      raise ValueError(f"NIL dataset {name!r} is not among the evaluated sets "
                       f"{sorted(sections)}; give it with --dataset")
    return name
  for candidate, (_, gold) in sections.items():
    if any(metrics.is_nil_label(g) for g in gold):
      return candidate
  raise ValueError("no evaluated dataset has a NIL-labelled mention to fit the NIL calibrator "
                   "on; give one with --dataset (e.g. AIDA testa, --NME-- gold)")


def _nil_calibrator(ws, report, outcomes, fit_path, fit_dataset, given, apply_path, objective,
                    specs):
  """Fits (to `fit_path`, on `fit_dataset`) the NIL calibrator, or takes the `given` one
  (read from `apply_path`), and adds the "nil" section of every dataset with a mention whose
  answer is NIL; returns the calibrator or None. The artifact is saved by the caller, with
  the other report files."""
  fingerprint = report["model_fingerprint"]
  if fit_path:
    scores, gold_nil, top1_correct, not_in_kb = outcomes[fit_dataset]
    calibrator = nil_calibration.fit_calibrator(
        scores, top1_correct, gold_nil, objective, gold_not_in_kb=not_in_kb,
        info={"model_fingerprint": fingerprint, "index": report["index"],
              "num_entities": report["num_entities"],
              "fitted_on": {"dataset": fit_dataset, "path": os.path.abspath(specs[fit_dataset]),
                            "num_nil_label": report["datasets"][fit_dataset]["num_nil"]}})
    where = os.path.abspath(fit_path)
  else:
    calibrator = given
    if calibrator is None:
      return None
    where = os.path.abspath(apply_path if apply_path != "auto" else
                            os.path.join(ws.export, nil_lib.NIL_CALIBRATOR_FILE))
  report["nil_calibrator"] = {"path": where, **calibrator.to_dict()}
  scored = nil_calibration.evaluate_sections(calibrator, outcomes,
                                             fit_dataset if fit_path else None)
  for name, nil in scored.items():
    report["datasets"][name]["nil"] = nil
  return calibrator


def _deer_misses(dataset, features, gold, rankings, retrievers) -> List[dict]:
  """In-KB mentions whose gold entity DEER did not rank first (for error analysis)."""
  out = []
  for f, g, ranking in zip(features, gold, rankings):
    resolved = metrics.resolve_title(g, retrievers.resolver)
    if resolved is None or resolved not in retrievers.kb_titles:
      continue
    top = [metrics.resolve_title(t, retrievers.resolver) for t in ranking]
    if top and top[0] == resolved:
      continue
    rank = top.index(resolved) + 1 if resolved in top else None
    out.append({"dataset": dataset, "mention": f[schema.MENTION_SPAN],
                "context": f[schema.MENTION_SENTENCE], "gold": resolved,
                "gold_rank": rank, "top5": ranking[:5]})
  return out
