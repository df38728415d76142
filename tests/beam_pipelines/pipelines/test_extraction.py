"""Tests of the extraction pipeline on a small handmade dump (real runs into tmp_path)."""

import bz2
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to
import pytest
import tensorflow as tf

from beam_pipelines.parsers import pages as pages_lib
from beam_pipelines.parsers import records
from beam_pipelines.pipelines import beam_io
from beam_pipelines.pipelines import extraction as extract
from beam_pipelines.pipelines import kb_merge
from dense_entity.kb import schema
from tests import testutil
from tests.beam_pipelines.dumps import multistream_testutil


def _page(page_id, title, text, ns=0, redirect=None):
  redirect_xml = f'<redirect title="{redirect}" />' if redirect else ""
  if text is None:
    text_xml = '<text bytes="0" xml:space="preserve" />'
  else:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text_xml = f'<text xml:space="preserve">{text}</text>'
  return (f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
          f"    {redirect_xml}<revision><id>{page_id + 500}</id>{text_xml}</revision>\n"
          "  </page>\n")


ORE_RIVER = """{{Infobox river|name=Ore River|mouth=[[Gull Sea]]}}
'''Ore River''' is a river that flows past [[Port Alder]] into [[Lake Fen]].<ref>[[Cited Page]]</ref>
[[File:Ore.jpg|thumb|The river near [[Gull Point]].]]
The [[Ore Stream|the stream]] part is short; see [[fr:Rivière Ore]] and [[Loop A|the loop]].

== Course ==
It passes [[Port Alder|the port]] twice.
[[category:Rivers|Ore]]
[[Category:Norland]]"""

PORT_ALDER = """'''Port Alder''' is a harbor town on the [[ore River|river]].
Ships from [[Ore creek]] and [[Ore brook]] dock at [[Port Alder#Quays|its quays]]."""

DUMP = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n'
        "  <siteinfo><sitename>Test</sitename></siteinfo>\n"
        + _page(10, "Ore River", ORE_RIVER)
        + _page(11, "Port Alder", PORT_ALDER)
        + _page(12, "Ore Stream", "#REDIRECT [[Ore River]]", redirect="Ore River")
        + _page(13, "Ore creek", "#redirect[[ore River#Course]]")
        + _page(14, "Ore brook", "#REDIRECT: [[Ore Stream]]")  # a chain
        + _page(15, "Loop A", "#REDIRECT [[Loop B]]")
        + _page(16, "Loop B", "#REDIRECT [[Loop A]]")
        + _page(17, "Portal:Trains", "Trains [[Ore River]]", ns=100)
        + _page(18, "Quarry Notes", None)
        + "</mediawiki>\n")

DESCRIPTIONS = [
    {"title": "Lake Fen", "text": "Lake Fen is a shallow lake.", "topic": "x"},
    {"title": "Ore brook", "text": "A description that must not replace the page's text."},
    {"title": "Zug", "text": "Zug is a town."},
]


def _read_records(directory, prefix):
  examples = []
  for path in sorted(glob.glob(os.path.join(directory, f"{prefix}-*.tfrecord"))):
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
      example = tf.train.Example.FromString(record)
      examples.append({key: [v.decode() for v in feature.bytes_list.value]
                       for key, feature in example.features.feature.items()})
  return examples


def _single(record):
  return {k: v[0] if len(v) == 1 and k not in (schema.ENTITY_CATEGORIES,
                                               schema.ENTITY_ALIASES, schema.ENTITY_SOURCE)
          else v for k, v in record.items()}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  directory = tmp_path_factory.mktemp("inputs")
  dump_path = directory / "dump.xml"
  dump_path.write_text(DUMP, encoding="utf-8")
  descriptions = directory / "descriptions.jsonl"
  descriptions.write_text("".join(json.dumps(d) + "\n" for d in DESCRIPTIONS) + "not json\n",
                          encoding="utf-8")
  # Held out: the page whose fingerprint is smaller; the fraction lies between the two.
  low, high = sorted(extract.fingerprint_fraction(t) for t in ("Ore River", "Port Alder"))
  heldout_page = min(("Ore River", "Port Alder"), key=extract.fingerprint_fraction)
  return {"dump": str(dump_path), "descriptions": str(descriptions),
          "fraction": (low + high) / 2, "heldout_page": heldout_page}


@pytest.fixture(scope="module")
def run_output(inputs, tmp_path_factory):
  out = str(tmp_path_factory.mktemp("out"))
  stats = extract.run([inputs["dump"]], out, heldout_fraction=inputs["fraction"],
                      descriptions=inputs["descriptions"])
  return out, stats


def test_entities(run_output):
  out, _ = run_output
  entities = {e[schema.ENTITY_TITLE][0]: _single(e)
              for e in _read_records(out, schema.ENTITIES_PREFIX)}
  # Links in a template ('Gull Sea') and a file caption ('Gull Point') are mentions too, so
  # their targets are entities. Not 'Cited Page' (a citation in a <ref>), 'Loop A' (redirect
  # loop), 'Portal:Trains' (namespace 100), redirects.
  assert sorted(entities) == ["Gull Point", "Gull Sea", "Lake Fen", "Ore River",
                              "Port Alder", "Quarry Notes", "Zug"]
  assert entities["Gull Sea"][schema.ENTITY_SOURCE] == ["link_target"]
  ore = entities["Ore River"]
  assert ore[schema.ENTITY_TEXT] == ("Ore River is a river that flows past Port Alder into "
                                     "Lake Fen.")
  assert ore[schema.ENTITY_CATEGORIES] == ["Rivers", "Norland"]
  assert ore[schema.ENTITY_ALIASES] == ["Ore Stream", "Ore brook", "Ore creek"]
  assert ore[schema.ENTITY_SOURCE] == ["page", "link_target", "description"]
  lake = entities["Lake Fen"]
  assert lake[schema.ENTITY_TEXT] == "Lake Fen is a shallow lake."
  assert lake[schema.ENTITY_SOURCE] == ["link_target", "description"]
  assert entities["Zug"][schema.ENTITY_SOURCE] == ["description"]
  assert entities["Quarry Notes"][schema.ENTITY_TEXT] == ""
  assert entities["Quarry Notes"][schema.ENTITY_SOURCE] == ["page"]
  # Mention records carry their gold entity's aliases too (the name channel reads them).
  mentions = [_single(m) for prefix in (schema.TRAIN_MENTIONS_PREFIX,
                                        schema.HELDOUT_MENTIONS_PREFIX)
              for m in _read_records(out, prefix)]
  to_ore = [m for m in mentions if m[schema.ENTITY_TITLE] == "Ore River"]
  assert to_ore and all(m[schema.ENTITY_ALIASES] == ["Ore Stream", "Ore brook", "Ore creek"]
                        for m in to_ore)


def test_mentions_split_and_features(run_output, inputs):
  out, _ = run_output
  train = [_single(m) for m in _read_records(out, schema.TRAIN_MENTIONS_PREFIX)]
  heldout = [_single(m) for m in _read_records(out, schema.HELDOUT_MENTIONS_PREFIX)]
  assert {m[schema.SOURCE_PAGE] for m in heldout} == {inputs["heldout_page"]}
  assert inputs["heldout_page"] not in {m[schema.SOURCE_PAGE] for m in train}
  mentions = {m[schema.MENTION_ID]: m for m in train + heldout}
  got = sorted((m[schema.MENTION_ID], m[schema.MENTION_SPAN], m[schema.ENTITY_TITLE])
               for m in mentions.values())
  assert got == [
      ("10:0", "Port Alder", "Port Alder"),
      ("10:1", "Lake Fen", "Lake Fen"),
      ("10:2", "the stream", "Ore River"),
      # 10:3 'the loop' -> Loop A: a redirect loop, dropped
      ("10:4", "the port", "Port Alder"),
      # After the prose: the infobox parameter, the ref body, the caption (their own lines).
      ("10:5", "Gull Sea", "Gull Sea"),
      ("10:6", "Gull Point", "Gull Point"),
      ("11:0", "river", "Ore River"),
      ("11:1", "Ore creek", "Ore River"),
      ("11:2", "Ore brook", "Ore River"),
      ("11:3", "its quays", "Port Alder"),
  ]
  first = mentions["10:0"]
  assert first[schema.MENTION_LEFT] == "a river that flows past"  # 5 tokens
  assert first[schema.MENTION_RIGHT] == "into Lake Fen."
  assert first[schema.MENTION_SENTENCE] == (
      "Ore River is a river that flows past [MASK] into Lake Fen.")
  assert first[schema.ENTITY_TEXT] == ("Port Alder is a harbor town on the river.")
  caption = mentions["10:6"]
  assert caption[schema.MENTION_SENTENCE] == "The river near [MASK]."
  assert caption[schema.MENTION_LEFT] == "The river near"
  assert mentions["10:5"][schema.MENTION_SENTENCE] == "[MASK]"  # the infobox parameter
  river = mentions["11:0"]
  assert river[schema.ENTITY_CATEGORIES] == ["Rivers", "Norland"]
  assert river[schema.ENTITY_TEXT].startswith("Ore River is a river")


def test_tables_and_stats(run_output, inputs):
  out, stats = run_output
  with open(os.path.join(out, schema.REDIRECTS_FILE), encoding="utf-8") as f:
    assert f.read() == ("Ore Stream\tOre River\nOre brook\tOre River\nOre creek\tOre River\n")
  with open(os.path.join(out, schema.ALIAS_COUNTS_FILE), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f]
  assert rows == sorted(rows)
  expected = {
      "Ore River": [["gull point", "Gull Point", "1"],
                    ["gull sea", "Gull Sea", "1"], ["lake fen", "Lake Fen", "1"],
                    ["port alder", "Port Alder", "1"], ["the port", "Port Alder", "1"],
                    ["the stream", "Ore River", "1"]],
      "Port Alder": [["its quays", "Port Alder", "1"], ["ore brook", "Ore River", "1"],
                     ["ore creek", "Ore River", "1"], ["river", "Ore River", "1"]],
  }
  train_page = ({"Ore River", "Port Alder"} - {inputs["heldout_page"]}).pop()
  assert rows == expected[train_page]  # alias counts come from the train split only
  assert stats["pages_read"] == 9
  assert stats["articles"] == 3
  assert stats["redirects"] == 5
  assert stats["redirects_loop"] == 2
  assert stats["pages_other_namespace"] == 1
  assert stats["mentions_dropped_redirect_loop"] == 1
  assert "links_dropped_in_file_caption" not in stats
  assert stats["links_dropped_in_ref"] == 1 and "links_dropped_in_template" not in stats
  assert stats["links_kept"] == 11  # 10 mentions + 'the loop' (dropped: redirect loop)
  assert (stats["links_kept_prose"], stats["links_kept_template"],
          stats["links_kept_caption"]) == (9, 1, 1)
  assert "links_kept_ref" not in stats
  assert stats["links_dropped_interlanguage"] == 1
  assert stats["links_dropped_category"] == 2
  assert stats["descriptions_invalid"] == 1
  assert stats["mentions_train"] + stats["mentions_heldout"] == 10
  with open(os.path.join(out, schema.STATS_FILE), encoding="utf-8") as f:
    assert json.load(f) == stats
  with open(os.path.join(out, schema.MANIFEST_FILE), encoding="utf-8") as f:
    manifest = json.load(f)
  assert sorted(os.listdir(out)) == sorted(manifest["files"] + [schema.MANIFEST_FILE])
  assert manifest["counts"][schema.ENTITIES_PREFIX] == 7
  assert manifest["heldout_fraction"] == inputs["fraction"]
  assert manifest["inputs"] == [inputs["dump"]]


def test_rerun_replaces_outputs(inputs, tmp_path):
  out = str(tmp_path / "out")
  extract.run([inputs["dump"]], out, heldout_fraction=0.0)
  first = sorted(os.listdir(out))
  assert "entities-00000-of-00001.tfrecord" in first
  extract.run([inputs["dump"]], out, heldout_fraction=0.0, num_shards=2)
  second = sorted(os.listdir(out))
  assert "entities-00000-of-00001.tfrecord" not in second
  assert "entities-00001-of-00002.tfrecord" in second
  assert "mentions_heldout-00001-of-00002.tfrecord" in second  # empty shards exist too
  assert len(_read_records(out, schema.ENTITIES_PREFIX)) == 6  # no descriptions here
  assert not [n for n in os.listdir(out) if n.startswith(".")]  # no staging, no owner record


def test_a_run_that_holds_no_mention_out_says_so(inputs, tmp_path, caplog):
  """The default fraction (0.001) holds no page of a small dump out: the run warns, naming
  the fraction, instead of leaving only an empty held-out file and a zero count."""
  import logging  # pylint: disable=g-import-not-at-top
  caplog.set_level(logging.WARNING)
  stats = extract.run([inputs["dump"]], str(tmp_path / "default"),
                      heldout_fraction=extract.DEFAULT_HELDOUT_FRACTION)
  assert stats.get("mentions_heldout", 0) == 0
  warned = [r.getMessage() for r in caplog.records if "No mention was held out" in r.getMessage()]
  assert len(warned) == 1 and "--heldout_fraction=0.001" in warned[0]
  caplog.clear()
  stats = extract.run([inputs["dump"]], str(tmp_path / "all"), heldout_fraction=1.0)
  assert stats["mentions_heldout"] > 0
  assert not [r for r in caplog.records if "No mention was held out" in r.getMessage()]
  extract.run([inputs["dump"]], str(tmp_path / "none"), heldout_fraction=0.0)  # none asked
  assert not [r for r in caplog.records if "No mention was held out" in r.getMessage()]


# --- a failed run never touches a finished extraction (issue 14, items 1 and 2) ------------


def _snapshot(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


@pytest.fixture(scope="module")
def finished(inputs, tmp_path_factory):
  """A finished extraction (copied into each test's own directory) and odd input files."""
  out = str(tmp_path_factory.mktemp("finished"))
  extract.run([inputs["dump"]], out, heldout_fraction=0.0)
  odd = tmp_path_factory.mktemp("odd")
  files = {
      "empty": odd / "empty.xml",
      "jsonl": odd / "pages.jsonl",
      "wikitext": odd / "Gull_Sea.txt",
      "no_pages": odd / "siteinfo-only.xml",
      "no_entity": odd / "redirects-only.xml",
  }
  files["empty"].write_bytes(b"")
  files["jsonl"].write_text('{"title": "Gull Sea", "text": "A sea."}\n', encoding="utf-8")
  files["wikitext"].write_text("'''Gull Sea''' is a sea near [[Port Alder]].\n",
                               encoding="utf-8")
  files["no_pages"].write_text("<mediawiki><siteinfo><sitename>W</sitename></siteinfo>"
                               "</mediawiki>\n", encoding="utf-8")
  files["no_entity"].write_text(
      "<mediawiki>\n" + _page(1, "Gull Bay", "#REDIRECT [[Gull Sea]]", redirect="Gull Sea")
      + _page(2, "Talk:Gull Sea", "Chat [[Gull Sea]]", ns=1) + "</mediawiki>\n",
      encoding="utf-8")
  return out, {k: str(v) for k, v in files.items()}


FAILED_RUNS = [
    ("typo_in_input_glob", r"--input dump pattern\(s\) match no file: .*dumpp"),
    ("missing_descriptions", r"--descriptions pattern\(s\) match no file: .*nowhere.jsonl"),
    ("missing_titles", r"--titles list pattern\(s\) match no file: .*nowhere-titles"),
    ("missing_redirects", r"--redirects_tsv list pattern\(s\) match no file: .*nowhere.tsv"),
    ("missing_multistream_index", r"--multistream_index pattern\(s\) match no file"),
    # It was '[Errno 21] Is a directory' from the format check, naming neither the flag nor
    # what to give instead.
    ("directory_as_input", r"--input dump .*odd\d* is a directory, not a file: give its files "
                           r"as a pattern, e\.g\. .*odd\d*/\*$"),
    ("empty_file", "empty.xml: is empty; expected a MediaWiki XML export"),
    ("jsonl_file", "pages.jsonl: holds JSON"),
    ("raw_wikitext", "Gull_Sea.txt: is not XML .*raw wikitext"),
    ("export_without_pages", "siteinfo-only.xml: holds no <page>"),
    ("dump_as_descriptions", "dump.xml: line 1 is not a description"),
    ("jsonl_as_titles", "pages.jsonl: line 1 is not a title list"),
    ("heldout_fraction_above_1", "heldout_fraction must be in"),
    ("no_parse_process", r"parse_processes must be in \[1, 256\], got 0"),
    ("no_entity_after_the_pipeline", "redirects-only.xml holds no entity .*pages_read 2"),
    ("pipeline_fails", "disk full"),
    ("runner_lost_values", "values do not add up .*shuffle JoinValuesRedirects: (\\d+) "
                           "values in, (?!\\1)\\d+ out"),
    ("parse_worker_dies", "process in the process pool was terminated abruptly"),
]


def _die_in_worker(pages):
  """A parse worker process that dies (killed for memory, a crash in a C extension)."""
  del pages
  os._exit(3)  # pylint: disable=protected-access


@pytest.mark.parametrize("case, message", FAILED_RUNS, ids=[c for c, _ in FAILED_RUNS])
def test_failed_run_leaves_the_finished_extraction_as_it_was(finished, inputs, tmp_path,
                                                            monkeypatch, case, message):
  # Each bad input (in the words of a user: a typo in a glob, a missing list, an empty file, a
  # JSON lines or wikitext file given as the dump, ...) is an error naming the file; the
  # finished extraction already in the output directory keeps every file, MANIFEST.json
  # included, byte for byte, and no staging directory is left behind.
  out = str(tmp_path / "out")
  shutil.copytree(finished[0], out)
  before = _snapshot(out)
  odd = finished[1]
  dump = inputs["dump"]
  kwargs = {"input_patterns": [dump], "heldout_fraction": 0.0}
  if case == "typo_in_input_glob":
    kwargs["input_patterns"] = [dump.replace("dump.xml", "dumpp*.xml")]
  elif case == "missing_descriptions":
    kwargs["descriptions"] = str(tmp_path / "nowhere.jsonl")
  elif case == "missing_titles":
    kwargs["title_lists"] = [str(tmp_path / "nowhere-titles*.gz")]
  elif case == "missing_redirects":
    kwargs["redirect_lists"] = [str(tmp_path / "nowhere.tsv")]
  elif case == "missing_multistream_index":
    kwargs["multistream_index"] = str(tmp_path / "nowhere-index.txt.bz2")
  elif case == "directory_as_input":
    kwargs["input_patterns"] = [dump, os.path.dirname(odd["empty"])]
  elif case == "empty_file":
    kwargs["input_patterns"] = [dump, odd["empty"]]
  elif case == "jsonl_file":
    kwargs["input_patterns"] = [odd["jsonl"]]
  elif case == "raw_wikitext":
    kwargs["input_patterns"] = [odd["wikitext"]]
  elif case == "export_without_pages":
    kwargs["input_patterns"] = [odd["no_pages"]]
  elif case == "dump_as_descriptions":
    kwargs["descriptions"] = dump
  elif case == "jsonl_as_titles":
    kwargs["title_lists"] = [odd["jsonl"]]
  elif case == "heldout_fraction_above_1":
    kwargs["heldout_fraction"] = 1.5
  elif case == "no_parse_process":
    kwargs["parse_processes"] = 0
  elif case == "no_entity_after_the_pipeline":
    kwargs["input_patterns"] = [odd["no_entity"]]
  elif case == "pipeline_fails":
    def broken(*args, **kwargs):
      raise RuntimeError("disk full")
    monkeypatch.setattr(records, "entity_record", broken)
  elif case == "parse_worker_dies":
    # The workers are forked from this process: they call this module's stand-in.
    monkeypatch.setattr(pages_lib, "parse_pages", _die_in_worker)
    kwargs["parse_processes"] = 2
  elif case == "runner_lost_values":
    # A runner that drops a value in a shuffle and says nothing (issue 17: Beam's local
    # multi_processing runner at the full KB): the counts of the run show it.
    counters = beam_io.counters

    def lossy(result, namespace):
      counts = counters(result, namespace)
      if namespace == beam_io.FLOW_NAMESPACE:
        counts["JoinValuesRedirects/out"] -= 1
      return counts
    monkeypatch.setattr(beam_io, "counters", lossy)
  error = (RuntimeError if case in ("pipeline_fails", "runner_lost_values", "parse_worker_dies")
           else (FileNotFoundError, ValueError))
  with pytest.raises(error) as raised:
    extract.run(output_dir=out, **kwargs)
  assert re.search(message, str(raised.value)), str(raised.value)
  assert _snapshot(out) == before
  assert not [n for n in os.listdir(out) if n.startswith(".staging")]


def test_a_failed_run_into_a_new_directory_leaves_no_directory(finished, inputs, tmp_path):
  """A run that made its output directory and fails (an unknown runner, before any work; no
  entity, after the pipeline) removes the directory again: nothing is left to mistake for an
  output. A directory that held something before (another run's staging) is kept."""
  out = str(tmp_path / "new" / "out")
  with pytest.raises(ValueError, match="Unexpected pipeline runner: NoSuchRunner"):
    extract.run([inputs["dump"]], out, pipeline_options=beam_io.default_pipeline_options(
        ["--runner=NoSuchRunner"]))
  assert not os.path.exists(out)
  with pytest.raises(ValueError, match="holds no entity"):
    extract.run([finished[1]["no_entity"]], out, heldout_fraction=0.0)
  assert not os.path.exists(out)
  os.makedirs(os.path.join(out, ".staging-other"))
  with pytest.raises(ValueError, match="holds no entity"):
    extract.run([finished[1]["no_entity"]], out, heldout_fraction=0.0)
  assert os.listdir(out) == [".staging-other"]


# --- staging directories of dead runs (issue 14, item 6) ------------------------------------


def _staging(out, name, owner=None, age_s=0):
  path = os.path.join(out, ".staging-" + name)
  os.makedirs(path)
  with open(os.path.join(path, "entities-00000-of-00001.tfrecord"), "wb") as f:
    f.write(b"half written")
  if owner is not None:
    with open(os.path.join(path, ".owner.json"), "w", encoding="utf-8") as f:
      json.dump(owner, f)
  stamp = time.time() - age_s
  for p in [os.path.join(path, n) for n in os.listdir(path)] + [path]:
    os.utime(p, (stamp, stamp))
  return path


def test_stale_staging_of_dead_runs_is_removed_and_live_runs_kept(tmp_path):
  out = str(tmp_path / "out")
  os.makedirs(out)
  finished_run = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                capture_output=True, text=True, check=True)
  dead = dict(extract.staging_owner(), pid=int(finished_run.stdout))  # a killed extraction
  live = extract.staging_owner()  # this process: a run still going
  day = extract.STALE_STAGING_AGE_S
  paths = {
      "dead": _staging(out, "dead", dead),
      "live": _staging(out, "live", live, age_s=3 * day),
      "other_host_old": _staging(out, "farold", dict(dead, host="elsewhere",
                                                     started=time.time() - 2 * day)),
      "other_host_new": _staging(out, "farnew", dict(dead, host="elsewhere",
                                                     started=time.time() - 60)),
      "no_record_old": _staging(out, "legacyold", age_s=2 * day),
      "no_record_new": _staging(out, "legacynew", age_s=60),
  }
  if live["start_ticks"] is not None:  # Linux: a pid now used by a later process
    paths["reused_pid"] = _staging(out, "reused", dict(live, start_ticks=live["start_ticks"] - 1))
  empty_old = os.path.join(out, ".staging-emptyold")
  os.makedirs(empty_old)
  os.utime(empty_old, (time.time() - 2 * day,) * 2)
  removed = extract.remove_stale_staging(out)
  stale = {"dead", "other_host_old", "no_record_old", "reused_pid"}
  assert set(removed) == {p for name, p in paths.items() if name in stale} | {empty_old}
  for name in ("live", "other_host_new", "no_record_new"):
    assert os.path.isdir(paths[name]), name


def test_a_run_removes_a_killed_runs_staging_and_publishes(inputs, tmp_path):
  # An extraction killed (SIGKILL) left its staging directory; the next run into the same
  # directory removes it and publishes its own outputs.
  out = str(tmp_path / "out")
  os.makedirs(out)
  killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  staging = _staging(out, "killed", dict(extract.staging_owner(), pid=killed.pid))
  killed.kill()
  killed.wait()
  extract.run([inputs["dump"]], out, heldout_fraction=0.0)
  assert not os.path.exists(staging)
  assert schema.MANIFEST_FILE in os.listdir(out)
  assert not [n for n in os.listdir(out) if n.startswith(".")]


# --- disambiguation pages and hidden categories (issue 14, item 3) --------------------------

ORE_VALLEY = """'''Ore Valley''' has {{formatnum:1200}} people on the [[Ore Fork]] and the [[Gull]].
It lies below [[Mount Birch]].
[[Category:Valleys of Norland]]
[[Category:All articles with dead external links]]
[[Category:Articles with short description]]
[[Category:Wikipedia articles needing clarification from May 2020]]
[[Category:Ore maintenance]]
[[Category:Pages with ore]]"""

ORE_FORK = """'''Ore Fork''' may refer to:
* [[Ore Fork (river)]], a river
* [[Ore Fork (town)]], a town
{{disambiguation|geo}}"""


def test_disambiguation_pages_and_hidden_categories(tmp_path):
  # A dump with a disambiguation page by template ('Ore Fork') and one by the magic word
  # ('Gull'), an article linking to both and listing hidden maintenance categories, a category
  # page that hides its category and one with a maintenance-like name that does not.
  dump = tmp_path / "dump.xml"
  dump.write_text(
      "<mediawiki>\n"
      + _page(1, "Ore Valley", ORE_VALLEY)
      + _page(2, "Ore Fork", ORE_FORK)
      + _page(3, "Gull", "__DISAMBIG__\n'''Gull''' may be [[Gull Sea]] or [[Gull Point]].")
      + _page(4, "Category:Ore maintenance", "{{Hidden category}}", ns=14)
      + _page(5, "Category:Pages with ore", "Pages about ore.", ns=14)
      + _page(6, "Mount Birch", "'''Mount Birch''' is a hill above [[Ore Valley]].")
      + "</mediawiki>\n", encoding="utf-8")
  out = str(tmp_path / "out")
  stats = extract.run([str(dump)], out, heldout_fraction=0.0)
  entities = {e[schema.ENTITY_TITLE][0]: _single(e)
              for e in _read_records(out, schema.ENTITIES_PREFIX)}
  # Disambiguation pages are no entities, their link lists no mentions, links to them dropped.
  assert sorted(entities) == ["Mount Birch", "Ore Valley"]
  mentions = [_single(m) for m in _read_records(out, schema.TRAIN_MENTIONS_PREFIX)]
  assert sorted((m[schema.SOURCE_PAGE], m[schema.ENTITY_TITLE]) for m in mentions) == [
      ("Mount Birch", "Ore Valley"), ("Ore Valley", "Mount Birch")]
  assert stats["pages_disambiguation"] == 2
  assert stats["pages_disambiguation_by_template"] == 1
  assert stats["pages_disambiguation_by_switch"] == 1
  assert stats["links_dropped_disambiguation_page"] == 4
  assert stats["not_entities_disambiguation_page"] == 2
  assert stats["mentions_dropped_disambiguation_page"] == 2
  # Hidden categories: by the dump's category page where it has one, else by name.
  assert entities["Ore Valley"][schema.ENTITY_CATEGORIES] == ["Valleys of Norland",
                                                              "Pages with ore"]
  assert stats["category_pages_hidden"] == 1
  assert stats["category_pages_maintenance_named_visible"] == 1
  assert stats["categories_dropped_hidden_by_page"] == 1
  assert stats["categories_dropped_hidden_by_name"] == 3
  # The number written with a magic word stays in the entity's first paragraph.
  assert entities["Ore Valley"][schema.ENTITY_TEXT].startswith(
      "Ore Valley has 1,200 people on the Ore Fork and the Gull.")


def test_bad_page_is_skipped_and_counted(tmp_path):
  good = _page(1, "Birch Cove", "'''Birch Cove''' faces [[Ore Bay]].")
  bad = "  <page><title>Bad</title><ns>0</ns><id>2</id><revision><text>a < b</text>" \
        "</revision></page>\n"
  path = tmp_path / "bad.xml"
  path.write_text(f"<mediawiki>\n{good}{bad}</mediawiki>\n", encoding="utf-8")
  out = str(tmp_path / "out")
  stats = extract.run([str(path)], out, heldout_fraction=0.0)
  assert stats["pages_unreadable"] == 1
  assert stats["mentions_train"] == 1
  assert os.path.exists(os.path.join(out, schema.MANIFEST_FILE))


def test_composite_with_test_pipeline(inputs, tmp_path):
  with test_pipeline.TestPipeline() as pipeline:
    outputs = extract.build_pipeline(pipeline, [inputs["dump"]], str(tmp_path),
                                     heldout_fraction=0.0, num_shards=1)
    assert_that(outputs["entity_records"] | beam.FlatMap(lambda pack: [t for t, _ in pack]),
                equal_to(["Gull Point", "Gull Sea", "Lake Fen", "Ore River",
                          "Port Alder", "Quarry Notes"]),
                label="EntityTitles")
    assert_that(outputs["redirects"] | beam.FlatMap(lambda pack: pack),
                equal_to([("Ore Stream", "Ore River"), ("Ore brook", "Ore River"),
                          ("Ore creek", "Ore River")]), label="Redirects")
    assert_that(outputs["mentions_heldout"], equal_to([]), label="NoHeldout")


def test_every_shuffle_and_output_is_counted_and_adds_up(inputs, tmp_path, monkeypatch):
  # The counts that check_flow compares (issue 17): every shuffle of the KB merge (in memory
  # its edge and value joins; elsewhere also the redirect rounds and the entity join), the
  # page dedupe and the shard writers counts the values in
  # and out, each routing step of the merge what it read of its input, and every TFRecord
  # output the records written; on a run that loses nothing they add up to what the pipeline
  # counted (the MANIFEST's counts), and stats.json holds none of them.
  seen = {}
  check = extract.check_flow

  def recording(flow, stats, options=None):
    seen.update(flow=dict(flow), stats=dict(stats))
    return check(flow, stats, options)
  monkeypatch.setattr(extract, "check_flow", recording)
  titles = tmp_path / "titles.txt"
  titles.write_text("Ore_River\nGull_Sea\nGull_Sea_(band)\nLake_Fen\n", encoding="utf-8")
  redirects = tmp_path / "redirects.tsv"
  redirects.write_text("Gull_Bay\tGull_Sea\n", encoding="utf-8")
  out = str(tmp_path / "out")
  stats = extract.run([inputs["dump"]], out, heldout_fraction=inputs["fraction"],
                      descriptions=inputs["descriptions"], title_lists=[str(titles)],
                      redirect_lists=[str(redirects)])
  flow, manifest = seen["flow"], json.load(open(os.path.join(out, schema.MANIFEST_FILE)))
  shuffles = sorted(name[:-len("/in")] for name in flow if name.endswith("/in"))
  # In memory the merge's redirect rounds and its entity join are gathered into the edge and
  # value joins (kb_merge.MergeKnowledgeBase's `gathered`).
  assert shuffles == sorted(
      ["Pages", "JoinEdges", "JoinValuesRedirects", "AliasCounts"]
      + [f"{prefix}/shards" for prefix in (schema.ENTITIES_PREFIX, schema.TRAIN_MENTIONS_PREFIX,
                                           schema.HELDOUT_MENTIONS_PREFIX)])
  for name in shuffles:
    assert flow[f"{name}/in"] == flow[f"{name}/out"], name
  # The Gull Bay edge, the listed titles and the page's links all pass the merge's joins;
  # every page of the dump its dedupe.
  assert flow["JoinEdges/in"] > 0 and flow["JoinValuesRedirects/in"] > 0
  assert flow["Pages/in"] == stats["pages_read"] == DUMP.count("<page>")
  # The alias counts' gathering moves one count per (alias key, entity) of each bundle: at
  # least one per entity that a training mention names, at most one per training mention.
  assert 0 < flow["AliasCounts/in"] <= stats["mentions_train"]
  # The merge's inputs that two steps read: each step read all of it.
  reads = {name[:-len("/read")] for name in flow if name.endswith("/read")}
  assert {"articles@RouteArticleKeys", "articles@RouteArticles",
          "final_edges@RouteFinalEdges"} <= reads
  assert (flow["articles@RouteArticleKeys/read"] == flow["articles@RouteArticles/read"]
          == stats["articles"] == 3)
  # Each input read whole: what its producer counted.
  assert flow["title_packs@RouteTitlePacks/read"] == stats["titles_listed_read"] == 4
  assert flow["title_redirect_packs@RouteTitleRedirectPacks/read"] == stats[
      "title_list_redirects_read"] == 1
  assert flow["redirects@RouteRedirects/read"] == stats["redirects"] == 5
  # Ore Stream, Ore creek, Ore brook, Loop A and B and Gull Bay: 6 final edges.
  assert flow["final_edges@RouteFinalEdges/read"] == 6
  for prefix in (schema.ENTITIES_PREFIX, schema.TRAIN_MENTIONS_PREFIX,
                 schema.HELDOUT_MENTIONS_PREFIX):
    assert flow[f"{prefix}/written"] == manifest["counts"][prefix] == len(
        _read_records(out, prefix)), prefix
  assert manifest["counts"][schema.ENTITIES_PREFIX] > 0
  assert manifest["counts"][schema.TRAIN_MENTIONS_PREFIX] > 0
  assert not any("/" in name for name in stats)


def test_flow_losses_name_each_shuffle_and_output_that_does_not_add_up():
  flow = {"JoinEdges/in": 10, "JoinEdges/out": 10, "JoinByEntityKey/in": 7,
          "JoinByEntityKey/out": 5, "entities/shards/in": 3, "entities/shards/out": 4,
          "entities/written": 4, "mentions_train/written": 9}
  assert beam_io.flow_losses(flow, {"entities": 4, "mentions_train": 9}) == [
      "shuffle JoinByEntityKey: 7 values in, 5 out",
      "shuffle entities/shards: 3 values in, 4 out"]
  assert beam_io.flow_losses(flow, {"entities": 3, "mentions_heldout": 1}) == [
      "shuffle JoinByEntityKey: 7 values in, 5 out",
      "shuffle entities/shards: 3 values in, 4 out",
      "entities files: 4 records written, 3 counted",
      "mentions_heldout files: 0 records written, 1 counted"]
  assert beam_io.flow_losses({"A/in": 2, "A/out": 2}, {}) == []
  # A PCollection that two steps read: both must have read all of it.
  reads = {"edges@RouteA/read": 6, "edges@RouteB/read": 4, "pages@RouteC/read": 3}
  assert beam_io.flow_losses(reads) == ["edges read by RouteA: 6, RouteB: 4"]
  assert beam_io.flow_losses({**reads, "edges@RouteB/read": 6}) == []
  # What each input's producer counted: every reader must have read that many.
  assert beam_io.flow_losses(reads, {}, {"pages": 3, "edges": 6, "titles": 0}) == [
      "edges: 6 made, read by RouteA: 6, RouteB: 4"]
  assert beam_io.flow_losses(reads, {}, {"pages": 5, "lists": 2}) == [
      "lists: 2 made, read by no step", "pages: 5 made, read by RouteC: 3",
      "edges read by RouteA: 6, RouteB: 4"]


def test_same_bytes_in_memory_and_multi_processing(inputs, tmp_path):
  outputs = {}
  for mode, workers in (("in_memory", 1), ("multi_processing", 2)):
    out = str(tmp_path / mode)
    options = PipelineOptions([f"--direct_running_mode={mode}",
                               f"--direct_num_workers={workers}"])
    extract.run([inputs["dump"]], out, heldout_fraction=inputs["fraction"],
                descriptions=inputs["descriptions"], pipeline_options=options, num_shards=2)
    outputs[mode] = {
        name: open(os.path.join(out, name), "rb").read()
        for name in sorted(os.listdir(out)) if name != schema.MANIFEST_FILE}
  assert outputs["in_memory"] == outputs["multi_processing"]


REAL_DUMP = testutil.shared_data("enwiki", "dbpedia-minidump-en.xml.bz2")


def _written_and_counted(dump_paths, out, **kwargs):
  os.makedirs(out)
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options())
  extract.build_pipeline(pipeline, dump_paths, out, num_shards=2, **kwargs)
  result = pipeline.run()
  result.wait_until_finish()
  return _snapshot(out), beam_io.counters(result, extract.COUNTER_NAMESPACE)


def test_a_parsed_batchs_outputs_are_out_of_the_cyclic_collectors_reach():
  """Issue 17: the outputs of a parsed batch live on through the pipeline and hold no cycles:
  ParsePageFn emits them frozen (gc.freeze), so that the young collections their numbers
  trigger do not traverse them; they are the same outputs."""
  import gc  # pylint: disable=g-import-not-at-top
  fn = extract.ParsePageFn()
  fn.setup()
  fn.start_bundle()
  page = pages_lib.xml_dump.Page(page_id=10, title="Ore River", ns=0, text=ORE_RIVER,
                                 redirect_title=None, source="dump.xml")
  batch = pages_lib.parse_batch(fn._parser, [page])  # pylint: disable=protected-access
  payload = batch[1][0][1][0]  # a mention payload of the batch
  assert any(o is payload for o in gc.get_objects())  # reachable before
  outputs = list(fn._emit(batch))  # pylint: disable=protected-access
  assert not any(o is payload for o in gc.get_objects())
  assert outputs and [o.value for o in outputs if isinstance(o, beam.pvalue.TaggedOutput)]


def test_same_bytes_and_counts_with_any_number_of_parse_processes(inputs, tmp_path,
                                                                   monkeypatch, caplog):
  # Pages parsed in worker processes (issue 17) come back in page order: the outputs and the
  # counters are those of the inline parse, on a real dump beside the handmade one (36 pages
  # in batches of 5: several in flight, the last sent at the bundle's end), and pages skipped
  # in a worker (longer than max_page_chars) are counted and logged by the step with file
  # and page id. The same processes build the KB's entities (every bucket here, not only
  # those of 2,000 values: its buckets come back in order too).
  if not os.path.exists(REAL_DUMP):
    pytest.skip("../shared/data/enwiki not available")
  monkeypatch.setattr(extract.ParsePageFn, "BATCH_PAGES", 5)
  monkeypatch.setattr(kb_merge.BuildEntitiesFn, "POOL_VALUES", 1)
  kwargs = {"heldout_fraction": inputs["fraction"], "descriptions": inputs["descriptions"],
            "max_page_chars": 60000}
  dumps = [inputs["dump"], REAL_DUMP]
  inline, inline_counts = _written_and_counted(dumps, str(tmp_path / "inline"), **kwargs)
  assert inline_counts["pages_failed"] >= 2 and inline_counts["articles"] >= 10
  assert inline_counts["links_kept"] > 500
  for processes, start_method in ((3, "fork"), (2, "spawn")):
    caplog.clear()
    files, counts = _written_and_counted(
        dumps, str(tmp_path / f"{start_method}{processes}"), parse_processes=processes,
        parse_start_method=start_method, **kwargs)
    assert files == inline, start_method
    assert counts == inline_counts, start_method
    skipped = [r.getMessage() for r in caplog.records if "Skipped page" in r.getMessage()]
    assert len(skipped) == inline_counts["pages_failed"]
    assert all(re.search(r"file .*dbpedia-minidump-en.xml.bz2, page id \d+ \('.+'\): "
                         r"page of \d+ characters exceeds 60000", m) for m in skipped), skipped


def test_parse_processes_by_runner(monkeypatch):
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
  in_memory = beam_io.default_pipeline_options()
  assert extract.default_parse_processes(in_memory) == 3
  assert extract.default_parse_start_method(in_memory) == "fork"
  for args in (["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
               ["--direct_running_mode=multi_threading"], ["--runner=DataflowRunner"]):
    options = beam_io.default_pipeline_options(args)
    assert extract.default_parse_processes(options) == 1, args
    assert extract.default_parse_start_method(options) == "spawn", args
    # Worker processes only in memory (Beam's multi_threading mode lost values with them).
    extract.check_parse_processes(1, options)
    with pytest.raises(ValueError, match="parse_processes=2 needs Beam's local runner in "
                                         "memory"):
      extract.check_parse_processes(2, options)
  extract.check_parse_processes(None, in_memory)
  extract.check_parse_processes(3, in_memory)
  for bad in (0, extract.MAX_PARSE_PROCESSES + 1):
    with pytest.raises(ValueError, match=r"parse_processes must be in \[1, 256\]"):
      extract.check_parse_processes(bad, in_memory)


def _bundle_outputs(fn, elements):
  """Runs a DoFn over one bundle; returns [(output tag or None, value)] in the order sent
  (finish_bundle's WindowedValues unwrapped)."""
  fn.start_bundle()
  out = [o for e in elements for o in fn.process(e)]
  for o in fn.finish_bundle():
    if isinstance(o, beam.pvalue.TaggedOutput):
      out.append(beam.pvalue.TaggedOutput(o.tag, o.value.value))
    else:
      out.append(o.value)
  return [(o.tag, o.value) if isinstance(o, beam.pvalue.TaggedOutput) else (None, o)
          for o in out]


def test_mention_records_of_a_bundle_leave_in_packs(monkeypatch):
  """Issue 17: MentionRecordsFn sends a bundle's records in packs (not one element per
  entity) and its alias counts in packs of about ALIAS_PACK keys; every mention's record
  lands once in its split and the summed alias counts are the training mentions' counts."""
  monkeypatch.setattr(extract.MentionRecordsFn, "ALIAS_PACK", 2)
  pages = [f"Page {i}" for i in range(12)]
  fraction = sorted(extract.fingerprint_fraction(p) for p in pages)[4]  # 4 held-out pages
  spans = ["Ore", "the river", "ore", "Port"]
  elements, want_train, want_heldout, want_aliases = [], set(), set(), {}
  for e in range(3):
    entity = records.Entity(f"Entity {e}", f"Text {e}.", ("Cat",), (), ("page",))
    part = records.entity_features_part(entity)
    payloads = []
    for m in range(5):
      page, span = pages[(e * 5 + m) % 12], spans[(e + m) % 4]
      payload = (f"m{e}-{m}", page, span, f"own {e} {m}".encode())
      payloads.append(payload)
      record = (payload[0], records.mention_record(payload, part))
      if extract.is_heldout(page, fraction):
        want_heldout.add(record)
      else:
        want_train.add(record)
        key = (extract.titles.alias_key(span), entity.title)
        want_aliases[key] = want_aliases.get(key, 0) + 1
    elements.append((payloads, entity))
  # The KB merge's packs of one entity's mentions come in lists.
  out = _bundle_outputs(extract.MentionRecordsFn(fraction), [elements[:2], elements[2:]])
  train = [r for tag, pack in out if tag is None for r in pack]
  heldout = [r for tag, pack in out if tag == "heldout" for r in pack]
  alias_packs = [pack for tag, pack in out if tag == "alias"]
  assert sorted(train) == sorted(want_train) and sorted(heldout) == sorted(want_heldout)
  assert len(train) + len(heldout) == 15 and train and heldout
  assert sum(1 for tag, _ in out if tag is None) == 1  # one pack for the bundle, not three
  # Sent once they hold ALIAS_PACK keys (after the entity that fills them: at most its 5
  # mentions' keys more), the rest at the end of the bundle.
  assert len(alias_packs) > 1 and all(2 <= len(pack) < 2 + 5 for pack in alias_packs[:-1])
  combine = extract.AliasCountsFn()
  halves = [combine.create_accumulator(), combine.create_accumulator()]
  for i, pack in enumerate(alias_packs):
    halves[i % 2] = combine.add_input(halves[i % 2], pack)
  rows = combine.extract_output(combine.merge_accumulators(halves))
  assert sorted(rows) == sorted((a, t, n) for (a, t), n in want_aliases.items())
  assert combine.extract_output(combine.create_accumulator()) == []
  # The pipeline's sum of the gathered packs (one key, the packs in any order), and its lines.
  summed = extract.sum_alias_counts((None, iter(alias_packs[::-1])))
  assert summed == {extract.alias_count_key(a, t): n for (a, t), n in want_aliases.items()}
  assert extract.alias_table_lines([summed]) == [
      f"{a}\t{t}\t{n}\n" for a, t, n in sorted(rows)]


def test_alias_table_lines_are_the_sorted_rows():
  """alias_table_lines sorts lines as strings only where that is the order of the rows
  (alias key, entity title, count) that format_tsv sorts: keys that hold a character below
  TAB or a TAB in the title are sorted as rows (the string sort puts 'a\\x01b' before 'a',
  and 'b\\t1' after 'b' by the count's digit)."""
  rng = random.Random(17)
  alphabet = ["a", "b", " ", "é", "\x01", "\t", "0", "9", "~"]
  for trial in range(300):
    rows = {}
    for _ in range(rng.randrange(1, 30)):
      alias = "".join(rng.choice(alphabet[:5] if trial % 2 else alphabet[:4] + ["~"])
                      for _ in range(rng.randrange(0, 4)))
      title = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 4)))
      rows[(alias, title)] = rng.randrange(1, 200)
    want = beam_io.format_tsv([(a, t, n) for (a, t), n in rows.items()])
    sums = [{extract.alias_count_key(a, t): n for (a, t), n in rows.items()}]
    assert "".join(extract.alias_table_lines(sums)) == want, rows
  # Several sums are merged; none is an empty table.
  assert extract.alias_table_lines([{"a\tA": 1}, {"a\tA": 2, "b\tB": 1}]) == [
      "a\tA\t3\n", "b\tB\t1\n"]
  assert extract.alias_table_lines([]) == []


def test_fingerprint_is_stable():
  assert extract.fingerprint_fraction("Ore River") == pytest.approx(
      int.from_bytes(__import__("hashlib").sha256(b"Ore River").digest()[:8], "big") / 2**64)
  assert not extract.is_heldout("Anything", 0.0)
  assert extract.is_heldout("Anything", 1.0)


# --- multistream dumps split by their index ------------------------------------------------


def _output_bytes(directory):
  """Every output file's bytes but MANIFEST.json (times) and stats.json (compared apart)."""
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))
          if name not in (schema.MANIFEST_FILE, schema.STATS_FILE)}


def _without_multistream_counters(stats):
  return {k: v for k, v in stats.items() if not k.startswith("multistream_")}


@pytest.fixture(scope="module")
def multistream(tmp_path_factory):
  if not os.path.exists(multistream_testutil.GENSIM_DUMP):
    pytest.skip("../shared/data/enwiki not available")
  directory = str(tmp_path_factory.mktemp("multistream"))
  # The real pages of up to 15 kB (about 30 articles, 100 redirects): a fast pipeline.
  dump_path, index_path, offsets = multistream_testutil.write_multistream(
      multistream_testutil.GENSIM_DUMP, directory, pages_per_stream=10, max_page_bytes=15_000)
  return {"dump": dump_path, "index": index_path, "offsets": offsets}


def test_multistream_split_by_index_gives_same_bytes(multistream, tmp_path):
  common = {"heldout_fraction": 0.2, "num_shards": 2}
  whole_out = str(tmp_path / "whole")
  whole = extract.run([multistream["dump"]], whole_out, detect_multistream_index=False,
                      **common)
  assert "multistream_ranges" not in whole and whole["files_read"] == 1
  assert whole["pages_read"] == 130 and whole["links_kept"] > 1000
  # The index is found beside the dump by name; ranges of ~30 kB hold 2-3 streams each.
  split_out = str(tmp_path / "split")
  split = extract.run([multistream["dump"]], split_out, range_bytes=30_000, **common)
  assert split["multistream_files"] == 1 and split["multistream_ranges"] >= 3
  assert split["multistream_ranges_read"] == split["multistream_ranges"]
  # Given by flag, one range per stream, two worker processes.
  options = PipelineOptions(["--direct_running_mode=multi_processing",
                             "--direct_num_workers=2"])
  flag_out = str(tmp_path / "flag")
  by_flag = extract.run([multistream["dump"]], flag_out, multistream_index=multistream["index"],
                        detect_multistream_index=False, range_bytes=1,
                        pipeline_options=options, **common)
  # One range per stream; the footer stream (not in the index) rides with the last one.
  assert by_flag["multistream_ranges"] == len(multistream["offsets"]) + 1
  expected = _output_bytes(whole_out)
  assert _output_bytes(split_out) == expected
  assert _output_bytes(flag_out) == expected
  assert _without_multistream_counters(split) == whole
  assert _without_multistream_counters(by_flag) == whole
  with open(os.path.join(flag_out, schema.MANIFEST_FILE), encoding="utf-8") as f:
    assert json.load(f)["multistream_index"] == multistream["index"]


def test_plan_reads_falls_back_on_bad_index(multistream, tmp_path):
  metadata = FileSystems.match([multistream["dump"]])[0].metadata_list[0]
  plan = extract.PlanReadsFn({}, detect_index=True, range_bytes=10**9)
  assert list(plan.process(metadata)) == [(multistream["dump"], 0, metadata.size_in_bytes)]
  assert list(extract.PlanReadsFn({}, detect_index=False).process(metadata)) == [
      (multistream["dump"], None, None)]
  bad_index = tmp_path / "bad-index.txt"
  bad_index.write_text(f"{metadata.size_in_bytes + 5}:1:Beyond the end\n")
  plan = extract.PlanReadsFn({multistream["dump"]: str(bad_index)})
  assert list(plan.process(metadata)) == [(multistream["dump"], None, None)]
  with pytest.raises(FileNotFoundError, match="no-index"):
    extract.run([multistream["dump"]], str(tmp_path / "out"),
                multistream_index=str(tmp_path / "no-index*"))


def _read_with(threads, items, monkeypatch, caplog, read_ahead_chars=None):
  """ReadPagesFn(threads) over `items` as one bundle: (page ids and titles, counts, logged
  lines) in the order the step emitted, counted and logged them."""
  counts = {}
  monkeypatch.setattr(extract, "_count",
                      lambda name, n=1: counts.__setitem__(name, counts.get(name, 0) + n))
  if read_ahead_chars is not None:
    monkeypatch.setattr(extract.ReadPagesFn, "READ_AHEAD_CHARS", read_ahead_chars)
  caplog.clear()
  fn = extract.ReadPagesFn(threads=threads)
  fn.setup()
  fn.start_bundle()
  try:
    pages = [p for item in items for p in fn.process(item)]
    pages += [wv.value for wv in fn.finish_bundle()]
  finally:
    fn.teardown()
  logged = [r.getMessage() for r in caplog.records if "Skipped unreadable" in r.getMessage()]
  return [(p.page_id, p.title) for p in pages], counts, logged


def test_pages_read_in_threads_come_in_the_order_of_the_inline_read(tmp_path, monkeypatch,
                                                                    caplog):
  """Issue 17: with threads > 1 the next items are read while the step emits the pages of the
  first; the pages, counts and log lines are the inline read's, in the same order, also when
  a reader has to wait for the step after each page (READ_AHEAD_CHARS 1), with a truncated
  dump (its pages before the cut, then its error) and an HTML dump among the items."""
  if not os.path.exists(REAL_DUMP):
    pytest.skip("../shared/data/enwiki not available")
  good = tmp_path / "good.xml"
  good.write_text(DUMP, encoding="utf-8")
  truncated = tmp_path / "truncated.xml"
  truncated.write_text(DUMP[:DUMP.rindex("<page>") + 40], encoding="utf-8")
  html = tmp_path / "pages.ndjson"
  html.write_text(json.dumps({"name": "Birch Cove", "identifier": 7, "article_body": {
      "html": "<p>Birch Cove faces the bay.</p>"}}) + "\n{not json\n", encoding="utf-8")
  items = [str(good), REAL_DUMP, str(truncated), str(html), str(good)]
  inline = _read_with(1, items, monkeypatch, caplog)
  assert len(inline[0]) > 2 * DUMP.count("<page>") + 20  # the real dump's pages among them
  assert inline[1]["pages_unreadable"] == 2 and len(inline[2]) == 2
  assert inline[1]["files_read"] == 5 and inline[1]["files_read_html"] == 1
  for threads, ahead in ((2, None), (3, None), (2, 1)):
    assert _read_with(threads, items, monkeypatch, caplog, ahead) == inline, (threads, ahead)


def test_threaded_read_raises_where_the_inline_read_does_and_stops_its_readers(
    tmp_path, monkeypatch):
  """A file that cannot be opened fails the step with the inline read's error, after the
  pages of the items before it; a bundle left unfinished (a reader waiting for the step to
  take its pages) is cancelled by teardown, which returns."""
  good = tmp_path / "good.xml"
  good.write_text(DUMP, encoding="utf-8")
  missing = str(tmp_path / "missing.xml")
  monkeypatch.setattr(extract, "_count", lambda name, n=1: None)
  for threads in (1, 2):
    fn = extract.ReadPagesFn(threads=threads)
    fn.setup()
    fn.start_bundle()
    pages = []
    with pytest.raises(IOError, match="missing.xml"):
      for item in (str(good), missing, str(good)):
        pages.extend(fn.process(item))
      pages.extend(fn.finish_bundle())
    fn.teardown()
    assert len(pages) == DUMP.count("<page>"), threads
  monkeypatch.setattr(extract.ReadPagesFn, "READ_AHEAD_CHARS", 1)
  fn = extract.ReadPagesFn(threads=2)
  fn.setup()
  fn.start_bundle()
  first = fn.process(str(good))
  assert list(first) == []  # read ahead, not emitted yet
  next(fn.process(str(good)))  # the first item's first page; its reader waits for the step
  started = time.monotonic()
  fn.teardown()
  assert time.monotonic() - started < 10
  with pytest.raises(ValueError, match="threads must be at least 1"):
    extract.ReadPagesFn(threads=0)


def _file_bytes(directory):
  """{name: bytes} of an extraction's files, the manifest's run times left out."""
  files = {}
  for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), "rb") as f:
      files[name] = f.read()
  manifest = json.loads(files.pop(schema.MANIFEST_FILE))
  for key in ("started", "finished"):
    manifest.pop(key)
  files[schema.MANIFEST_FILE] = json.dumps(manifest, sort_keys=True).encode()
  return files


def test_small_dumps_are_decompressed_ahead_with_the_same_outputs(inputs, tmp_path,
                                                                  monkeypatch):
  """Issue 17: in memory, run() decompresses small bz2 dumps while it builds the pipeline
  (dumps.read_ahead) and the reading step takes their bytes; the outputs are those of a run
  that reads the files itself."""
  dump = tmp_path / "dump.xml.bz2"
  with open(inputs["dump"], "rb") as f:
    dump.write_bytes(bz2.compress(f.read()))
  taken = []
  take = extract.read_ahead.take

  def spy(path):
    data = take(path)
    taken.append((path, data is not None))
    return data

  monkeypatch.setattr(extract.read_ahead, "take", spy)
  kwargs = dict(heldout_fraction=inputs["fraction"], descriptions=inputs["descriptions"])
  extract.run([str(dump)], str(tmp_path / "ahead"), **kwargs)
  assert taken == [(str(dump), True)]
  monkeypatch.setattr(extract, "READ_AHEAD_FILE_BYTES", 0)  # none small enough
  taken.clear()
  extract.run([str(dump)], str(tmp_path / "read"), **kwargs)
  assert taken == [(str(dump), False)]
  assert _file_bytes(tmp_path / "ahead") == _file_bytes(tmp_path / "read")


def test_which_dumps_are_decompressed_ahead(tmp_path, monkeypatch):
  site = extract.read_site_infos([multistream_testutil.GENSIM_DUMP])[
      multistream_testutil.GENSIM_DUMP]
  small, large, indexed = (str(tmp_path / n) for n in ("a.xml.bz2", "b.xml.bz2",
                                                        "c-multistream.xml.bz2"))
  for path, size in ((small, 10), (large, 30), (indexed, 10)):
    with open(path, "wb") as f:
      f.write(b"x" * size)
  with open(str(tmp_path / "c-multistream-index.txt.bz2"), "wb") as f:
    f.write(b"")
  infos = {small: site, large: site, indexed: site, "gs://bucket/d.xml.bz2": site,
           str(tmp_path / "e.ndjson"): None}  # another file system; an HTML dump
  monkeypatch.setattr(extract, "READ_AHEAD_FILE_BYTES", 20)
  in_memory = beam_io.default_pipeline_options()
  assert extract.read_ahead_paths(infos, None, True, in_memory) == [small]
  assert extract.read_ahead_paths(infos, None, False, in_memory) == [small, indexed]
  # Largest first (the longest decompression starts first), ties in the order given.
  monkeypatch.setattr(extract, "READ_AHEAD_FILE_BYTES", 40)
  assert extract.read_ahead_paths(infos, None, False, in_memory) == [large, small, indexed]
  monkeypatch.setattr(extract, "READ_AHEAD_FILE_BYTES", 20)
  assert extract.read_ahead_paths(infos, "index*.bz2", True, in_memory) == []
  assert extract.read_ahead_paths(infos, None, True, beam_io.default_pipeline_options(
      ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])) == []
  monkeypatch.setattr(extract, "READ_AHEAD_TOTAL_BYTES", 15)  # the first one only
  assert extract.read_ahead_paths(infos, None, False, in_memory) == [small]
