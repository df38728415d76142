"""`dense-entity` command: `demo` (the end-to-end job), `link` (top-k entities for mentions in
text), `kb` (add, change and remove entities of a built workspace) and `tradeoff` (the paper's
Table 3 on a workspace)."""

import argparse
import json
import logging
import os
import sys
from typing import Optional, Sequence, TextIO


def _demo(args):
  from dense_entity import demo  # pylint: disable=g-import-not-at-top
  demo.run_demo(args.workspace, args.input, descriptions=args.descriptions,
                titles=args.titles, redirects_tsv=args.redirects_tsv,
                heldout_fraction=args.heldout_fraction, preset=args.preset,
                train_steps=args.train_steps, glove=args.glove, datasets=args.dataset,
                mining_rounds=args.mining_rounds, steps_per_round=args.steps_per_round,
                share_span_title_encoder=args.share_span_title_encoder,
                context_match_dim=args.context_match_dim,
                context_match_weight=args.context_match_weight,
                char_ngrams=args.char_ngrams or None, name_match_dim=args.name_match_dim,
                name_match_weight=args.name_match_weight,
                logq_correction=args.logq_correction, link_sources=args.link_sources,
                max_heldout_mentions=args.max_heldout_mentions, mining_index=args.mining_index,
                index_kinds=_index_kinds(args.index_kinds))


def _index_kinds(value: str):
  from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
  kinds = [k.strip() for k in value.split(",") if k.strip()]
  unknown = [k for k in kinds if k not in index_lib.KINDS]
  if not kinds or unknown or index_lib.BRUTE_FORCE not in kinds:
    raise SystemExit(f"dense-entity demo: --index_kinds must list brute_force and any of ah, "
                     f"ah_tree; got {value!r}")
  return tuple(kinds)


def _read_link_inputs(texts: Sequence[str], stdin: TextIO):
  """Yields (where, line) for each non-blank input, from arguments or stdin."""
  if texts:
    for i, text in enumerate(texts, 1):
      yield f"argument {i}", text
  else:
    for i, line in enumerate(stdin, 1):
      line = line.rstrip("\r\n")
      if line.strip():
        yield f"line {i}", line


def _link(args, stdin: Optional[TextIO] = None, stdout: Optional[TextIO] = None,
          stderr: Optional[TextIO] = None) -> int:
  """Runs `dense-entity link`; returns the exit status (0, or 2 when an input is bad)."""
  from dense_entity.retrieval import retriever as retriever_lib  # pylint: disable=g-import-not-at-top
  stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
  if args.k < 1:
    print("dense-entity link: --k must be >= 1", file=stderr)
    return 2
  items, errors = [], []
  for where, line in _read_link_inputs(args.texts, stdin):
    try:
      items.append((where, line) + retriever_lib.parse_link_input(line, where))
    except retriever_lib.InputError as e:
      errors.append(str(e))
  if errors:
    for message in errors[:20]:
      print(f"dense-entity link: {message}", file=stderr)
    if len(errors) > 20:
      print(f"dense-entity link: ... and {len(errors) - 20} more bad inputs", file=stderr)
    print(f"dense-entity link: {len(errors)} bad input(s); nothing was linked", file=stderr)
    return 2
  if not items:
    print("dense-entity link: no input (give texts as arguments or lines on stdin)",
          file=stderr)
    return 2
  calibrator = None if args.nil_calibrator in ("", "none") else args.nil_calibrator
  try:
    retriever = retriever_lib.EntityRetriever.load(args.workspace, args.index,
                                                   nil_calibrator=calibrator)
  except (FileNotFoundError, ValueError) as e:
    print(f"dense-entity link: cannot load {args.workspace}: {e}", file=stderr)
    return 1
  mentions, owners = [], []
  for item_index, (_, _, plain, spans, _) in enumerate(items):
    for mention_index, (start, end) in enumerate(spans):
      mentions.append((plain, start, end))
      owners.append((item_index, mention_index))
  results = retriever.link(mentions, k=args.k)
  threshold = retriever.nil_calibrator.threshold if retriever.nil_calibrator else None
  for (text, start, end), (item_index, mention_index), result in zip(mentions, owners,
                                                                     results):
    where, _, _, spans, extra = items[item_index]
    entities = result.entities
    if args.json:
      record = {"input": where, "mention": mention_index, "text": text, "start": start,
                "end": end, "span": text[start:end], **extra}
      if threshold is not None:
        record.update({"entity": result.entity, "nil": result.is_nil,
                       "probability": round(result.probability, 6)})
      record["entities"] = [{"title": t, "score": round(s, 6)} for t, s in entities]
      print(json.dumps(record, ensure_ascii=False), file=stdout)
      continue
    marked = f"{text[:start]}[[{text[start:end]}]]{text[end:]}"
    label = where + (f", mention {mention_index + 1}" if len(spans) > 1 else "")
    print(f"{label}: {marked}", file=stdout)
    if threshold is not None:
      answer = ("NIL (no entity of the KB)" if result.is_nil else result.entity)
      print(f"  -> {answer}  [P(top-1 right) = {result.probability:.3f}, NIL below "
            f"{threshold:.3f}]", file=stdout)
    for rank, (title, score) in enumerate(entities, 1):
      print(f"  {rank:>3}. {score:7.4f}  {title}", file=stdout)
  return 0


def _kb(args, stdout: Optional[TextIO] = None) -> int:
  """Runs `dense-entity kb add|update|remove|rebalance|status`; returns the exit status."""
  from dense_entity.retrieval import kb_update  # pylint: disable=g-import-not-at-top
  from dense_entity.retrieval import kb_versions  # pylint: disable=g-import-not-at-top
  stdout = stdout or sys.stdout
  if args.kb_command == "status":
    index_dir = kb_versions.resolve_index_dir(os.path.join(args.workspace, "index"))
    manifest = kb_versions.read_manifest(index_dir)
    if manifest is None:
      print(f"{index_dir}: KB version 0 (as built; never updated)", file=stdout)
    else:
      print(json.dumps(manifest, indent=2, sort_keys=True), file=stdout)
    return 0
  if args.keep_versions < 1:
    raise ValueError("--keep_versions must be >= 1")

  def step(name):
    if args.verbose:
      print(f"dense-entity kb {args.kb_command}: {name}", file=sys.stderr)

  if args.kb_command == "rebalance":
    manifest = kb_update.rebalance(args.workspace, keep_versions=args.keep_versions,
                                   serving=not args.no_serving, step=step)
    print(f"KB version {manifest['kb_version']}: ScaNN indexes retrained on "
          f"{manifest['num_rows']} rows ("
          + ", ".join(f"{kind} {entry['seconds']:.1f} s"
                      for kind, entry in manifest["indexes"].items())
          + f"); {manifest['seconds']['total']:.1f} s in all", file=stdout)
    return 0
  records = kb_update.read_entities(args.input)
  ignored = kb_update.ignored_fields(records)
  if ignored:
    print(f"dense-entity kb {args.kb_command}: fields not used (records): "
          + ", ".join(f"{k} ({v})" for k, v in ignored.items()), file=sys.stderr)

  manifest = kb_update.update_kb(args.workspace, args.kb_command, records,
                                 keep_versions=args.keep_versions,
                                 serving=not args.no_serving, step=step)
  indexes = ", ".join(f"{kind} {entry['seconds']:.1f} s"
                      + (" (rebalance advised)" if entry.get("rebalance_advised") else "")
                      for kind, entry in manifest["indexes"].items())
  print(f"KB version {manifest['kb_version']}: {args.kb_command} {len(records)} entities -> "
        f"{manifest['num_entities']} entities, {manifest['num_rows']} rows; model "
        f"{manifest['model_fingerprint']}; {indexes}"
        + (f"; serving re-exported {manifest['serving']['seconds']:.1f} s"
           if manifest.get("serving") else "")
        + f"; {manifest['seconds']['total']:.1f} s in all", file=stdout)
  return 0


def _tradeoff(args):
  from dense_entity.evaluation import tradeoff  # pylint: disable=g-import-not-at-top
  kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
  report = tradeoff.measure_tradeoff(args.workspace, kinds, k=args.k,
                                     max_mentions=args.max_mentions,
                                     single_queries=args.single_queries, repeats=args.repeats,
                                     dataset_specs=args.dataset)
  print(tradeoff.format_table(report))
  print(f"report: {os.path.join(args.workspace, tradeoff.REPORT_FILE)}")
  return 0


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="dense-entity", description=__doc__)
  sub = parser.add_subparsers(dest="command", required=True)
  demo = sub.add_parser("demo", help="extract, train, export, index and evaluate end to end")
  demo.add_argument("--workspace", default="workspace", help="output directory")
  demo.add_argument("--input", action="append", help="dump glob (repeatable); default: "
                    "gensim's packaged Wikipedia sample")
  demo.add_argument("--descriptions", help="JSONL of entity descriptions ({title, text})")
  demo.add_argument("--titles", action="append", default=[],
                    help="title list glob (repeatable; one title per line, plain, .gz or "
                    ".bz2): every title becomes a KB entity (a KB of all Wikipedia)")
  demo.add_argument("--redirects_tsv", action="append", default=[],
                    help="redirect list glob (repeatable; 'redirect<TAB>target' lines): "
                    "redirect titles become aliases of their targets")
  demo.add_argument("--heldout_fraction", type=float, default=0.1,
                    help="fraction of source pages held out for evaluation")
  demo.add_argument("--preset", help="training preset: small (default), paper, tiny; a "
                    "workspace with a model keeps the model's own, and refuses another")
  demo.add_argument("--train_steps", type=int, help="override the preset's training steps")
  demo.add_argument("--glove", help="GloVe text file initialising unigram embeddings")
  demo.add_argument("--dataset", action="append", default=[],
                    help="extra evaluation set FORMAT:PATH (aida:, jsonl:, nif:, wikinews:)")
  demo.add_argument("--mining_rounds", type=int, default=0,
                    help="hard negative mining rounds after round 0 (on the small default "
                    "input they lower recall; see README)")
  demo.add_argument("--mining_index", choices=("brute_force", "ah_tree"), default="brute_force",
                    help="index each mining round searches: brute_force (exact) or ah_tree (for "
                    "all of Wikipedia, where exact search of every training mention takes "
                    "hours on 2 cores)")
  demo.add_argument("--steps_per_round", type=int, default=1000,
                    help="training steps after each mining round")
  demo.add_argument("--share_span_title_encoder", action="store_true", default=None,
                    help="one feed-forward encoder for the mention span and the entity title "
                    "(not in the paper; helps entities unseen in training)")
  demo.add_argument("--context_match_dim", type=int,
                    help="width of the lexical context-description channel (not in the paper; "
                    "the preset's value unless given; 0 leaves it out)")
  demo.add_argument("--context_match_weight", type=float,
                    help="mixing weight of that channel, in (0, 1)")
  demo.add_argument("--char_ngrams", action="store_true",
                    help="character trigrams in the span and title bags (not in the paper)")
  demo.add_argument("--name_match_dim", type=int,
                    help="width of the lexical name channel: character trigrams of the span "
                    "vs the entity's title and aliases (not in the paper; 0: none)")
  demo.add_argument("--name_match_weight", type=float,
                    help="mixing weight of the name channel, in (0, 1)")
  demo.add_argument("--logq_correction", action=argparse.BooleanOptionalAction, default=None,
                    help="subtract log q(entity) from the in-batch logits (sampling-bias "
                    "correction; not in the paper; see README 'All of Wikipedia')")
  demo.add_argument("--link_sources",
                    help="comma-separated link sources whose mentions are trained on (prose, "
                    "table, template, caption, gallery; default all); e.g. "
                    "prose,template,caption,gallery leaves out table cells")
  demo.add_argument("--max_heldout_mentions", type=int, default=0,
                    help="evaluate a fixed uniform sample of this many held-out mentions "
                    "(0: all; large inputs hold tens of thousands)")
  demo.add_argument("--index_kinds", default="brute_force,ah,ah_tree",
                    help="indexes built after the last round, comma-separated (brute_force, "
                    "used by the evaluation, is required); e.g. brute_force,ah_tree for all of "
                    "Wikipedia, where each ScaNN build holds the float32 matrix twice")
  demo.set_defaults(fn=_demo)

  link = sub.add_parser(
      "link", help="top-k entities for mentions marked [[...]] in text",
      description="Prints the top-k entities (cosine scores) for each mention. Inputs: the "
      "TEXT arguments, or else stdin, one per line (blank lines skipped). An input is text "
      "with one or more mentions marked [[...]] (one result per mention; the marked text is "
      "the mention as written, '[[a|b]]' is the mention 'a|b', not a wiki link), or a JSON "
      "object "
      "{\"text\": ..., \"start\": S, \"end\": E} (character offsets, end exclusive) or "
      "{\"text\": \"...[[mention]]...\"}, optionally with an \"id\" copied to the output. "
      "With a NIL calibrator (EXPORT/nil_calibrator.json or --nil_calibrator) each mention "
      "also gets its answer: the top entity, or NIL when the calibrated probability that the "
      "top entity is right is below the calibrator's threshold. "
      "Bad inputs are reported by line number and nothing is linked (exit status 2).",
      epilog="example: dense-entity link --workspace WS "
      "'[[Phoenix]] once again played a late night show'")
  link.add_argument("--workspace", default="workspace",
                    help="workspace root (uses WS/export and WS/index) or an export directory "
                    "with the index directory beside it")
  link.add_argument("--k", type=int, default=5, help="entities per mention")
  link.add_argument("--index", default="brute_force", choices=("brute_force", "ah", "ah_tree"),
                    help="index searched")
  link.add_argument("--json", action="store_true",
                    help="print one JSON object per mention (JSONL); with a NIL calibrator "
                    "it has \"entity\" (null for NIL), \"nil\" and \"probability\"")
  link.add_argument("--nil_calibrator", default="auto",
                    help="NIL calibrator JSON (python -m dense_entity.evaluate "
                    "--fit_nil_calibrator): answer NIL when P(top-1 right) is below its "
                    "threshold; default: EXPORT/nil_calibrator.json when present; 'none': "
                    "always link the top entity")
  link.add_argument("texts", nargs="*", metavar="TEXT", help="text with [[mention]] marked")
  link.set_defaults(fn=_link)

  kb = sub.add_parser(
      "kb", help="add, change or remove entities of a built workspace (no retraining)",
      description="Updates the KB of a workspace: new and changed entities are encoded with "
      "the exported entity encoder and every index (brute force, ScaNN AH, AH+tree), the "
      "titles, the row map, the KB's aliases (redirects.tsv, alias_counts.tsv) and the serving "
      "model are updated as one new KB version, published atomically (WS/index becomes a "
      "symlink to WS/index.kb/vNNNNNN): readers see the KB before or after, never between; a "
      "failed or killed update leaves the previous version.",
      epilog="examples: dense-entity kb add --workspace WS new.jsonl; "
      "dense-entity kb remove --workspace WS titles.txt; dense-entity kb status --workspace WS; "
      "dense-entity kb rebalance --workspace WS")
  kb_sub = kb.add_subparsers(dest="kb_command", required=True)
  for name, help_text in (
      ("add", "add entities not in the KB"),
      ("update", "re-encode entities of the KB from new fields (aliases kept unless given)"),
      ("remove", "remove entities from the KB"),
      ("rebalance", "retrain the ScaNN indexes on the current rows (advised in the KB "
       "manifest after many updates; as costly as building them)")):
    p = kb_sub.add_parser(name, help=help_text, description=help_text + (
        "." if name == "rebalance" else ". INPUT: JSONL of {\"title\", \"text\", "
        "\"categories\", \"aliases\"} (only title required; lists or '|'-joined strings; "
        "other fields are ignored and counted), or one title per line."))
    p.add_argument("--workspace", default="workspace", help="workspace root")
    p.add_argument("--keep_versions", type=int, default=2,
                   help="KB versions kept in WS/index.kb (the new one included)")
    p.add_argument("--no_serving", action="store_true",
                   help="do not re-export the serving model (WS/export/serving then keeps "
                   "pointing at WS/index/serving, absent from the new version)")
    p.add_argument("--verbose", action="store_true", help="print each finished step")
    if name != "rebalance":
      p.add_argument("input", metavar="INPUT", help="JSONL of entities, or titles")
  status = kb_sub.add_parser("status", help="print the current KB version's manifest")
  status.add_argument("--workspace", default="workspace", help="workspace root")
  kb.set_defaults(fn=_kb)

  tradeoff = sub.add_parser(
      "tradeoff", help="search time, recall and size of each index (paper Table 3)",
      description="Measures each index of WS/index on the held-out mentions; prints the table "
      "and writes WS/reports/tradeoff.json.")
  tradeoff.add_argument("--workspace", default="workspace", help="workspace root")
  tradeoff.add_argument("--kinds", default="brute_force,ah,ah_tree",
                        help="comma-separated index kinds")
  tradeoff.add_argument("--k", type=int, default=100, help="neighbours per search")
  tradeoff.add_argument("--max_mentions", type=int, default=0,
                        help="held-out mentions used (0: all)")
  tradeoff.add_argument("--single_queries", type=int, default=1000,
                        help="mentions timed one at a time (0: all)")
  tradeoff.add_argument("--repeats", type=int, default=3,
                        help="batched searches timed (the fastest counts)")
  tradeoff.add_argument("--dataset", action="append", default=[],
                        help="evaluation set FORMAT:PATH whose recall each index also reports")
  tradeoff.set_defaults(fn=_tradeoff)
  return parser


def main(argv=None):
  from dense_entity.common import entry  # pylint: disable=g-import-not-at-top
  entry.quiet_native_logs()  # before a subcommand loads TensorFlow
  logging.basicConfig(level=logging.WARNING)
  parser = build_parser()
  args = parser.parse_args(argv)
  from dense_entity.common import errors  # pylint: disable=g-import-not-at-top
  # Ctrl-C or SIGTERM: the stages' cleanup runs on the way out, then one line (errors).
  with errors.interrupts_raise() as received:
    try:
      return args.fn(args)
    except BaseException as e:  # pylint: disable=broad-except
      status = errors.interrupted_status(received, e, f"dense-entity {args.command}")
      if status is not None:
        return status
      if not isinstance(e, (FileNotFoundError, ValueError)):
        raise
      # Bad input or a missing stage output: the message names the file; no traceback.
      print(f"dense-entity {args.command}: error: {e}", file=sys.stderr)
      return 2


if __name__ == "__main__":
  sys.exit(main())
