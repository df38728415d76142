"""Tests of beam_pipelines.parsers.mentions: an article's links as mentions with features."""

import random

from beam_pipelines.parsers import mentions
from beam_pipelines.parsers import wikitext
from dense_entity.kb import mention_features
from dense_entity.kb import schema


def test_one_mention_per_link_with_its_features():
  parsed = wikitext.parse_article(
      "'''Ore River''' flows past [[Port Alder]].\n{{Infobox|x=y}}It ends in [[Lake Fen|the "
      "lake]]. [[Ore creek]] joins it.", "Ore River")
  assert parsed.text == ("Ore River flows past Port Alder.\n"
                         "It ends in the lake. Ore creek joins it.")
  assert mentions.article_mentions(parsed, 7, "Ore River") == [
      ("Port Alder", ("7:0", "Ore River", "Port Alder", "Ore River flows past", ".",
                      "Ore River flows past [MASK].", "prose")),
      ("Lake Fen", ("7:1", "Ore River", "the lake", "It ends in", ". Ore creek joins it",
                    "It ends in [MASK].", "prose")),
      ("Ore creek", ("7:2", "Ore River", "Ore creek", "ends in the lake.", "joins it.",
                     "[MASK] joins it.", "prose")),
  ]


def test_each_mention_carries_where_its_link_was_written():
  parsed = wikitext.parse_article(
      "[[Ore River]] is long.\n{| class=wikitable\n|-\n| [[Port Alder]]\n|}\n"
      "[[File:Ore.jpg|thumb|The [[Fen]] at dawn]]", "Ore")
  got = {mention[2]: mention[6] for _, mention in mentions.article_mentions(parsed, 1, "Ore")}
  assert got == {"Ore River": "prose", "Port Alder": "table", "Fen": "caption"}
  # The values are the ones the record schema documents and training filters on.
  assert {wikitext.SOURCE_PROSE, wikitext.SOURCE_TABLE, wikitext.SOURCE_TEMPLATE,
          wikitext.SOURCE_CAPTION, wikitext.SOURCE_GALLERY} == set(schema.LINK_SOURCES)


def test_sentences_split_once_give_the_same_features():
  parsed = wikitext.parse_article(
      "No link here. None here either.\nA [[Gull Sea]] line. And [[Gull Point]].\nLast one, "
      "[[Fen]].", "Gulls")
  got = mentions.article_mentions(parsed, 1, "Gulls")
  assert len(got) == len(parsed.links) == 3
  for (target, mention), link in zip(got, parsed.links):
    features = mention_features.mention_features(parsed.text, link.start, link.end)
    assert target == link.target
    assert mention[2:6] == (features[schema.MENTION_SPAN], features[schema.MENTION_LEFT],
                           features[schema.MENTION_RIGHT], features[schema.MENTION_SENTENCE])


def _generated_long_article(target_chars: int) -> wikitext.ParsedArticle:
  """A rendered article of about `target_chars` characters: paragraphs of 40 sentences with a
  link each, and every 50th paragraph a run-on list of 400 links on one line (no full stop)."""
  rng = random.Random(0)
  words = "the of river city born album team season league county village station".split()
  lines, links, size, n = [], [], 0, 0
  while size < target_chars:
    line, parts = len(lines), []
    pos = size
    if line % 50 == 49:
      for _ in range(400):
        anchor = f"Stop {n}"
        links.append(wikitext.Link(pos, pos + len(anchor), f"Stop {n}", anchor))
        parts.append(anchor + " · ")
        pos += len(parts[-1])
        n += 1
    else:
      for _ in range(40):
        before = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize()
        anchor = f"Entity {n}"
        start = pos + len(before) + 1
        links.append(wikitext.Link(start, start + len(anchor), anchor, anchor))
        parts.append(f"{before} {anchor} {rng.choice(words)}. ")
        pos += len(parts[-1])
        n += 1
    text = "".join(parts).rstrip()
    lines.append(text)
    size += len(text) + 1
  text = "\n".join(lines)
  return wikitext.ParsedArticle(text=text, links=links, categories=[], first_paragraph=lines[0],
                                dropped={}, prose_end=len(text))


def test_five_megabyte_page_gives_each_mention_its_local_features():
  # Issue 14, item 4: features used to cost time quadratic in the paragraph (every sentence
  # scanned, the whole line tokenized, per mention); a 5 MB page did not finish in 10 minutes.
  # Each mention's features depend only on its own line, so they must equal the features
  # computed on that line alone.
  parsed = _generated_long_article(5_000_000)
  assert len(parsed.text) >= 5_000_000 and len(parsed.links) > 50_000
  got = mentions.article_mentions(parsed, 3, "Long Page")
  assert len(got) == len(parsed.links)
  for index in (0, 1, 39, 40, 1999, 2000, 2199, len(got) // 2, len(got) - 1):
    link = parsed.links[index]
    line_start = parsed.text.rfind("\n", 0, link.start) + 1
    line_end = parsed.text.find("\n", link.end)
    line = parsed.text[line_start:line_end if line_end >= 0 else None]
    alone = mention_features.mention_features(line, link.start - line_start,
                                              link.end - line_start)
    target, mention = got[index]
    assert target == link.target and mention[0] == f"3:{index}"
    assert mention[2:6] == (alone[schema.MENTION_SPAN], alone[schema.MENTION_LEFT],
                           alone[schema.MENTION_RIGHT], alone[schema.MENTION_SENTENCE])
  # The run-on list line: its sentence feature is cut at the cap on both sides.
  _, listed = got[2199]
  assert listed[2] == "Stop 2199"
  assert listed[3] == "2197 · Stop 2198 ·"  # 5 tokens
  assert len(listed[5]) <= 2 * mention_features.MAX_SENTENCE_SIDE_CHARS + len(
      schema.MENTION_MASK) + 2
