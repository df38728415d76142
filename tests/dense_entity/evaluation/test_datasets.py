"""Tests for dense_entity.datasets: one fixture per real format, plus the real KORE50 file."""

import json
import os
import shutil

import pytest

from dense_entity.evaluation import datasets
from dense_entity.kb.mention_features import mention_features
from tests import testutil

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
REPO_ROOT = testutil.REPO_ROOT
KORE50 = os.path.join(REPO_ROOT, "..", "shared", "data", "eval", "kore50", "KORE50_AIDA.tsv")


def fixture(name):
  return os.path.join(FIXTURES, name)


def spans(mentions):
  return [(m.doc_id, m.mention, m.start, m.end, m.gold) for m in mentions]


# ----------------------------------------------------------------------------- AIDA


def test_aida_fixture():
  mentions = datasets.load_aida_tsv(fixture("aida_sample.tsv"))
  text = "EU rejects German call to boycott British lamb . Peter Blackburn"
  assert mentions[0].text == text
  assert spans(mentions) == [
      ("1 EU", "EU", 0, 2, "--NME--"),
      ("1 EU", "German", 11, 17, "Germany"),  # Extra AIDA-YAGO2 columns are ignored.
      ("1 EU", "British", 34, 41, "United_Kingdom"),
      ("1 EU", "Peter Blackburn", 49, 64, "--NME--"),  # A two-token mention.
      ("2 JFK", "JFK", 11, 14, "John_F._Kennedy_International_Airport"),  # YAGO \u002e.
  ]
  assert mentions[4].text == "Flights to JFK resumed ."


def test_aida_real_kore50():
  if not os.path.exists(KORE50):
    pytest.skip(f"{KORE50} not present")
  mentions = datasets.load("aida:" + KORE50)
  assert len({m.doc_id for m in mentions}) == 50
  assert len(mentions) == 148
  assert sum(m.gold == "--NME--" for m in mentions) == 4
  # The mention column of each 'B' line, read independently, equals the span text.
  with open(KORE50, encoding="utf-8") as f:
    columns = [line.split("\t")[2] for line in f if line.split("\t")[1:2] == ["B"]]
  assert [m.mention for m in mentions] == columns
  for m in mentions:
    assert m.text[m.start:m.end] == m.mention
  assert mentions[0].doc_id == "1 CEL01" and mentions[0].gold == "David_Beckham"


@pytest.mark.parametrize("content,line,message", [
    ("Orphan\n-DOCSTART- (1)\n", 1, "before the first -DOCSTART-"),
    ("-DOCSTART- (1)\nA\tI\tA\tA_title\n", 2, "does not continue"),
    ("-DOCSTART- (1)\nA\tB\tA B\tX\nB\tI\tA B\tY\n", 3, "does not continue"),
    ("-DOCSTART- (1)\nA\tB\tA\n", 2, "at least 4"),
    ("-DOCSTART- (1)\nA\tX\tA\tA_title\n", 2, "'B' or 'I'"),
    ("-DOCSTART- (1)\nA\tB\tA\t\n", 2, "empty gold"),
])
def test_aida_malformed(tmp_path, content, line, message):
  path = tmp_path / "bad.tsv"
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError, match=rf"bad.tsv:{line}: .*{message}"):
    datasets.load_aida_tsv(str(path))


def test_aida_with_spaces_instead_of_tabs_is_an_error_naming_the_cause(tmp_path):
  # The fixture with every tab turned into a space: no line has tab-separated columns, so it
  # used to parse as tokens without mentions (0 mentions, scored as 0.000 everywhere).
  with open(fixture("aida_sample.tsv"), encoding="utf-8") as f:
    spaced = f.read().replace("\t", " ")
  path = tmp_path / "spaced.tsv"
  path.write_text(spaced, encoding="utf-8")
  with pytest.raises(ValueError, match=r"spaced.tsv:2: columns separated by spaces, not tabs"):
    datasets.load("aida:" + str(path))
  # Without the 4 columns on a line, the whole file is still refused, with the likely cause.
  path.write_text("-DOCSTART- (1 EU)\nEU\nrejects\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"spaced.tsv: no mentions in 3 lines: no line has "
                     r"tab-separated columns"):
    datasets.load("aida:" + str(path))


@pytest.mark.parametrize("spec_format,content,message", [
    ("aida", "", "the file is empty"),
    ("aida", "-DOCSTART- (1)\n-DOCSTART- (2)\n", "no line has tab-separated columns"),
    ("jsonl", "", "no mentions in this jsonl dataset"),
    ("jsonl", '{"text": "Nothing here.", "mentions": []}\n', "no mentions in this jsonl"),
])
def test_a_dataset_with_no_mentions_is_an_error_naming_the_file(tmp_path, spec_format, content,
                                                                message):
  path = tmp_path / "empty.data"
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError, match=rf"empty.data: .*{message}"):
    datasets.load(f"{spec_format}:{path}")


@pytest.mark.parametrize("spec_format, text", [
    ("aida", "-DOCSTART- (1)\nM\u00fcller\tB\tM\u00fcller\tThomas_M\u00fcller\n"),
    ("jsonl", '{"text": "Ok.", "mentions": []}\n{"text": "M\u00fcller", "mentions": []}\n'),
])
def test_a_dataset_that_is_not_utf8_is_an_error_naming_the_file(tmp_path, spec_format, text):
  path = tmp_path / "latin1.data"
  path.write_bytes(text.encode("latin-1"))  # line 2 holds the one non-UTF-8 byte
  with pytest.raises(ValueError, match=r"latin1.data(:2)?: not UTF-8 text"):
    datasets.load(f"{spec_format}:{path}")


def test_a_non_utf8_byte_far_into_an_aida_file_names_its_line(tmp_path):
  path = tmp_path / "late.tsv"
  good = "-DOCSTART- (1)\n" + "the\nriver\n" * 2000
  path.write_bytes(good.encode() + "M\u00fcller\tB\tM\u00fcller\tThomas_M\u00fcller\n"
                   .encode("latin-1"))
  with pytest.raises(ValueError, match=r"late.tsv:4002: not UTF-8 text"):
    datasets.load(f"aida:{path}")


# ----------------------------------------------------------------------------- JSONL


def test_jsonl_fixture():
  mentions = datasets.load("jsonl:" + fixture("sample.jsonl"))
  assert spans(mentions) == [
      ("ore", "Ore River", 4, 13, "Ore_River"),
      ("ore", "Port Alder", 32, 42, "Port Alder"),
      ("sample.jsonl:2", "Silver Owls", 0, 11, "Silver_Owls"),
      ("sample.jsonl:2", "Birch Cove", 22, 32, "--NME--"),  # null entity is NIL.
  ]


@pytest.mark.parametrize("record,message", [
    ("not json", "invalid JSON"),
    ('["text"]', "JSON object"),
    ('{"mentions": []}', '"text" must be a string'),
    ('{"text": "abc"}', '"mentions" must be a list'),
    ('{"text": "abc", "mentions": [{"start": 1, "end": 9, "entity": "A"}]}',
     r"mention 0: mention span \[1, 9\)"),
    ('{"text": "abc", "mentions": [{"start": 2, "end": 2, "entity": "A"}]}', "empty"),
    ('{"text": "abc", "mentions": [{"start": true, "end": 2, "entity": "A"}]}',
     '"start" must be an integer'),
    ('{"text": "abc", "mentions": [{"start": 0, "end": 2}]}', 'missing "entity"'),
    ('{"text": "abc", "mentions": [{"start": 0, "end": 2, "entity": 3}]}', '"entity" must be'),
    ('{"text": "abc", "mentions": [{"start": 0, "end": 2, "entity": "A", "mention": "bc"}]}',
     "differs"),
])
def test_jsonl_malformed_names_file_and_line(tmp_path, record, message):
  path = tmp_path / "bad.jsonl"
  good = json.dumps({"text": "ok", "mentions": []})
  path.write_text(good + "\n\n" + record + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=rf"bad.jsonl:3: .*{message}"):
    datasets.load_jsonl(str(path))


# ----------------------------------------------------------------------------- NIF


def test_nif_fixture():
  mentions = datasets.load("nif:" + fixture("sample_nif.ttl"))
  ore = "http://example.org/eval/doc-ore#char=0,43"
  owls = "http://example.org/eval/doc-owls#char=0,46"
  assert spans(mentions) == [
      (ore, "Ore River", 4, 13, "Ore_River"),  # dbpedia.org/resource URI.
      (ore, "farms", 21, 26, "--NME--"),  # No itsrdf:taIdentRef.
      (ore, "Port Alder", 32, 42, "Port_Alder"),  # en.wikipedia.org URL.
      # Offsets written in UTF-16 units after an emoji, recognised through nif:anchorOf.
      (owls, "Silver Owls", 19, 30, "Silver_Owls_%28band%29"),
      (owls, "Birch Cove", 34, 44, "--NME--"),  # GERBIL notInWiki URI.
  ]
  assert mentions[0].text == "The Ore River drains farms near Port Alder."


NIF_HEADER = """\
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix nif: <http://persistence.uni-leipzig.org/nlp2rdf/ontologies/nif-core#> .
@prefix itsrdf: <http://www.w3.org/2005/11/its/rdf#> .
<http://x/d#char=0,9> a nif:Context ; nif:isString "Ore River" .
"""


@pytest.mark.parametrize("phrase,message", [
    ('<http://x/d#char=0,3> nif:referenceContext <http://x/d#char=0,9> ; '
     'nif:beginIndex "0"^^xsd:nonNegativeInteger ; nif:endIndex "30"^^xsd:nonNegativeInteger .',
     r"phrase <http://x/d#char=0,3>: mention span \[0, 30\)"),
    ('<http://x/d#char=0,3> nif:referenceContext <http://x/d#char=0,9> ; '
     'nif:beginIndex "0" ; nif:endIndex "3" ; nif:anchorOf "Riv" .', "anchorOf 'Riv' differs"),
    ('<http://x/d#char=0,3> nif:referenceContext <http://x/d#char=0,9> ; nif:endIndex "3" .',
     "0 nif:beginIndex"),
    ('<http://x/p> nif:referenceContext <http://x/other> ; nif:beginIndex "0" ; '
     'nif:endIndex "3" .', "has no nif:isString"),
    ('<http://x/p> nif:referenceContext <http://x/d#char=0,9> ; nif:beginIndex "zero" ; '
     'nif:endIndex "3" .', "is not an integer"),
    ("<http://x/p> nif:referenceContext", "invalid Turtle"),
])
def test_nif_malformed_names_file_and_resource(tmp_path, phrase, message):
  path = tmp_path / "bad.ttl"
  path.write_text(NIF_HEADER + phrase + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=rf"bad.ttl: .*{message}"):
    datasets.load_nif(str(path))


def test_title_from_uri():
  assert datasets.title_from_uri("http://en.wikipedia.org/wiki/Ore_River") == "Ore_River"
  assert datasets.title_from_uri("https://en.wikipedia.org/wiki/Kestrel%27s_Rock") == (
      "Kestrel%27s_Rock")
  assert datasets.title_from_uri("http://dbpedia.org/resource/Port_Alder") == "Port_Alder"
  assert datasets.title_from_uri("http://aksw.org/notInWiki/Zed") == "--NME--"
  assert datasets.title_from_uri("http://de.dbpedia.org/resource/X") == (
      "http://de.dbpedia.org/resource/X")


# ----------------------------------------------------------------------------- Wikinews


def test_wikinews_fixture():
  directory = fixture("wikinews")
  mentions = datasets.load_wikinews(os.path.join(directory, "mentions.tsv"),
                                    os.path.join(directory, "docs.tsv"),
                                    os.path.join(directory, "text"), verify_md5=True)
  assert [(m.doc_id, m.mention, m.gold) for m in mentions] == [
      ("2018-01-03_00_Harbor", "Port Alder", "Port_Alder"),
      ("2018-01-03_00_Harbor", "Ore River", "Ore_River"),
      ("2018-01-03_00_Harbor", "Port Alder", "Port_Alder"),
      ("2018-01-03_00_Harbor", "Birch Cove", "Birch_Cove"),
      ("2018-01-04_00_Music", "Silver Owls", "The_Silver_Owls"),
      ("2018-01-04_00_Music", "Kestrel's Rock", "Kestrel%27s_Rock"),
  ]
  assert (mentions[0].start, mentions[0].end) == (57, 67)
  assert (mentions[2].start, mentions[2].end) == (127, 137)
  assert mentions[0].text.startswith("Wednesday, January 3, 2018\n\n")
  assert spans(datasets.load("wikinews:" + directory)) == spans(mentions)


def _copy_wikinews(tmp_path):
  directory = tmp_path / "wikinews"
  shutil.copytree(fixture("wikinews"), directory)
  return directory


def test_wikinews_offset_mismatch_names_file_and_line(tmp_path):
  directory = _copy_wikinews(tmp_path)
  mentions_tsv = directory / "mentions.tsv"
  lines = mentions_tsv.read_text(encoding="utf-8").splitlines(keepends=True)
  lines[2] = lines[2].replace("\t84\t", "\t85\t")
  mentions_tsv.write_text("".join(lines), encoding="utf-8")
  with pytest.raises(ValueError, match=r"mentions.tsv:3: text\[85:94\]"):
    datasets.load("wikinews:" + str(directory))


def test_wikinews_missing_text_and_unknown_doc(tmp_path):
  directory = _copy_wikinews(tmp_path)
  os.remove(directory / "text" / "2018-01-04_00_Music")
  with pytest.raises(ValueError, match=r"mentions.tsv:6: document text .* not found"):
    datasets.load("wikinews:" + str(directory))
  docs_tsv = directory / "docs.tsv"
  docs_tsv.write_text(docs_tsv.read_text(encoding="utf-8").splitlines()[0] + "\n",
                      encoding="utf-8")
  with pytest.raises(ValueError, match=r"mentions.tsv:2: docid .* not in"):
    datasets.load("wikinews:" + str(directory))


def test_wikinews_md5_mismatch(tmp_path):
  directory = _copy_wikinews(tmp_path)
  text = directory / "text" / "2018-01-04_00_Music"
  text.write_bytes(text.read_bytes() + b"\n")
  args = [str(directory / "mentions.tsv"), str(directory / "docs.tsv"), str(directory / "text")]
  assert len(datasets.load_wikinews(*args)) == 6
  with pytest.raises(ValueError, match=r"docs.tsv:3: text_md5"):
    datasets.load_wikinews(*args, verify_md5=True)


def test_wikinews_bad_header(tmp_path):
  directory = _copy_wikinews(tmp_path)
  (directory / "mentions.tsv").write_text("docid\tpos\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"mentions.tsv:1: header"):
    datasets.load("wikinews:" + str(directory))


# ----------------------------------------------------------------------------- specs, features


@pytest.mark.parametrize("spec,message", [
    ("kore50.tsv", "FORMAT:PATH"),
    ("aida:", "FORMAT:PATH"),
    ("conll:x.tsv", "unknown format 'conll'"),
])
def test_load_bad_spec(spec, message):
  with pytest.raises(ValueError, match=message):
    datasets.load(spec)


def test_features_are_the_papers_mention_features():
  mentions = datasets.load_jsonl(fixture("sample.jsonl"))
  m = mentions[1]
  assert datasets.features(m) == mention_features(m.text, m.start, m.end)
  assert datasets.features(m)["mention_span"] == "Port Alder"
  assert datasets.all_features(mentions) == [datasets.features(x) for x in mentions]
