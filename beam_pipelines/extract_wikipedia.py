"""Beam pipeline: MediaWiki or HTML dumps -> entities, train/held-out mentions, alias counts.

Gillick et al. (2019), section 5: training mentions are Wikipedia anchor links (the anchor text
in the source page, the link target after redirect resolution as the gold entity), split 99.9% /
0.1% by a stable fingerprint of the source page; the knowledge base holds every article and every
linked title; the alias table (AT-Prior, P(e|m)) counts anchors of the training split.

Usage (Beam's local FnApiRunner by default; any runner by standard Beam pipeline flags):

  python -m beam_pipelines.extract_wikipedia --input=GLOB[,GLOB...] --output_dir=DIR \
      [--descriptions=JSONL] [--titles=GLOB,...] [--redirects_tsv=GLOB,...] \
      [--heldout_fraction=0.001] [--num_shards=N] \
      [--multistream_index=GLOB] [--multistream_range_mb=32] [--parse_processes=N] \
      [beam flags...]

--input takes MediaWiki XML exports and HTML dumps (NDJSON: one JSON object a line with
`name`, `identifier`, `version.identifier`, `url`, `article_body.html`, as Wikimedia Enterprise
HTML dumps; plain, .gz or .bz2), told apart by content, in any mix; both give the same records
(beam_pipelines.parsers.html_article says which links of the HTML become mentions).

Multistream dumps (*-pages-articles-multistream.xml.bz2) with their index (--multistream_index,
or *-multistream-index.txt.bz2 found beside the dump) are split at bz2 stream offsets into byte
ranges that many workers read in parallel; other files are read whole by one worker each. The
outputs are the same either way.

On the local runner in memory (the default) pages are parsed, and the KB's entities built from
large buckets, in as many worker processes as this process may use cores (--parse_processes to
choose; results come back in order, so the outputs are the same with any number); on other
runners and modes 1, the only number accepted there (their workers already run one process
per core, and Beam's local multi_threading mode lost values with parse processes).

Any language's Wikipedia: each dump's <siteinfo> header is read once before the pipeline runs,
and its pages are read with that wiki's localized namespace names (categories, files,
templates), redirect words, link trail and title case (beam_pipelines.parsers.namespaces).

Outputs in DIR (names from dense_entity/kb/schema.py; TFRecord of tf.train.Example, uncompressed,
'PREFIX-SSSSS-of-NNNNN.tfrecord'): entities, mentions_train, mentions_heldout, alias_counts.tsv,
redirects.tsv, stats.json and, written last, MANIFEST.json. Every input is checked before DIR
is touched (patterns match files; dumps are MediaWiki XML exports with pages, not empty or raw
wikitext, or HTML dumps whose first record parses; lists hold lines of their kind); files are
written to a staging directory inside DIR and moved into place only after the pipeline
succeeded and read something (pages, entities, a line of each list given). A failed run exits
non-zero and leaves a finished extraction in DIR as it was; so does a run interrupted by
Ctrl-C (SIGINT) or SIGTERM, which removes its staging directory and exits 130 or 143 with one
line on stderr (SIGKILL leaves the staging directory, which the next run removes). DIR must
be new, empty or an earlier extraction: a file, another stage's output (a model, reports, an
index, ...) or a directory of other files is refused before any work.
Flags that are neither this module's nor Beam pipeline options are an error.
"""

import datetime
import logging
import sys
from typing import Sequence

from dense_entity.common import entry
from dense_entity.common import fileio

entry.quiet_native_logs()  # before beam_io loads TensorFlow: no native INFO/ERROR lines

from beam_pipelines.pipelines import beam_io  # pylint: disable=wrong-import-position
from beam_pipelines.pipelines import extraction  # pylint: disable=wrong-import-position

PROGRAM = "python -m beam_pipelines.extract_wikipedia"
INTERRUPTED_NOTE = ("a finished extraction in --output_dir is left as it was (unless the run "
                    "was publishing: then it holds no MANIFEST.json; run again)")


def main(argv: Sequence[str]) -> None:
  """Entry point: absl flags for the extraction, every other flag goes to PipelineOptions."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS
  # Before any work: an --output_dir that is a file, another stage's output (a model, reports,
  # ...) or a directory of other files is refused (one line, exit 2).
  fileio.check_output_dir(flag_values.output_dir, fileio.EXTRACTION)
  input_patterns = [p for p in flag_values.input.split(",") if p]
  started = datetime.datetime.now()
  # Ctrl-C or SIGTERM: the run's staging directory removed on the way out, one line, exit
  # 130 or 143 (errors.one_line_errors, INTERRUPTED_NOTE).
  stats = extraction.run(input_patterns, flag_values.output_dir,
                         heldout_fraction=flag_values.heldout_fraction,
                         descriptions=flag_values.descriptions,
                         pipeline_options=beam_io.default_pipeline_options(
                             argv[1:], own_flags=list(flag_values)),
                         num_shards=flag_values.num_shards,
                         multistream_index=flag_values.multistream_index,
                         detect_multistream_index=flag_values.detect_multistream_index,
                         range_bytes=int(flag_values.multistream_range_mb * (1 << 20)),
                         title_lists=flag_values.titles,
                         redirect_lists=flag_values.redirects_tsv,
                         parse_processes=flag_values.parse_processes)
  seconds = (datetime.datetime.now() - started).total_seconds()
  for name, value in stats.items():
    print(f"{name:>45s}  {value}")
  print(f"Wrote {flag_values.output_dir} in {seconds:.1f} s")
  skipped = stats.get("pages_unreadable", 0) + stats.get("pages_failed", 0)
  if skipped:
    print(f"WARNING: {skipped} page(s) or file part(s) were skipped; see the log.",
          file=sys.stderr)
    sys.exit(3)


def _define_flags() -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("input", None, "Comma-separated file patterns of MediaWiki XML dumps "
                      "(.xml or .xml.bz2, multistream included) and/or HTML dumps (one JSON "
                      "object a line in Wikimedia Enterprise HTML dump layout: name, "
                      "identifier, url, article_body.html; Parsoid or classic rendered HTML; "
                      "plain, .gz or .bz2). Each file's format is told by its content (a first "
                      "'{' is an HTML dump); a file of neither kind is refused before any work.")
  flags.DEFINE_string("output_dir", None, "Directory for the extraction outputs.")
  flags.DEFINE_string("descriptions", None, "Optional JSONL of entity descriptions "
                      '({"title", "text"} per line).')
  flags.DEFINE_list("titles", [], "File patterns of title lists (one main-namespace title per "
                    "line, as Wikimedia's all-titles-in-ns0; plain, .gz or .bz2): every title "
                    "becomes a KB entity (merged with the dump's by a case- and "
                    "accent-insensitive key) unless it is a redirect or disambiguation-like.")
  flags.DEFINE_list("redirects_tsv", [], "File patterns of redirect lists ('redirect<TAB>"
                    "target' per line; plain, .gz or .bz2): redirect titles become aliases of "
                    "their targets' entities, never entities.")
  flags.DEFINE_float("heldout_fraction", extraction.DEFAULT_HELDOUT_FRACTION,
                     "Fraction of source pages whose mentions are held out.")
  flags.DEFINE_integer("num_shards", None, "Shards per TFRecord output, at least 1 (default: "
                       f"about {beam_io.RECORDS_PER_SHARD} records per shard).", lower_bound=1)
  flags.DEFINE_string("multistream_index", None, "File pattern of the multistream index "
                      "file(s) (*-multistream-index.txt.bz2) of the input dumps: the dumps are "
                      "then read in ranges of bz2 streams, in parallel.")
  flags.DEFINE_boolean("detect_multistream_index", True, "Use X-multistream-index.txt.bz2 "
                       "found beside an input X-multistream.xml.bz2 without --multistream_index.")
  flags.DEFINE_float("multistream_range_mb", extraction.DEFAULT_RANGE_BYTES / (1 << 20),
                     "Compressed MiB of bz2 streams per read work item of an indexed dump "
                     "(> 0).")
  flags.register_validator("multistream_range_mb", lambda mb: int(mb * (1 << 20)) >= 1,
                           message="--multistream_range_mb must be > 0 (at least one byte)")
  flags.DEFINE_integer("parse_processes", None, "Worker processes that parse pages and build "
                       "the KB's entities (and threads that read the dumps), 1 to "
                       f"{extraction.MAX_PARSE_PROCESSES} (default: the cores this process may "
                       "use on the local runner in memory, else 1; above 1 only there). The "
                       "outputs are the same with any number.",
                       lower_bound=1, upper_bound=extraction.MAX_PARSE_PROCESSES)
  flags.mark_flags_as_required(["input", "output_dir"])


def _entry_point() -> None:
  _define_flags()
  logging.getLogger().setLevel(logging.INFO)
  # Flags not defined here go to Beam (PipelineOptions) if Beam knows them, else are an error
  # (beam_io.default_pipeline_options).
  entry.run(main, PROGRAM, flags_parser=entry.known_flags_parser(PROGRAM),
            interrupted_note=INTERRUPTED_NOTE)


if __name__ == "__main__":
  # Run the copy of this module imported under its package name: its flags are defined (and
  # listed by --helpfull) under beam_pipelines.extract_wikipedia, as they always were. The
  # DoFns and records the workers unpickle live in beam_pipelines.pipelines, never in __main__.
  from beam_pipelines import extract_wikipedia  # pylint: disable=g-import-not-at-top,import-self
  extract_wikipedia._entry_point()  # pylint: disable=protected-access
