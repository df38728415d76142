"""The evaluation report: its systems and cut-offs, files, Markdown tables and plots.

The report compares DEER with the paper's baselines (Gillick et al. 2019, Table 2: AT-Prior,
AT-Ext, BM25) by recall@k; `format_table` prints the paper's layout, `format_markdown` writes
WS/reports/eval.md, `plot_recall_curves` the recall@k curves, `plot_rounds` the paper's
Figure 2 (recall after each hard negative mining round) and `plot_reliability` the NIL
calibrator's reliability diagram (predicted P(top-1 right) against observed accuracy). WORKSPACE.md gives the JSON layout.
"""

import os
from typing import Sequence

KS = (1, 10, 100)
# The paper's systems (Table 2), then AT-Prior+TR (titles and redirects as aliases too).
SYSTEMS = ("DEER", "AT-Prior", "AT-Ext", "BM25", "AT-Prior+TR")
REPORT_FILE = os.path.join("reports", "eval.json")
TABLE_FILE = "eval.md"
CURVE_FILE = "recall_at_k.png"
MISSES_FILE = "deer_misses.jsonl"
ROUNDS_FILE = "recall_by_round.png"
RELIABILITY_FILE = "nil_reliability.png"


def _in_kb_recall(section: dict, scores: dict, k: int) -> str:
  """In-KB recall@k as printed: 'n/a' when no mention of the section has its gold in the KB
  (the JSON report's 0.0 then has an empty denominator)."""
  return f"{scores[f'recall@{k}']:.3f}" if section["num_in_kb"] else "n/a"


def _heldout_skipped(report: dict) -> list:
  reason = report.get("heldout_skipped")
  return [f"held-out mentions: skipped ({reason})"] if reason else []


def systems_of(scores: dict) -> list:
  """The systems of a {system: ...} mapping of the report, in SYSTEMS order (an evaluation may
  score a subset, e.g. DEER alone)."""
  return [system for system in SYSTEMS if system in scores]


def format_markdown(report: dict) -> str:
  """Markdown tables like the paper's Table 2, one per dataset, with the counts."""
  lines = [f"# Entity retrieval recall ({report['num_entities']} entities, "
           f"index: {report['index']})", ""]
  lines += [line + "\n" for line in _heldout_skipped(report)]
  for name, section in report["datasets"].items():
    lines += [f"## {name}", "",
              f"{section['num_mentions']} mentions: {section['num_in_kb']} with gold in the KB, "
              f"{section['num_gold_missing_from_kb']} gold missing from the KB, "
              f"{section['num_unresolvable_gold']} unresolvable, {section['num_nil']} NIL "
              "(not scored). In-KB recall (overall recall in parentheses).", "",
              "| system | " + " | ".join(f"R@{k}" for k in KS) + " |",
              "|---|" + "---|" * len(KS)]
    for system in systems_of(section["systems"]):
      s = section["systems"][system]
      lines.append(f"| {system} | " + " | ".join(
          f"{_in_kb_recall(section, s, k)} ({s[f'overall_recall@{k}']:.3f})" for k in KS)
                   + " |")
    lines.append("")
    split = section.get("by_gold_seen_in_training")
    if split:
      n = {part: split[part]["DEER"]["num_in_kb"] for part in split}
      lines += [f"In-KB recall by whether the gold entity is the gold of a training mention "
                f"(seen: {n['seen']} mentions, unseen: {n['unseen']}):", "",
                "| system | " + " | ".join(f"seen R@{k}" for k in KS) + " | "
                + " | ".join(f"unseen R@{k}" for k in KS) + " |",
                "|---|" + "---|" * (2 * len(KS))]
      for system in systems_of(split["seen"]):
        lines.append(f"| {system} | " + " | ".join(
            f"{split[part][system][f'recall@{k}']:.3f}" for part in ("seen", "unseen")
            for k in KS) + " |")
      lines.append("")
    by_source = section.get("by_link_source")
    if by_source:
      lines += ["In-KB recall by where the link was written (prose: running text; table: a "
                "cell, whose sentence is the cell; template: infobox values, citations):", "",
                "| link source | mentions in KB | " + " | ".join(
                    f"{system} R@1 / R@100" for system in systems_of(
                        next(iter(by_source.values())))) + " |",
                "|---|---|" + "---|" * len(systems_of(next(iter(by_source.values()))))]
      for source, systems in by_source.items():
        lines.append(f"| {source} | {systems['DEER']['num_in_kb']} | " + " | ".join(
            f"{systems[system]['recall@1']:.3f} / {systems[system]['recall@100']:.3f}"
            for system in systems_of(systems)) + " |")
      lines.append("")
    lines += nil_markdown(section.get("nil"))
    ambiguous = section.get("ambiguous_spans")
    if ambiguous and ambiguous["num_mentions"]:
      lines += [f"In-KB recall on the {ambiguous['num_mentions']} mentions whose span is an alias "
                "of two or more entities in the training alias table, gold among them (the "
                "context has to decide); DEER (no context) blanks the contexts:", "",
                "| system | " + " | ".join(f"R@{k}" for k in KS) + " |",
                "|---|" + "---|" * len(KS)]
      for system, s in ambiguous["systems"].items():
        lines.append(f"| {system} | " + " | ".join(f"{s[f'recall@{k}']:.3f}" for k in KS) + " |")
      lines.append("")
  return "\n".join(lines)


def nil_markdown(nil) -> list:
  """The NIL prediction table and reliability bins of one dataset (empty without "nil")."""
  if not nil:
    return []
  lines = [f"NIL prediction (NIL when P(top-1 right) < {nil['threshold']:.3f}"
           + ("; in-sample: the calibrator was fitted on this set" if nil.get("in_sample")
              else "") + f"): {nil['num_gold_nil']} of {nil['num_mentions']} mentions have "
           f"NIL gold; {nil['num_gold_not_in_kb']} have a gold entity that is not in the KB "
           f"(always wrong; {nil['num_gold_not_in_kb_predicted_nil']} of them answered NIL, "
           "right if NIL means 'not in the KB': last column).", "",
           "| NIL precision | NIL recall | NIL F1 | accuracy (NIL counted) | accuracy, always "
           "linking | predicted NIL | accuracy, not-in-KB gold as NIL |",
           "|---|---|---|---|---|---|---|",
           f"| {nil['nil_precision']:.3f} | {nil['nil_recall']:.3f} | {nil['nil_f1']:.3f} | "
           f"{nil['accuracy']:.3f} | {nil['accuracy_without_nil']:.3f} | "
           f"{nil['num_predicted_nil']} | {nil['accuracy_not_in_kb_as_nil']:.3f} |", "",
           "Reliability (expected calibration error "
           f"{nil['reliability']['expected_calibration_error']:.3f}):", "",
           "| P(top-1 right) | mentions | mean predicted | observed accuracy |",
           "|---|---|---|---|"]
  for b in nil["reliability"]["bins"]:
    if b["count"]:
      lines.append(f"| {b['low']:.1f}-{b['high']:.1f} | {b['count']} | "
                   f"{b['mean_probability']:.3f} | {b['accuracy']:.3f} |")
  return lines + [""]


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")  # files only, no display
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _save_png(plt, fig, path: str):
  """Writes `fig` to `path` atomically (temp file + rename) and frees it."""
  fig.tight_layout()
  fig.savefig(path + ".tmp.png", dpi=100)
  plt.close(fig)
  os.replace(path + ".tmp.png", path)


def plot_recall_curves(report: dict, path: str):
  """Writes a PNG of in-KB recall@k, k = 1..100, per system, one panel per dataset."""
  plt = _pyplot()
  names = list(report["datasets"])
  fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
  for ax, name in zip(axes[0], names):
    section = report["datasets"][name]
    for system in systems_of(section["systems"]):
      curve = section["recall_curves"][system]
      ax.plot(range(1, len(curve) + 1), curve, label=system)
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("in-KB recall@k")
    ax.set_ylim(0, 1)
    ax.set_title(f"{name} ({section['num_in_kb']} in-KB mentions)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
  _save_png(plt, fig, path)


def plot_reliability(report: dict, path: str):
  """Writes a PNG reliability diagram: per dataset with a "nil" section, observed accuracy of
  the top-1 entity against the mean predicted P(top-1 right) in each probability bin."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 4.5))
  ax.plot([0, 1], [0, 1], color="gray", linestyle=":", label="perfect calibration")
  for name, section in report["datasets"].items():
    nil = section.get("nil")
    if not nil:
      continue
    bins = [b for b in nil["reliability"]["bins"] if b["count"]]
    ax.plot([b["mean_probability"] for b in bins], [b["accuracy"] for b in bins], marker="o",
            label=f"{name} ({nil['num_mentions']}; ECE "
            f"{nil['reliability']['expected_calibration_error']:.3f})")
  threshold = report.get("nil_calibrator", {}).get("threshold")
  if threshold is not None:
    ax.axvline(threshold, color="red", linestyle="--", alpha=0.5, label=f"NIL below {threshold:.2f}")
  ax.set_xlabel("predicted P(top-1 entity right)")
  ax.set_ylabel("observed accuracy of the top-1 entity")
  ax.set_xlim(0, 1)
  ax.set_ylim(0, 1)
  ax.grid(True, alpha=0.3)
  ax.legend(loc="upper left", fontsize=8)
  _save_png(plt, fig, path)


def format_table(report: dict) -> str:
  """The paper's Table 2 layout: one row per system, recall@1/@10/@100 per dataset."""
  lines = _heldout_skipped(report)
  for name, section in report["datasets"].items():
    lines.append(f"\n{name}: {section['num_mentions']} mentions "
                 f"({section['num_in_kb']} with gold in the KB of {report['num_entities']} "
                 f"entities, {section['num_gold_missing_from_kb']} missing, "
                 f"{section['num_nil']} NIL); in-KB recall")
    systems = systems_of(section["systems"])
    width = max([10] + [len(system) + 1 for system in systems])  # 'AT-Prior+TR' is 11 wide
    lines.append(f"  {'system':<{width}}" + "".join(f"{'R@' + str(k):>9}" for k in KS))
    for system in systems:
      s = section["systems"][system]
      lines.append(f"  {system:<{width}}" + "".join(f"{_in_kb_recall(section, s, k):>9}"
                                                    for k in KS))
    nil = section.get("nil")
    if nil:
      lines.append(f"  NIL (p < {nil['threshold']:.3f}{', in-sample' if nil['in_sample'] else ''})"
                   f": precision {nil['nil_precision']:.3f}, recall {nil['nil_recall']:.3f}, "
                   f"F1 {nil['nil_f1']:.3f}; accuracy {nil['accuracy']:.3f} "
                   f"(always linking {nil['accuracy_without_nil']:.3f}); "
                   f"{nil['num_gold_nil']} NIL gold")
  return "\n".join(lines)


def plot_rounds(rounds: Sequence[dict], path: str):
  """Held-out recall@1 and recall@100 of DEER after each mining round (paper Figure 2), PNG;
  also recall@1 on mentions of entities seen / unseen in training when the rounds have them."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 4))
  x = [r["round"] for r in rounds]
  for key in ("recall@1", "recall@100", "seen_recall@1", "unseen_recall@1"):
    if all(key in r for r in rounds):
      ax.plot(x, [r[key] for r in rounds], marker="o", label=key.replace("_", " "),
              linestyle="--" if "seen_" in key else "-")
  ax.set_xlabel("hard negative mining round (0: in-batch negatives only)")
  ax.set_ylabel("held-out recall")
  ax.set_xticks(x)
  ax.set_ylim(0, 1)
  ax.grid(True, alpha=0.3)
  ax.legend(loc="lower right")
  _save_png(plt, fig, path)
