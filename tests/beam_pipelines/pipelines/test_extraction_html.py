"""Tests of the extraction on HTML dumps: a slice of the real HTML file, hand-written Parsoid
records beside a MediaWiki XML dump, bad input (real runs into tmp_path)."""

import bz2
import functools
import glob
import gzip
import itertools
import json
import os

import pytest

from beam_pipelines.dumps import read_ahead
from beam_pipelines.pipelines import extraction as extract
from dense_entity.kb import records as kb_records
from dense_entity.kb import schema
from tests import testutil
from tests.beam_pipelines.pipelines.test_extraction import _page, _read_records, _single

REAL_FILE = testutil.shared_data("html", "enwiki-2014-render-html.ndjson.gz")
SLICE_PAGES = 4


def _record(page_id, name, html, **extra):
  value = {"name": name, "identifier": page_id, "version": {"identifier": page_id + 900},
           "url": "https://en.wikipedia.org/wiki/" + name.replace(" ", "_"),
           "article_body": {"html": html}}
  value.update(extra)
  return json.dumps(value) + "\n"


@pytest.fixture(scope="module")
def real_slice(tmp_path_factory):
  """The first pages of the real HTML file, as a gzip NDJSON file of their own, extracted."""
  if not os.path.exists(REAL_FILE):
    pytest.skip("needs ../shared/data")
  directory = tmp_path_factory.mktemp("html_slice")
  path = directory / "slice.ndjson.gz"
  with gzip.open(REAL_FILE, "rb") as src, gzip.open(path, "wb") as dst:
    for line in itertools.islice(src, SLICE_PAGES):
      dst.write(line)
  out = str(directory / "out")
  stats = extract.run([str(path)], out, heldout_fraction=0.0)
  return out, stats


def test_real_slice_records_and_counters(real_slice):
  out, stats = real_slice
  assert stats["files_read_html"] == 1
  assert stats["pages_read"] == stats["pages_read_html"] == SLICE_PAGES
  assert stats["articles"] == SLICE_PAGES
  assert "pages_unreadable" not in stats and "pages_failed" not in stats
  kept = sum(stats.get(f"links_kept_{s}", 0)
             for s in ("prose", "table", "template", "caption", "gallery"))
  assert kept == stats["links_kept"]
  assert stats["links_kept_prose"] > stats["links_kept_prose_in_list_items"] > 0
  assert stats["links_dropped_in_navbox"] > 0 and stats["links_dropped_redlink"] > 0
  assert stats["mentions_train"] == stats["links_kept"]  # no redirect, no loop: all kept
  entities = {e[schema.ENTITY_TITLE][0]: _single(e)
              for e in _read_records(out, schema.ENTITIES_PREFIX)}
  band = entities["Renaissance (band)"]
  assert band[schema.ENTITY_TEXT].startswith("Renaissance are an English progressive rock band")
  assert band[schema.ENTITY_SOURCE][0] == "page"
  assert entities["England"][schema.ENTITY_SOURCE] == ["link_target"]
  mentions = {m[schema.MENTION_ID][0]: _single(m)
              for m in _read_records(out, schema.TRAIN_MENTIONS_PREFIX)}
  first = mentions["236128:0"]
  assert (first[schema.MENTION_SPAN], first[schema.ENTITY_TITLE], first[schema.SOURCE_PAGE]) == (
      "English", "England", "Renaissance (band)")
  assert first[schema.MENTION_LEFT] == "Renaissance are an"
  assert first[schema.MENTION_SENTENCE].startswith("Renaissance are an [MASK] progressive rock")
  # Downstream readers take the records as they are.
  manifest = kb_records.require_extraction(out)
  assert manifest["counts"][schema.ENTITIES_PREFIX] == len(entities)
  batch = next(iter(kb_records.entity_dataset(
      kb_records.record_files(out, schema.ENTITIES_PREFIX), batch_size=4)))
  assert batch[schema.ENTITY_TITLE].shape == (4,)
  batch = next(iter(kb_records.mention_dataset(
      kb_records.record_files(out, schema.TRAIN_MENTIONS_PREFIX), batch_size=4)))
  assert batch[schema.MENTION_SPAN].shape == (4,)


PARSOID_ORE = ('<html><body><section><p><b>Ore Valley</b> lies below <a rel="mw:WikiLink" '
               'href="./Mount_Birch">the hill</a> on the <a rel="mw:WikiLink" '
               'href="./Ore_River#Course">river</a>.<sup class="mw-ref reference" '
               'typeof="mw:Extension/ref"><a href="./Ore_Valley#cite_note-1">[1]</a></sup></p>'
               '</section><link rel="mw:PageProp/Category" href="./Category:Valleys"/>'
               '</body></html>')
PARSOID_DAB = ('<html><head><meta property="mw:PageProp/disambiguation"/></head><body>'
               '<p><b>Ore</b> may be:</p><ul><li><a rel="mw:WikiLink" href="./Ore_Valley">'
               'Ore Valley</a></li></ul></body></html>')


def test_html_and_xml_dumps_in_one_run(tmp_path):
  xml = tmp_path / "dump.xml"
  xml.write_text("<mediawiki>\n"
                 + _page(1, "Mount Birch", "'''Mount Birch''' is a hill above [[Ore Valley]].")
                 + _page(2, "Ore Stream", "#REDIRECT [[Ore River]]")
                 + "</mediawiki>\n", encoding="utf-8")
  html = tmp_path / "pages.ndjson.bz2"
  html.write_bytes(bz2.compress((
      _record(10, "Ore Valley", PARSOID_ORE, redirects=[{"name": "Ore Vale"}],
              categories=[{"name": "Category:Norland"}])
      + "\n{not json\n"  # a blank line is skipped, a bad one counted
      + _record(11, "Ore", PARSOID_DAB)
      + _record(12, "Ore River", "<p><b>Ore River</b> runs through the "
                "<a href=\"./Ore_Vale\">vale</a>.</p>")).encode("utf-8")))
  out = str(tmp_path / "out")
  stats = extract.run([str(xml), str(html)], out, heldout_fraction=0.0)
  assert stats["pages_read_html"] == 3 and stats["files_read_html"] == 1
  assert stats["pages_unreadable"] == 1 and stats["files_with_errors"] == 1
  assert stats["pages_disambiguation_by_switch"] == 1
  assert stats["redirects_from_html_records"] == 1
  entities = {e[schema.ENTITY_TITLE][0]: _single(e)
              for e in _read_records(out, schema.ENTITIES_PREFIX)}
  assert sorted(entities) == ["Mount Birch", "Ore River", "Ore Valley"]
  valley = entities["Ore Valley"]
  assert valley[schema.ENTITY_TEXT] == "Ore Valley lies below the hill on the river."
  assert valley[schema.ENTITY_CATEGORIES] == ["Norland", "Valleys"]
  assert valley[schema.ENTITY_ALIASES] == ["Ore Vale"]
  assert entities["Ore River"][schema.ENTITY_ALIASES] == ["Ore Stream"]
  mentions = sorted((m[schema.SOURCE_PAGE][0], m[schema.MENTION_SPAN][0],
                     m[schema.ENTITY_TITLE][0])
                    for m in _read_records(out, schema.TRAIN_MENTIONS_PREFIX))
  # The HTML record's redirect resolves the XML-free link 'Ore Vale' to its page; the
  # disambiguation page gives no mention.
  assert mentions == [("Mount Birch", "Ore Valley", "Ore Valley"),
                      ("Ore River", "vale", "Ore Valley"),
                      ("Ore Valley", "river", "Ore River"),
                      ("Ore Valley", "the hill", "Mount Birch")]
  assert stats["links_dropped_in_ref"] == 1


def test_bad_lines_are_skipped_and_the_first_line_is_checked(tmp_path, caplog):
  good = _record(1, "Birch Cove", '<p>Birch Cove faces <a href="./Ore_Bay">the bay</a>.</p>')
  path = tmp_path / "pages.ndjson"
  path.write_text(good + "{not json\n" + '{"name": "No Id"}\n', encoding="utf-8")
  pages = list(extract.ReadPagesFn().process(str(path)))
  assert [(p.title, p.line) for p in pages] == [("Birch Cove", 1)]
  logged = [r.getMessage() for r in caplog.records if "Skipped unreadable input" in r.getMessage()]
  assert len(logged) == 2 and f"{path}: line 2: not an HTML dump record: not JSON" in logged[0]
  assert f"{path}: line 3: " in logged[1] and "no \"identifier\" field" in logged[1]
  bad_first = tmp_path / "bad_first.ndjson"
  bad_first.write_text('{"name": "Birch Cove", "identifier": 1}\n' + good, encoding="utf-8")
  with pytest.raises(ValueError, match=r"bad_first.ndjson: holds JSON, but line 1 is not an HTML "
                                       r"dump record "
                                       r"\(no \"article_body.html\" field\)"):
    extract.check_inputs([str(bad_first)])


def test_a_file_of_neither_format_is_refused_naming_both(tmp_path):
  path = tmp_path / "notes.txt"
  path.write_text("Ore River notes\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"notes.txt: is not XML .*expected a MediaWiki XML "
                                       r"export.*; or expected an HTML dump: one JSON object"):
    extract.check_inputs([str(path)])
  with pytest.raises(ValueError, match="gzip-compressed"):
    gz = tmp_path / "dump.xml.gz"
    gz.write_bytes(gzip.compress(b"<mediawiki><page></page></mediawiki>"))
    extract.check_inputs([str(gz)])


def test_of_several_bad_dumps_checked_in_threads_the_first_in_order_is_named(tmp_path):
  # check_inputs reads the dumps' heads in threads; what it raises is what a check one file at
  # a time would: the first bad file in sorted order, whichever thread finished first.
  good = tmp_path / "a_good.ndjson"
  with gzip.open(REAL_FILE, "rt", encoding="utf-8") as f:
    good.write_text(f.readline(), encoding="utf-8")
  for name in ("b_notes.txt", "c_notes.txt", "d_notes.txt"):
    (tmp_path / name).write_text("Ore River notes\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"b_notes.txt: is not XML") as raised:
    extract.check_inputs([str(tmp_path / "*")])
  assert "c_notes" not in str(raised.value) and "d_notes" not in str(raised.value)


def test_site_infos_from_the_checks_heads_are_the_headers_read_alone(monkeypatch):
  # check_inputs parses each XML dump's <siteinfo> from the head its check decompressed
  # (build_pipeline then reads no head again): the same SiteInfo as read_siteinfo's own read,
  # on every real dump of eight wikis; an HTML dump has none.
  from beam_pipelines.dumps import xml_dump  # pylint: disable=g-import-not-at-top
  dumps = sorted(glob.glob(testutil.shared_data("otherwiki", "*.xml.bz2")) +
                 glob.glob(testutil.shared_data("enwiki", "*.xml.bz2")))
  assert len(dumps) >= 14
  checked = extract.check_inputs(dumps + [REAL_FILE])["site_infos"]
  assert checked[REAL_FILE] is None
  for path in dumps:
    assert checked[path] == xml_dump.read_siteinfo(path), path
  assert {checked[p].lang for p in dumps} >= {"bn", "el", "hy", "ja", "mr", "uk", "vi", "en"}
  # Given them, read_site_infos opens no file.
  monkeypatch.setattr(extract.FileSystems, "open", lambda *a, **k: 1 / 0)
  assert extract.read_site_infos(dumps + [REAL_FILE], checked) == {
      p: checked[p] for p in dumps}


def _check_dump_two_reads(path):
  """check_dump as it was before issue 17's shared head: the format sniffed from one read of
  the head, then the check of that format reading the head again."""
  from beam_pipelines.dumps import html_dump, xml_dump  # pylint: disable=g-import-not-at-top
  input_format = html_dump.sniff_format(path)
  if input_format == html_dump.FORMAT_HTML:
    html_dump.check_dump_start(path, source_name=path)
    return input_format, None
  try:
    head = xml_dump.check_dump_start(path, source_name=path)
  except xml_dump.DumpError as e:
    raise xml_dump.DumpError(f"{e}; or {html_dump.EXPECTED}") from e
  return input_format, xml_dump.parse_siteinfo(head, path)


def _outcome(check, path):
  try:
    return check(path)
  except Exception as e:  # pylint: disable=broad-except
    return type(e).__name__, str(e)


def test_check_dump_reads_a_head_once_and_decides_as_two_reads(tmp_path, monkeypatch):
  """Issue 17: check_dump decompresses a dump's head once for both the format sniff and the
  XML check; on real dumps of both formats and on bad files of every kind it returns, or
  raises, what sniffing and checking with a read each did."""
  export = (b'<mediawiki xml:lang="uk"><siteinfo><dbname>ukwiki</dbname></siteinfo>'
            b'<page><title>A</title><ns>0</ns><id>1</id><revision><text>x</text></revision>'
            b'</page></mediawiki>')
  with gzip.open(REAL_FILE, "rb") as f:
    html_line = f.readline()
  crc_flipped = bytearray(bz2.compress(html_line))
  crc_flipped[10] ^= 1  # the first block's CRC
  whole = bz2.compress(export + b"<!-- " + os.urandom(1_500_000).hex().encode() + b" -->")
  contents = {
      "export.xml": export, "export.xml.bz2": bz2.compress(export),
      "two_streams.xml.bz2": bz2.compress(export[:40]) + bz2.compress(export[40:]),
      "late_page.xml.bz2": bz2.compress(export.replace(b"<page>", b" " * 2_000_000 + b"<page>")),
      "spaces_then_json.bz2": bz2.compress(b" " * 5000 + html_line),
      "html.ndjson": html_line, "html.ndjson.bz2": bz2.compress(html_line),
      "html.ndjson.gz": gzip.compress(html_line), "xml.gz": gzip.compress(export),
      "empty.xml": b"", "empty.xml.bz2": bz2.compress(b""), "wikitext.bz2": bz2.compress(b"{{A}}"),
      "json.bz2": bz2.compress(b'{"a": 1}\n'), "no_page.xml.bz2": bz2.compress(b"<mediawiki/>"),
      "other_root.xml": b"<html><page/></html>", "cut.xml.bz2": whole[:len(whole) // 2],
      "corrupt_start.xml.bz2": whole[:12] + b"\0" * 40 + whole[52:],
      "bz2_in_bz2.xml.bz2": bz2.compress(bz2.compress(export)),
      "bom.xml.bz2": bz2.compress(b"\xef\xbb\xbf\n" + export),
      # Found by a fuzzing helper: the format's sniff once read only open_text's first 3
      # bytes of a plain file, or a first bz2 stream's; a bad CRC ends a long first read.
      "blank3_html.ndjson": b"  \n" + html_line, "bom_html.ndjson": b"\xef\xbb\xbf" + html_line,
      "blank_stream_html.bz2": bz2.compress(b" ") + bz2.compress(html_line),
      "bad_crc_html.bz2": bytes(crc_flipped),
      # A first read of '{' alone is no HTML dump yet: '{{' is wikitext (html_dump.sniff_final).
      "brace_streams.bz2": bz2.compress(b"{") + bz2.compress(b"{Infobox}}"),
      "blank_wikitext.txt": b"  {{Infobox}}",
  }
  paths = []
  for name, data in contents.items():
    (tmp_path / name).write_bytes(data)
    paths.append(str(tmp_path / name))
  dumps = sorted(glob.glob(testutil.shared_data("otherwiki", "*.xml.bz2")) +
                 glob.glob(testutil.shared_data("enwiki", "*.xml.bz2")))
  assert len(dumps) >= 14
  outcomes = {p: _outcome(extract.check_dump, p) for p in paths + dumps + [REAL_FILE]}
  for path, outcome in outcomes.items():
    assert outcome == _outcome(_check_dump_two_reads, path), path
  # The heads of the bz2 files decompressed ahead (dumps.read_ahead.head: how run() checks
  # them, in memory) give the same outcomes, also with a first chunk smaller than a block.
  for head_chunk in (read_ahead.HEAD_CHUNK_BYTES, 4096):
    monkeypatch.setattr(read_ahead, "HEAD_CHUNK_BYTES", head_chunk)
    heads = []

    def head_of(path, complete):
      heads.append(path)
      return read_ahead.head(path, complete)

    with read_ahead.decompressed_ahead(paths + dumps + [REAL_FILE], threads=2):
      for path, outcome in outcomes.items():
        assert _outcome(functools.partial(extract.check_dump, head_of=head_of),
                        path) == outcome, (path, head_chunk)
    assert len(heads) >= len(dumps) + 20
  kinds = {os.path.basename(p): o[0] for p, o in outcomes.items()}
  assert kinds["export.xml.bz2"] == kinds["two_streams.xml.bz2"] == "xml"
  assert kinds["html.ndjson.bz2"] == kinds["html.ndjson.gz"] == "html"
  assert kinds["blank3_html.ndjson"] == kinds["blank_stream_html.bz2"] == "html"
  assert kinds["bom_html.ndjson"] == kinds["bad_crc_html.bz2"] == "DumpError"
  assert "expected an HTML dump" in outcomes[str(tmp_path / "bad_crc_html.bz2")][1]
  assert "expected a MediaWiki" not in outcomes[str(tmp_path / "bad_crc_html.bz2")][1]
  for name in ("brace_streams.bz2", "blank_wikitext.txt"):
    assert "is not XML (it starts with '{{Infobox}}'" in outcomes[str(tmp_path / name)][1]
  # Cut in a later block: the head decompressed; the reading reports the cut.
  assert kinds["cut.xml.bz2"] == kinds["late_page.xml.bz2"] == "xml"
  # JSON past SNIFF_BYTES is taken for XML, which the XML check refuses.
  assert "holds JSON" in outcomes[str(tmp_path / "spaces_then_json.bz2")][1]
  assert kinds["corrupt_start.xml.bz2"] == kinds["bz2_in_bz2.xml.bz2"] == "DumpError"
  # One decompression of a bz2 XML dump's head: no sniff of its own.
  monkeypatch.setattr(extract.html_dump, "sniff_format", lambda *a: 1 / 0)
  decompressors = []
  real = bz2.BZ2Decompressor

  def counted():
    decompressors.append(1)
    return real()

  monkeypatch.setattr(bz2, "BZ2Decompressor", counted)
  assert extract.check_dump(dumps[0])[0] == "xml"
  assert len(decompressors) == 1
