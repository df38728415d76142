"""Title normalization, redirect resolution, alias keys and the four mention features."""

import pytest

from dense_entity.kb import schema
from dense_entity.kb.mention_features import mention_features, sentence_spans
from dense_entity.kb import titles
from dense_entity.kb.titles import alias_key, normalize_title, resolve_redirect


@pytest.mark.parametrize("raw,expected", [
    ("the_Silver Owls", "The Silver Owls"),
    ("  Silver   Owls ", "Silver Owls"),
    ("SILVER OWLS", "SILVER OWLS"),  # only the first character is case-insensitive
    ("Kestrel%27s_Rock", "Kestrel's Rock"),
    ("ümlaut Park", "Ümlaut Park"),
    ("Norland Navy#Ships", "Norland Navy"),
    ("#Geography", ""),
    ("Lake&nbsp;Ore", "Lake Ore"),
])
def test_normalize_title_like_mediawiki(raw, expected):
  assert normalize_title(raw) == expected
  assert normalize_title(normalize_title(raw)) == normalize_title(raw)


def test_resolve_redirect_follows_chains_and_stops_on_loops():
  redirects = {"Owls (band)": "Silver Owls", "Silver Owls": "The Silver Owls",
               "Loop A": "Loop B", "Loop B": "Loop A"}
  assert resolve_redirect("Owls (band)", redirects) == "The Silver Owls"
  assert resolve_redirect("Port Alder", redirects) == "Port Alder"
  assert resolve_redirect("Loop A", redirects) is None
  chain = {f"T{i}": f"T{i + 1}" for i in range(20)}
  assert resolve_redirect("T0", chain, max_hops=5) is None


def test_alias_key():
  assert alias_key("Lake\u00a0Ore") == "lake ore"
  assert alias_key("  LAKE   Ore ") == "lake ore"


TEXT = ("He said so.\n"
        "Costa has not played since being struck by the AC Milan forward. He rests.")


def test_mention_features_span_contexts_and_masked_sentence():
  start = TEXT.index("AC Milan")
  f = mention_features(TEXT, start, start + len("AC Milan"))
  assert f == {
      schema.MENTION_SPAN: "AC Milan",
      schema.MENTION_LEFT: "since being struck by the",
      schema.MENTION_RIGHT: "forward. He rests.",
      schema.MENTION_SENTENCE: "Costa has not played since being struck by the [MASK] forward.",
  }
  start = TEXT.index("Costa")
  f = mention_features(TEXT, start, start + 5)
  # Contexts stop at the paragraph (line) boundary.
  assert f[schema.MENTION_LEFT] == ""
  assert f[schema.MENTION_RIGHT] == "has not played since being"
  assert f[schema.MENTION_SENTENCE].startswith("[MASK] has not played")


def test_mention_features_reject_bad_spans():
  with pytest.raises(ValueError, match="outside"):
    mention_features("short", 3, 10)
  with pytest.raises(ValueError):
    mention_features("short", 2, 2)


def test_sentence_spans_never_cross_lines():
  spans = sentence_spans(TEXT)
  assert [TEXT[s:e] for s, e in spans] == [
      "He said so.", "Costa has not played since being struck by the AC Milan forward.",
      "He rests."]


# ------------------------------------------------------------------------ matching key


@pytest.mark.parametrize("a, b", [
    ("Jürgen Klinsmann", "jurgen_klinsmann"),             # accents and case, folded title list
    ("Mexican–American War", "mexican-american_war"),     # en dash
    ("Côte d’Ivoire", "cote_d'ivoire"),                   # typographic apostrophe
    ("Søren Kierkegaard", "soren_kierkegaard"),           # letters without a decomposition
    ("Straße", "strasse"),
    ("Georgia (U.S. state)", "georgia_(u.s._state)"),
    ("Lake\u00a0Ore", " lake  ore "),
])
def test_titles_spelled_differently_by_kb_sources_share_a_key(a, b):
  assert titles.match_key(a) == titles.match_key(b)


def test_key_keeps_other_scripts_apart_and_is_idempotent():
  # Dropping the breve of 'й' would merge two Cyrillic letters ('и' and 'й').
  assert titles.match_key("Йошкар-Ола") == "йошкар-ола" != titles.match_key("Иошкар-Ола")
  assert titles.match_key("東京都") == "東京都"
  for t in ("Jürgen Klinsmann", "Київ", "AC/DC", ""):
    assert titles.match_key(titles.match_key(t)) == titles.match_key(t)
  assert titles.match_key("  _ ") == ""


def test_title_resolver_finds_kb_entities_by_redirect_case_and_accents():
  kb = {"Jurgen klinsmann", "Persian language", "AIDS", "Aids (film)", "Netherlands"}
  redirects = {"Farsi": "Persian language", "The netherlands": "Netherlands"}
  resolve = titles.TitleResolver(kb, redirects)
  assert resolve("Jürgen_Klinsmann") == "Jurgen klinsmann"  # key of a folded KB title
  assert resolve("farsi") == "Persian language"  # redirect, first letter normalized
  assert resolve("FARSI") == "Persian language"  # redirect found by its key
  assert resolve("The Netherlands") == "Netherlands"
  assert resolve("AIDS") == "AIDS" and resolve("Aids") == "AIDS"
  assert resolve("Aids (film)") == "Aids (film)"  # an exact KB title wins over its key
  assert resolve("Atlantis") == "Atlantis"  # not in the KB: its normalized form
  assert resolve("#Top") is None
