"""Tests of beam_pipelines.parsers.mentions: an article's links as mentions with features."""

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
                      "Ore River flows past [MASK].")),
      ("Lake Fen", ("7:1", "Ore River", "the lake", "It ends in", ". Ore creek joins it",
                    "It ends in [MASK].")),
      ("Ore creek", ("7:2", "Ore River", "Ore creek", "ends in the lake.", "joins it.",
                     "[MASK] joins it.")),
  ]


def test_sentences_split_once_give_the_same_features():
  parsed = wikitext.parse_article(
      "No link here. None here either.\nA [[Gull Sea]] line. And [[Gull Point]].\nLast one, "
      "[[Fen]].", "Gulls")
  got = mentions.article_mentions(parsed, 1, "Gulls")
  assert len(got) == len(parsed.links) == 3
  for (target, mention), link in zip(got, parsed.links):
    features = mention_features.mention_features(parsed.text, link.start, link.end)
    assert target == link.target
    assert mention[2:] == (features[schema.MENTION_SPAN], features[schema.MENTION_LEFT],
                           features[schema.MENTION_RIGHT], features[schema.MENTION_SENTENCE])
