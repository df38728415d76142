"""Title normalization, redirect resolution, alias keys and the four mention features."""

import os
import random
import re
import unicodedata

import pytest

from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema
from dense_entity.kb.mention_features import mention_features, sentence_spans
from dense_entity.kb import titles
from dense_entity.kb.titles import alias_key, normalize_title, resolve_redirect
from tests import testutil


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


# -------------------------------------------------- mention features: windows, long texts

def _whole_line_features(text, start, end, sentences, n=5):
  """The features as computed before issue 14 (item 4): every sentence span scanned, the whole
  line left and right of the span tokenized. A reference, quadratic on long pages."""
  token = mention_features_lib._TOKEN  # pylint: disable=protected-access
  line_start = text.rfind("\n", 0, start) + 1
  line_end = text.find("\n", end)
  line_end = len(text) if line_end < 0 else line_end
  sent_start, sent_end = line_start, line_end
  for s, e in sentences:
    if s <= start < e:
      sent_start, sent_end = s, max(e, end)
      break
  starts = [m.start() for m in token.finditer(text[line_start:start])]
  left = text[line_start:start][starts[-n] if len(starts) >= n else starts[0]:] if starts else ""
  ends = [m.end() for m in token.finditer(text[end:line_end])]
  right = text[end:line_end][:ends[min(n, len(ends)) - 1]] if ends else ""
  sentence = text[sent_start:start] + schema.MENTION_MASK + text[end:sent_end]
  return {schema.MENTION_SPAN: " ".join(text[start:end].split()),
          schema.MENTION_LEFT: " ".join(left.split()),
          schema.MENTION_RIGHT: " ".join(right.split()),
          schema.MENTION_SENTENCE: " ".join(sentence.split())}


@pytest.mark.parametrize("window_chars", [1, 7, 64])
def test_bounded_windows_give_the_whole_line_result(monkeypatch, window_chars):
  # Windows far too small for the 5 tokens (1 character), cut inside words and runs of
  # punctuation, and the default: all give what tokenizing the whole line gives.
  monkeypatch.setattr(mention_features_lib, "_WINDOW_CHARS", window_chars)
  text = ("Kestrelwood   (est. 1794) lies east of Port-Alder_Bay... It has 3,200 people!\n"
          "  Ümlaut Park,Lake\u00a0Ore;and the   Fenmoor   hills. \n"
          "x\n"
          "Supercalifragilisticexpialidocious words in a row here, then Gull Point.")
  sentences = sentence_spans(text)
  rng = random.Random(3)
  spans = [(text.index(w), text.index(w) + len(w))
           for w in ("Port-Alder", "Ümlaut Park", "Fenmoor", "Gull Point", "x", "Kestrelwood")]
  spans += [(s, s + rng.randint(1, 12)) for s in rng.sample(range(len(text) - 12), 40)]
  for start, end in spans:
    assert mention_features(text, start, end, sentences=sentences) == _whole_line_features(
        text, start, end, sentences), (start, end, text[start:end])


def test_run_on_sentence_is_capped_at_whole_words_on_each_side():
  # A 'sentence' of 3,000 links and no full stop (a navigation list on one line): each
  # mention keeps at most MAX_SENTENCE_SIDE_CHARS characters of it on each side, whole words.
  names = [f"Station{i:04d}" for i in range(3000)]
  text = " · ".join(names)
  start = text.index("Station1500")
  f = mention_features(text, start, start + len("Station1500"))
  left, right = f[schema.MENTION_SENTENCE].split(schema.MENTION_MASK)
  cap = mention_features_lib.MAX_SENTENCE_SIDE_CHARS
  assert cap - 20 <= len(left) <= cap and cap - 20 <= len(right) <= cap
  assert all(w == "·" or w in names for w in (left + right).split())  # no word cut in two
  assert f[schema.MENTION_LEFT] == "· Station1498 · Station1499 ·"
  assert f[schema.MENTION_RIGHT] == "· Station1501 · Station1502 ·"


def test_context_of_text_without_spaces_is_bounded_not_the_whole_line():
  # A line of Thai letters has no token boundary: the 5 "tokens" left of a mention would be
  # everything before it on the line, repeated for every mention (quadratic in the page).
  cap = mention_features_lib.MAX_CONTEXT_SIDE_CHARS
  run = "".join(chr(0x0E01 + i % 46) for i in range(3 * cap))
  text = run + "กข" + run
  start = len(run)
  f = mention_features(text, start, start + 2)
  assert f[schema.MENTION_SPAN] == "กข"
  assert f[schema.MENTION_LEFT] == run[-cap:]
  assert f[schema.MENTION_RIGHT] == run[:cap]
  # Han ideographs are one token each (issue 15): five of them each side, on a line of any
  # length.
  run = "".join(chr(0x4E00 + i % 2000) for i in range(3 * cap))
  text = run + "項目" + run
  f = mention_features(text, len(run), len(run) + 2)
  assert f[schema.MENTION_SPAN] == "項目"
  assert (f[schema.MENTION_LEFT], f[schema.MENTION_RIGHT]) == (run[-5:], run[:5])
  # Ordinary text is unchanged by the bound: five whole tokens each side.
  g = mention_features("a b c d e f [x] g h i j k l", 12, 15)
  assert (g[schema.MENTION_LEFT], g[schema.MENTION_RIGHT]) == ("b c d e f", "g h i j k")


def test_sentence_offsets_are_blingfires_with_reused_buffers(monkeypatch):
  # The fast sentence split gives blingfire's own offsets, on ASCII and multi-byte lines (one
  # of many sentences with characters of 1 to 4 bytes), a NUL inside a line, and lines longer
  # than the buffers kept per thread; and a line split after a
  # longer one (whose sentences and offsets are still in the kept buffers), or after the kept
  # buffers were filled with newlines and junk offsets, gives the same as a fresh process.
  import ctypes  # pylint: disable=g-import-not-at-top
  import blingfire  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(mention_features_lib, "_KEPT_BUFFER_LINE_BYTES", 300)
  monkeypatch.setattr(mention_features_lib, "_SENTENCE_BUFFERS",
                      mention_features_lib._SentenceBuffers())  # pylint: disable=protected-access
  offsets = mention_features_lib._blingfire_sentence_offsets  # pylint: disable=protected-access
  long_line = " ".join(f"Sentence {i} ends here. Dr. Kestrel met Mr. Gull at 3 p.m." for i in
                       range(40))
  lines = [long_line, "Short. Two.", "Ümlaut Park lies east. Ça va? Oui! Fenmoor hills.",
           long_line[:280], "a\x00b. c d. e", "Nur ein Satz", "  Leading space. Then more.  ",
           "中文句子。第二句。", long_line[:150], "x",
           # Many sentences of 1- to 4-byte characters: offsets mapped stretch by stretch.
           " ".join(f"Το σύνταγμα {i} ισχύει. Ça 🙂 va? Дa! 中文句子。" for i in range(30))]
  buffers = mention_features_lib._SENTENCE_BUFFERS  # pylint: disable=protected-access
  for line in lines + lines[::-1]:
    assert offsets(line) == blingfire.text_to_sentences_and_offsets(line)[1], line[:40]
    if buffers.count > 0:  # leave junk behind for the next line
      ctypes.memset(buffers.text, ord("\n"), buffers.count)
      for array in (buffers.start, buffers.end):
        for i in range(buffers.count):
          array[i] = 7
  assert buffers.count >= 2 * 280  # lines within the bound used the kept buffers
  assert buffers.count < 2 * len(long_line.encode())  # the long one got its own


def _real_titles(n=100_000):
  import gzip  # pylint: disable=g-import-not-at-top
  import itertools  # pylint: disable=g-import-not-at-top
  out = []
  for name in ("enwiki-titles-lowercase.txt.gz", "enwiki-redirects-lowercase.tsv.gz"):
    path = testutil.shared_data("kb", name)
    if os.path.exists(path):
      with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, n):
          out.extend(line.rstrip("\n").split("\t"))
  return out


# ASCII titles the fast paths take, with every ASCII whitespace and control character
# (str.split and the regular expression's \s agree on them: \x1c-\x1f are whitespace to both).
_ASCII_CASES = ["the_Silver Owls", "  a__b  ", "_", "", "x\x1cy\x1d z\x1e\x1f",
                "a\tb\nc\rd\x0be\x0cf", "\x00a\x7f", "1990s", "iPod", "a#b", "#only",
                "50% off", "AT&amp;T", "AT&T", "100%AB", "Kestrel%27s_Rock"]


def test_the_fast_paths_for_ascii_titles_give_what_every_step_gives():
  # normalize_title and match_key take ASCII titles without '%', '&' (and, for match_key,
  # '#') by a shorter way; it must give what the general steps give.
  cases = _ASCII_CASES + [chr(c) + "a b" for c in range(128)] + _real_titles()
  assert len(cases) > 150_000
  for title in cases:
    cut = title.split("#", 1)[0]
    for first_letter in (True, False):
      assert titles.normalize_title(title, first_letter) == titles._normalize_steps(
          cut, first_letter), repr(title)
    assert titles.match_key(title) == titles.fold_text(
        titles._normalize_steps(cut, True)), repr(title)
    nfkc = unicodedata.normalize("NFKC", title).casefold()
    assert alias_key(title) == re.sub(r"\s+", " ", nfkc).strip(), repr(title)


def test_fold_text_folds_each_character_as_fold_char_does():
  """fold_text translates with a table filled by _fold_char (issue 17): the same text as
  folding character by character, in every script, twice (the second time from the table)."""
  texts = ["Jürgen  KLINSMANN", "Ørsted–Straße’s", "Αθήνα; Ελλάδα", "Киев_й", "東京 とうきょう カタカナ",
           "\u00a0Lake\u00a0Ore\u200e", "ＦＵＬＬ　ｗｉｄｔｈ", "Zoë's café (bar) #1 50%", "ǅemal", ""]
  for _ in range(2):
    for text in texts:
      want = titles._WHITESPACE.sub(  # pylint: disable=protected-access
          " ", "".join(titles._fold_char(ch) for ch in text)).strip().casefold()  # pylint: disable=protected-access
      assert titles.fold_text(text) == want, text
  assert titles.fold_text("Jürgen  KLINSMANN") == "jurgen klinsmann"


def test_sentence_of_a_span_start_from_tuple_or_list_spans():
  """The sentence holding a span's start is found by comparing spans as tuples, and spans
  given as lists (not tuples) give the same sentence."""
  spans = [(0, 10), (11, 20), (20, 31), (40, 50)]
  sentence_of = mention_features_lib._sentence_of  # pylint: disable=protected-access
  expected = {0: (0, 10), 9: (0, 10), 10: None, 11: (11, 20), 19: (11, 20), 20: (20, 31),
              30: (20, 31), 31: None, 35: None, 40: (40, 50), 49: (40, 50), 50: None}
  for start, sentence in expected.items():
    assert sentence_of(spans, start) == sentence, start
    as_list = sentence_of([list(s) for s in spans], start)
    assert (None if as_list is None else tuple(as_list)) == sentence, start
  assert sentence_of([], 3) is None
