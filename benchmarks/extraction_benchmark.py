"""Extraction benchmark on real dumps: our wikitext parsing and Beam pipeline vs wikiextractor.

Issue 3, item 5. Every method runs on the same files (default: every ../shared/data/enwiki/*.bz2)
in the same run, each in its own subprocess so that its peak memory is its own:

- ours, parse: beam_pipelines.dumps.xml_dump.iter_pages over every file and
  beam_pipelines.parsers.wikitext.parse_article on every article (namespace 0, not a
  redirect): plain text, mentions (links with offsets), categories, first paragraph. The
  per-page work of the pipeline, without Beam (after gc.freeze(), as ParsePageFn.setup).
- ours, pipeline: beam_pipelines.pipelines.extraction.run with the options extract_wikipedia
  runs with (beam_io.default_pipeline_options: Beam's local FnApiRunner, without the
  DirectRunner's attempt to download and start Prism first): in_memory with 1 worker, the
  pages parsed in that process (1p) or in 2 forked worker processes (2p, --parse_processes=2,
  the default on 2 cores), and multi_processing with 2 workers: the whole job (parsing,
  mention features, redirect resolution, entity join, TFRecord/TSV outputs written
  atomically).
- ours_parse_source, ours_pipeline_inmem_2p_source: the same in pure Python
  (DENSE_ENTITY_PURE_PYTHON=1: our parse modules' sources, not the builds setup.py compiles;
  the table's build column says which ran).
- wikiextractor (PyPI `wikiextractor`, the usual dump cleaner) with --links (it keeps links, as
  we do) and --processes 1 and 2, writing its <doc> files into a temporary directory. It yields
  plain text with links; no mention offsets, entities, redirects or alias counts.

Reported per method: work seconds (inside the subprocess, imports excluded) and process wall
seconds, CPU seconds of the work (user + system, of the subprocess and of the worker processes
it started and reaped: the decompressing threads, Beam, the parse and entity pools, and
wikiextractor's own processes) and cores (CPU seconds / work seconds: how much of the machine
the method kept busy), pages/s (pages in the input files, the same for every method),
articles out, links out (ours: mentions kept; wikiextractor: '<a href' in its output),
links/s, the pages/s and the links/s ratios to wikiextractor with 1 and with 2 processes, peak
RSS of the largest process (ru_maxrss from os.wait4, which covers the subprocess and its
reaped children) and the peak of the summed RSS of the whole process tree (sampled from /proc
every --sample_s seconds; worker pools add up).

Then one line per generated long page (issue 14, item 4; --long_page_mb, default 0.5 and 5 MB
of wikitext: paragraphs of 40 sentences with a link each, every 50th paragraph a run-on list of
400 links on one line): seconds of parse_article and of article_mentions (the mention features)
in this process, and seconds per MB, which stays flat when the page work is linear in its length.
Then pages of 2,000, 4,000 and 10,000 unclosed template openers: parse seconds (quadratic in
them: mwparserfromhell's tokenizer), or the seconds until parse_article refuses the page
(parsers.mw_tree.check_unclosed).

With --repeats=N every method runs N times, in rounds (each method once a round, so that a
slower spell of a shared machine falls on all of them); the table gives the median work and
wall seconds of each (and the largest memory), and each run's work seconds follow it.

Usage (from the repository root):
  python -m benchmarks.extraction_benchmark [--files=GLOB[,GLOB]] [--methods=...]
      [--long_page_mb=0.5,5] [--repeats=1]
"""

import gc
import glob
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Tuple

from absl import app
from absl import flags

from dense_entity.common import entry

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = os.path.join(REPO_ROOT, "..", "shared", "data", "enwiki", "*.bz2")
_RESULT_PREFIX = "BENCHMARK_RESULT "
_PAGE_SIZE = resource.getpagesize()

# name -> (worker kind, argument, pure Python); the worker runs in a subprocess, with
# DENSE_ENTITY_PURE_PYTHON=1 for pure Python (our modules' sources, not their compiled builds:
# dense_entity.common.compiled).
METHODS = {
    "ours_parse": ("ours_parse", None, False),
    "ours_parse_source": ("ours_parse", None, True),
    "ours_pipeline_inmem_1p": ("ours_pipeline", "in_memory:1:1", False),
    "ours_pipeline_inmem_2p": ("ours_pipeline", "in_memory:1:2", False),
    "ours_pipeline_inmem_2p_source": ("ours_pipeline", "in_memory:1:2", True),
    "ours_pipeline_mp_2w": ("ours_pipeline", "multi_processing:2:1", False),
    "wikiextractor_1p": ("wikiextractor", "1", False),
    "wikiextractor_2p": ("wikiextractor", "2", False),
}


def build_of_parse() -> str:
  """How this process imported the parse modules that have compiled builds: 'compiled' (all),
  'source' (none: no build, a build older than its source, or DENSE_ENTITY_PURE_PYTHON),
  'mixed', or '-' (none imported)."""
  from dense_entity.common import compiled  # pylint: disable=g-import-not-at-top
  states = set(compiled.import_states().values())
  if not states:
    return "-"
  if states == {compiled.COMPILED}:
    return "compiled"
  return "source" if compiled.COMPILED not in states else "mixed"


# ---------------------------------------------------------------------------------------------
# Workers (run in the subprocess; print one JSON line)
# ---------------------------------------------------------------------------------------------


def cpu_seconds() -> float:
  """User + system CPU seconds so far of this process (all its threads) and of its child
  processes that ended and were waited for (a pool's workers once it is shut down)."""
  own = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _work_ours_parse(files: Sequence[str], _) -> Dict[str, float]:
  # pylint: disable=g-import-not-at-top
  from beam_pipelines.dumps import xml_dump
  from beam_pipelines.parsers import namespaces
  from beam_pipelines.parsers import wikitext
  # pylint: enable=g-import-not-at-top
  gc.freeze()  # as extraction.ParsePageFn.setup does before parsing
  start, cpu = time.perf_counter(), cpu_seconds()
  pages = articles = links = 0
  for path in files:
    for page in xml_dump.iter_pages(path, on_error=lambda e: None):
      pages += 1
      if page.ns != 0 or namespaces.redirect_target(page) is not None:
        continue
      parsed = wikitext.parse_article(page.text, page.title)
      articles += 1
      links += len(parsed.links)
  return {"seconds": time.perf_counter() - start, "cpu_s": cpu_seconds() - cpu,
          "pages_read": pages, "articles": articles, "links": links, "build": build_of_parse()}


def _work_ours_pipeline(files: Sequence[str], mode_workers_processes: str
                        ) -> Dict[str, float]:
  # pylint: disable=g-import-not-at-top
  from beam_pipelines.pipelines import beam_io
  from beam_pipelines.pipelines import extraction
  # pylint: enable=g-import-not-at-top
  mode, workers, processes = mode_workers_processes.split(":")
  # The options extract_wikipedia runs with (its local runner, no Prism download attempt).
  options = beam_io.default_pipeline_options(
      [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"])
  out = tempfile.mkdtemp(prefix="extraction_benchmark_")
  try:
    start, cpu = time.perf_counter(), cpu_seconds()
    stats = extraction.run(list(files), out, pipeline_options=options,
                           parse_processes=int(processes))
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
  finally:
    shutil.rmtree(out, ignore_errors=True)
  return {"seconds": seconds, "cpu_s": cpu, "pages_read": stats.get("pages_read", 0),
          "articles": stats.get("articles", 0), "links": stats.get("links_kept", 0),
          "build": build_of_parse()}


def _work_wikiextractor(files: Sequence[str], processes: str) -> Dict[str, float]:
  from wikiextractor import WikiExtractor  # pylint: disable=g-import-not-at-top
  out = tempfile.mkdtemp(prefix="extraction_benchmark_we_")
  try:
    start, cpu = time.perf_counter(), cpu_seconds()
    for i, path in enumerate(files):
      sys.argv = ["WikiExtractor", path, "-o", os.path.join(out, str(i)), "--processes",
                  processes, "--links", "--quiet"]
      WikiExtractor.main()
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    articles = links = 0
    for name in glob.glob(os.path.join(out, "**", "wiki_*"), recursive=True):
      with open(name, "rb") as f:
        data = f.read()
      articles += data.count(b"<doc ")
      links += data.count(b"&lt;a href=") + data.count(b"<a href=")
  finally:
    shutil.rmtree(out, ignore_errors=True)
  return {"seconds": seconds, "cpu_s": cpu, "pages_read": -1, "articles": articles,
          "links": links}


_WORKERS = {"ours_parse": _work_ours_parse, "ours_pipeline": _work_ours_pipeline,
            "wikiextractor": _work_wikiextractor}


# ---------------------------------------------------------------------------------------------
# Parent: subprocesses, memory, table
# ---------------------------------------------------------------------------------------------


def _tree_rss_bytes(root: int) -> int:
  """Summed resident memory (bytes) of process `root` and all its descendants (Linux /proc)."""
  children: Dict[int, List[int]] = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat", "rb") as f:
        stat = f.read()
    except OSError:
      continue
    ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
    children.setdefault(ppid, []).append(int(name))
  total, todo = 0, [root]
  while todo:
    pid = todo.pop()
    todo.extend(children.get(pid, []))
    try:
      with open(f"/proc/{pid}/statm", "rb") as f:
        total += int(f.read().split()[1]) * _PAGE_SIZE
    except OSError:
      pass
  return total


def run_method(name: str, files: Sequence[str], sample_s: float) -> Dict[str, float]:
  """Runs one method in a subprocess; returns its figures plus wall and memory.

  Returns:
    {'seconds' (work, s), 'cpu_s' (CPU of the work, s: cpu_seconds), 'wall_s' (process, s),
    'pages_read', 'articles', 'links', 'max_rss_mib' (largest process, MiB), 'tree_rss_mib'
    (sampled peak of the sum, MiB)}.

  Raises:
    RuntimeError: the subprocess failed (its output tail in the message).
  """
  kind, argument, pure_python = METHODS[name]
  env = dict(os.environ)
  env.pop("DENSE_ENTITY_PURE_PYTHON", None)
  if pure_python:
    env["DENSE_ENTITY_PURE_PYTHON"] = "1"
  command = [sys.executable, "-m", "benchmarks.extraction_benchmark", f"--worker={kind}",
             f"--worker_arg={argument or ''}", f"--files={','.join(files)}"]
  with tempfile.TemporaryFile() as log:
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                               env=env)
    tree_peak = 0
    while True:
      pid, status, usage = os.wait4(process.pid, os.WNOHANG)
      if pid:
        break
      tree_peak = max(tree_peak, _tree_rss_bytes(process.pid))
      time.sleep(sample_s)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    log.seek(0)
    output = log.read().decode("utf-8", "replace")
  if process.returncode != 0:
    raise RuntimeError(f"{name} failed ({process.returncode}):\n{output[-3000:]}")
  line = [l for l in output.splitlines() if l.startswith(_RESULT_PREFIX)][-1]
  result = json.loads(line[len(_RESULT_PREFIX):])
  result["wall_s"] = wall
  result["max_rss_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
  result["tree_rss_mib"] = tree_peak / 2**20
  return result


def median_run(runs: Sequence[Dict[str, float]]) -> Dict[str, float]:
  """One method's figures over repeated runs (run_method's dicts): the median of the work, the
  CPU and the wall seconds, each on its own (the lower middle value of an even count), the
  largest of each memory figure, the counts (the same every run) of the first."""
  def median(key):
    values = sorted(r[key] for r in runs)
    return values[(len(values) - 1) // 2]

  combined = dict(runs[0])
  for key in ("seconds", "cpu_s", "wall_s"):
    combined[key] = median(key)
  for key in ("max_rss_mib", "tree_rss_mib"):
    combined[key] = max(r[key] for r in runs)
  return combined


def count_pages(files: Sequence[str]) -> Tuple[int, int]:
  """(pages, compressed bytes) of the input files."""
  from beam_pipelines.dumps import xml_dump  # pylint: disable=g-import-not-at-top
  pages = sum(1 for path in files for _ in xml_dump.iter_pages(path, on_error=lambda e: None))
  return pages, sum(os.path.getsize(path) for path in files)


def format_table(results: Dict[str, Dict[str, float]], pages: int) -> str:
  """The results as one text table; ratios over wikiextractor's with 1 and 2 processes, of
  pages/s ('x WE-np') and of links/s ('links x np'; ours counts mentions kept, which include
  links in tables, template parameters and captions that wikiextractor drops)."""
  def rate(name):
    return pages / results[name]["seconds"] if name in results else None

  def link_rate(name):
    return results[name]["links"] / results[name]["seconds"] if name in results else None

  header = (f"{'method':<31}{'work s':>9}{'wall s':>9}{'cpu s':>8}{'cores':>7}{'pages/s':>10}"
            f"{'articles':>10}"
            f"{'links':>9}{'links/s':>10}{'x WE-1p':>9}{'x WE-2p':>9}{'links x1p':>11}"
            f"{'links x2p':>11}{'maxRSS MiB':>12}{'treeRSS MiB':>13}  build")
  lines = [header, "-" * len(header)]
  for name, r in results.items():
    ratios = []
    for of, width in ((rate, 9), (link_rate, 11)):
      for base in ("wikiextractor_1p", "wikiextractor_2p"):
        base_rate = of(base)
        ratios.append(f"{of(name) / base_rate:{width}.2f}" if base_rate else f"{'-':>{width}}")
    lines.append(f"{name:<31}{r['seconds']:9.1f}{r['wall_s']:9.1f}{r['cpu_s']:8.1f}"
                 f"{r['cpu_s'] / r['seconds']:7.2f}{rate(name):10.1f}"
                 f"{r['articles']:10d}{r['links']:9d}{link_rate(name):10.0f}"
                 f"{''.join(ratios)}{r['max_rss_mib']:12.0f}{r['tree_rss_mib']:13.0f}"
                 f"  {r.get('build', '-')}")
  return "\n".join(lines)


def generated_page(target_bytes: int, seed: int = 0) -> str:
  """Wikitext of about `target_bytes` characters: paragraphs of 40 sentences with one link
  each; every 50th paragraph a run-on list of 400 links on one line (no full stop)."""
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(seed)
  words = "the of river city born album team season league county village station".split()
  paragraphs, size, n = [], 0, 0
  while size < target_bytes:
    if len(paragraphs) % 50 == 49:
      paragraph = " · ".join(f"[[Stop {n + i}]]" for i in range(400))
      n += 400
    else:
      sentences = []
      for _ in range(40):
        before = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize()
        sentences.append(f"{before} [[Entity {n}|entity {n}]] {rng.choice(words)}.")
        n += 1
      paragraph = " ".join(sentences)
    paragraphs.append(paragraph)
    size += len(paragraph) + 2
  return "\n\n".join(paragraphs)


def time_long_pages(sizes_mb: Sequence[float]) -> List[str]:
  """One line per generated page: MB, links, parse seconds, mention-feature seconds, s/MB."""
  # pylint: disable=g-import-not-at-top
  from beam_pipelines.parsers import mentions
  from beam_pipelines.parsers import wikitext
  # pylint: enable=g-import-not-at-top
  lines = []
  for mb in sizes_mb:
    page = generated_page(int(mb * 1e6))
    start = time.perf_counter()
    parsed = wikitext.parse_article(page, "Generated page")
    parsed_at = time.perf_counter()
    got = mentions.article_mentions(parsed, 1, "Generated page")
    done = time.perf_counter()
    size_mb = len(page.encode("utf-8")) / 1e6
    lines.append(f"generated page {size_mb:5.2f} MB: {len(got):7d} links, parse_article "
                 f"{parsed_at - start:6.2f} s, mention features {done - parsed_at:6.2f} s, "
                 f"total {(done - start) / size_mb:5.2f} s/MB")
  return lines


def time_unclosed_pages(repeats: Sequence[int] = (2000, 4000, 10000)) -> List[str]:
  """One line per page of `n` unclosed template openers ('x {{a|' n times): seconds of
  parse_article (mwparserfromhell's tokenizer is quadratic in them, issue #364 there) or, above
  mw_tree.MAX_UNCLOSED_WORK, seconds until it refuses the page (mw_tree.check_unclosed)."""
  # pylint: disable=g-import-not-at-top
  from beam_pipelines.parsers import mw_tree
  from beam_pipelines.parsers import wikitext
  # pylint: enable=g-import-not-at-top
  lines = []
  for n in repeats:
    page = "x {{a|" * n
    start = time.perf_counter()
    try:
      wikitext.parse_article(page, "Unclosed templates")
      what = "parsed"
    except mw_tree.UnclosedMarkupError:
      what = "refused (check_unclosed)"
    seconds = time.perf_counter() - start
    lines.append(f"{n:6d} unclosed '{{{{a|' ({len(page) / 1e3:5.0f} KB): {what} in "
                 f"{seconds:7.3f} s")
  return lines


FLAGS = flags.FLAGS


def main(argv):
  del argv
  patterns = [p for p in FLAGS.files.split(",") if p]
  files = sorted({path for p in patterns for path in glob.glob(p)})
  if not files:
    raise app.UsageError(f"--files matches nothing: {FLAGS.files}")
  if FLAGS.worker:
    result = _WORKERS[FLAGS.worker](files, FLAGS.worker_arg)
    print(_RESULT_PREFIX + json.dumps(result), flush=True)
    return
  # What the run would fail on later, said before any work.
  if FLAGS.repeats < 1:
    raise app.UsageError(f"--repeats must be at least 1, got {FLAGS.repeats}")
  names = [m for m in FLAGS.methods.split(",") if m]
  unknown = [m for m in names if m not in METHODS]
  if unknown:
    raise app.UsageError(f"--methods: unknown {', '.join(unknown)}; known: {', '.join(METHODS)}")
  if (any(METHODS[m][0] == "wikiextractor" for m in names)
      and importlib.util.find_spec("wikiextractor") is None):
    raise app.UsageError("the wikiextractor methods need the package wikiextractor: "
                         "pip install -e \".[bench]\" (or leave them out of --methods)")
  long_pages = [float(mb) for mb in FLAGS.long_page_mb.split(",") if mb]
  # A file that is no dump: the extraction's own one-line error now, not a method's failure
  # (with its traceback) after the others ran.
  from beam_pipelines.pipelines import extraction  # pylint: disable=g-import-not-at-top
  extraction.check_inputs(files)
  pages, size = count_pages(files)
  print(f"{len(files)} files, {size / 2**20:.1f} MiB bz2, {pages} pages "
        f"({os.cpu_count()} CPUs)")
  for path in files:
    print(f"  {os.path.relpath(path, REPO_ROOT)}")
  runs: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
  for repeat in range(FLAGS.repeats):
    for name in names:
      print(f"running {name} ..." if FLAGS.repeats == 1
            else f"running {name} ({repeat + 1}/{FLAGS.repeats}) ...", flush=True)
      result = run_method(name, files, FLAGS.sample_s)
      runs[name].append(result)
      if repeat == 0 and result["pages_read"] >= 0 and result["pages_read"] != pages:
        print(f"  note: {name} read {result['pages_read']} pages")
  results = {name: median_run(method_runs) for name, method_runs in runs.items()}
  print()
  print(format_table(results, pages))
  if FLAGS.repeats > 1:
    print(f"\nwork s of each run ({FLAGS.repeats} rounds, every method once a round, in the "
          "order above; the table: medians of work, CPU and wall seconds, the largest "
          "memory):")
    for name, method_runs in runs.items():
      print(f"  {name:<31}" + " / ".join(f"{r['seconds']:.2f}" for r in method_runs))
  print("\npages/s: input pages / work s (the same pages for every method). links: ours = "
        "mentions kept (main-namespace links, with offsets); wikiextractor = '<a href' in its "
        "output (--links). x WE-np: pages/s ratio ours / wikiextractor --processes n; links "
        "x np: the same of links/s. cpu s: user + system CPU seconds of the work (the "
        "process, its threads and the worker processes it reaped); cores: cpu s / work s. "
        "maxRSS: "
        "largest single process (ru_maxrss); treeRSS: sampled peak of the summed RSS of the "
        "process tree. build: how our parse modules were imported (compiled: their builds "
        "by setup.py; source: pure Python, the _source methods by DENSE_ENTITY_PURE_PYTHON=1).")
  if long_pages:
    print("\nLong pages (one page, parse + mention features, in this process):")
    for line in time_long_pages(long_pages):
      print(f"  {line}", flush=True)
    print("\nUnclosed markup (one page, parse_article, in this process; quadratic in the "
          "openers up to the limit):")
    for line in time_unclosed_pages():
      print(f"  {line}", flush=True)


if __name__ == "__main__":
  flags.DEFINE_string("files", DEFAULT_FILES, "Comma-separated globs of dump files (.bz2/.xml).")
  flags.DEFINE_string("methods", ",".join(METHODS), "Comma-separated methods to run, from: "
                      + ", ".join(METHODS))
  flags.DEFINE_string("long_page_mb", "0.5,5", "Comma-separated sizes (MB) of generated "
                      "long pages timed after the table; empty for none.")
  flags.DEFINE_float("sample_s", 0.05, "Seconds between samples of the process tree's RSS.")
  flags.DEFINE_integer("repeats", 1, "Rounds of runs, every method once a round (interleaved, so "
                       "that a slower spell of the machine falls on all methods); the table "
                       "gives each method's median work and wall seconds.")
  flags.DEFINE_string("worker", None, "Internal: run one method's work in this process.")
  flags.DEFINE_string("worker_arg", None, "Internal: the worker's argument.")
  entry.run(main, "python -m benchmarks.extraction_benchmark")
