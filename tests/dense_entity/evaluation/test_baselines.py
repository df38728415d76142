"""Tests for dense_entity.baselines: AT-Prior, AT-Ext and BM25 (hand-computed values)."""

import math

import numpy as np
import pytest

from dense_entity.evaluation import baselines

ALIAS_COUNTS = """\
port alder\tPort Alder\t6
port alder\tPort Alder (ship)\t2
alder\tAlder\t5
alder\tPort Alder\t1
port\tPort (wine)\t4
ore\tOre River\t2
ore\tOre (mineral)\t2
silver owls\tSilver_Owls\t2
"""

REDIRECTS = """\
Silver Owls\tThe Silver Owls
Owls (band)\tThe Silver Owls
"""


@pytest.fixture
def table(tmp_path):
  counts = tmp_path / "alias_counts.tsv"
  counts.write_text(ALIAS_COUNTS, encoding="utf-8")
  redirects = tmp_path / "redirects.tsv"
  redirects.write_text(REDIRECTS, encoding="utf-8")
  return baselines.AliasTable.from_tsv(str(counts), str(redirects))


def test_at_prior_ranks_by_prior(table):
  # 'Port  ALDER' has the alias key 'port alder': counts 6 and 2.
  assert table.at_prior("Port  ALDER") == [("Port Alder", 0.75), ("Port Alder (ship)", 0.25)]
  assert table.at_prior("Port Alder", k=1) == [("Port Alder", 0.75)]
  assert table.at_prior("Unknown place") == []
  assert table.at_prior("Port Alder", k=0) == []


def test_at_prior_ties_broken_by_title(table):
  assert table.at_prior("ore") == [("Ore (mineral)", 0.5), ("Ore River", 0.5)]


def test_at_prior_counts_anchors_only_and_resolves_their_entities(table):
  # The paper's AT-Prior: a redirect title is no alias (AT-Prior+TR adds those).
  assert table.at_prior("Owls (band)") == []
  # The anchor entity 'Silver_Owls' resolves to 'The Silver Owls' through the redirects.
  assert table.counts("silver owls") == {"The Silver Owls": 2}


def test_at_prior_tr_adds_titles_and_redirects_as_aliases(table):
  kb = ["Port Alder", "Port Alder (ship)", "The Silver Owls", "Jurgen klinsmann", "Alder"]
  redirects = {"Silver Owls": "The Silver Owls", "Owls (band)": "The Silver Owls",
               "Lost Page": "Not In The KB"}
  aliases = baselines.TitleAliases(kb, redirects)
  assert len(aliases) == 5 + 2
  # A title names its entity: 6 anchors + 1 title for Port Alder, 2 anchors for the ship.
  assert baselines.at_prior_tr(table, aliases, "port alder") == [
      ("Port Alder", 7 / 9), ("Port Alder (ship)", 2 / 9)]
  # Titles and redirects reach entities no anchor names, case- and accent-insensitively.
  assert baselines.at_prior_tr(table, aliases, "Owls (Band)") == [("The Silver Owls", 1.0)]
  assert baselines.at_prior_tr(table, aliases, "Jürgen Klinsmann") == [
      ("Jurgen klinsmann", 1.0)]
  assert baselines.at_prior_tr(table, aliases, "Lost Page") == []
  assert baselines.at_prior_tr(table, aliases, "silver owls") == [("The Silver Owls", 1.0)]


def test_at_ext_uses_unigram_and_bigram_aliases_when_full_mention_misses(table):
  # 'port alder harbor' is unknown. Its n-grams: port, alder, harbor, 'port alder',
  # 'alder harbor'. Summed counts: Port Alder 1 + 6 = 7, Alder 5, Port (wine) 4,
  # Port Alder (ship) 2; total 18.
  assert table.at_ext("Port Alder harbor") == [
      ("Port Alder", 7 / 18), ("Alder", 5 / 18), ("Port (wine)", 4 / 18),
      ("Port Alder (ship)", 2 / 18)]
  assert table.at_prior("Port Alder harbor") == []


def test_at_ext_puts_full_mention_candidates_first(table):
  # Tier 1: 'port alder' itself. Tier 2: unigrams port (Port (wine) 4) and alder (Alder 5;
  # Port Alder already listed); the bigram equals the full key and is not counted again.
  assert table.at_ext("Port Alder") == [
      ("Port Alder", 0.75), ("Port Alder (ship)", 0.25), ("Alder", 5 / 9),
      ("Port (wine)", 4 / 9)]
  assert [t for t, _ in table.at_ext("Port Alder", k=3)] == [
      "Port Alder", "Port Alder (ship)", "Alder"]
  assert table.at_ext("Port Alder", k=0) == []
  assert table.at_ext("nothing here") == []


def test_alias_table_bad_lines_name_file_and_line(tmp_path):
  path = tmp_path / "alias_counts.tsv"
  path.write_text("ore\tOre River\t2\nore\tOre River\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"alias_counts.tsv:2: expected 3"):
    baselines.AliasTable.from_tsv(str(path))
  path.write_text("ore\tOre River\tmany\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"alias_counts.tsv:1: count 'many'"):
    baselines.AliasTable.from_tsv(str(path))
  path.write_text("ore\tOre River\t-1\n", encoding="utf-8")
  with pytest.raises(ValueError, match="negative"):
    baselines.AliasTable.from_tsv(str(path))
  redirects = tmp_path / "redirects.tsv"
  redirects.write_text("A\tB\tC\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"redirects.tsv:1"):
    baselines.load_redirects(str(redirects))


def test_looping_redirects_are_skipped(tmp_path):
  counts = tmp_path / "alias_counts.tsv"
  counts.write_text("loop\tLoop A\t3\nore\tOre River\t1\n", encoding="utf-8")
  redirects = tmp_path / "redirects.tsv"
  redirects.write_text("Loop A\tLoop B\nLoop B\tLoop A\n", encoding="utf-8")
  table = baselines.AliasTable.from_tsv(str(counts), str(redirects))
  assert table.at_prior("loop") == []
  assert table.at_prior("ore") == [("Ore River", 1.0)]


def test_bm25_bugbank_ev03_term_in_half_the_docs_scores_positive():
  index = baselines.BM25Index(["Ore River drains farms", "Port Alder harbor town"])
  # Lucene BM25: idf = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; tf part = 1 / (1 + 1.5) since
  # both titles have the average length 4.
  expected = 0.4 * math.log(2)
  scores = index.scores("harbor")
  assert scores[0] == 0.0
  assert scores[1] == pytest.approx(expected, rel=1e-5)
  assert index.search("harbor") == [("Port Alder harbor town", pytest.approx(expected, rel=1e-5))]


def test_bm25_all_empty_corpus_returns_nothing():
  index = baselines.BM25Index(["", ""])
  assert index.search("harbor") == []
  assert len(index) == 1  # Duplicate titles are indexed once.
  np.testing.assert_array_equal(index.scores("harbor"), [0.0])
  np.testing.assert_array_equal(baselines.BM25Index(["", "?"]).scores("harbor"), [0.0, 0.0])
  assert baselines.BM25Index([]).search("harbor") == []


def test_bm25_single_entity_and_term_in_every_title():
  one = baselines.BM25Index(["Port Alder"])
  # idf = ln(1 + 0.5 / 1.5) = ln(4/3) > 0.
  assert one.search("port") == [("Port Alder", pytest.approx(0.4 * math.log(4 / 3), rel=1e-5))]
  every = baselines.BM25Index(["Port Cove", "Port Alder", "Port Bell"])
  results = every.search("port")
  assert [t for t, _ in results] == ["Port Alder", "Port Bell", "Port Cove"]  # Ties by title.
  assert all(s > 0 for _, s in results)
  assert [t for t, _ in every.search("port", k=2)] == ["Port Alder", "Port Bell"]
  assert every.search("PORT bell")[0][0] == "Port Bell"


def test_bm25_empty_or_unknown_query():
  index = baselines.BM25Index(["Port Alder", "Ore River"])
  assert index.search("") == []
  assert index.search("  ?! ") == []
  assert index.search("zebra") == []
  assert index.search("port", k=0) == []


def test_bm25_over_titles_and_redirect_titles_returns_each_entity_once():
  index = baselines.BM25Index(["Persian language", "Farsi district", "Port Alder"],
                              aliases={"Farsi": "Persian language",
                                       "Farsi tongue": "Persian language",
                                       "Elsewhere": "Not in the KB"})
  assert len(index) == 5  # 3 titles + 2 redirect titles of KB entities
  results = index.search("farsi")
  # 'Farsi' (1 token) outscores 'Farsi district' and 'Farsi tongue' (2 tokens each): its
  # entity comes first, once, then the district.
  assert [t for t, _ in results] == ["Persian language", "Farsi district"]
  assert index.search("harbor") == []


def test_bm25_tokenize():
  assert baselines.tokenize("Port Alder (harbor), U.S.") == ["port", "alder", "harbor", "u", "s"]


def test_bm25_tokenize_keeps_indic_words_whole_and_splits_japanese():
  # Real titles and anchors of ../shared/data/otherwiki (bn, mr, ja): \w+ alone cut Indic words
  # at every vowel sign and virama ('দাবা' -> 'দ', 'ব') and kept a Japanese line as one token.
  assert baselines.tokenize("বাংলাদেশ জাতীয়তাবাদী দল") == ["বাংলাদেশ", "জাতীয়তাবাদী", "দল"]
  assert baselines.tokenize("पु.ल. देशपांडे") == ["पु", "ल", "देशपांडे"]
  assert baselines.tokenize("日本プロサッカーリーグ") == ["日", "本", "プロサッカーリーグ"]
  assert baselines.tokenize("日本の地理") == ["日", "本", "の", "地", "理"]


def test_bm25_on_bengali_and_japanese_titles():
  bengali = baselines.BM25Index(["বাংলাদেশ", "বাংলাদেশ জাতীয়তাবাদী দল", "দাবা", "বাংলাদেশী"])
  # Single consonants matched every title with a 'দ' or a 'ব'; whole words match one.
  assert [t for t, _ in bengali.search("দাবা")] == ["দাবা"]
  assert [t for t, _ in bengali.search("বাংলাদেশ")][:2] == ["বাংলাদেশ", "বাংলাদেশ জাতীয়তাবাদী দল"]
  japanese = baselines.BM25Index(["日本", "日本経済新聞", "日本語", "日本の地理", "言語"])
  assert japanese.search("日本経済")[0][0] == "日本経済新聞"
  assert japanese.search("日本語")[0][0] == "日本語"
