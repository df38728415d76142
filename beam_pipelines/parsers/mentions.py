"""Mentions of a rendered article: each link with its four features.

Gillick et al. (2019): a training mention is a Wikipedia anchor link (section 5), described by
the span text, the 5 tokens left and right of it and its sentence with the span masked
(section 4.1; dense_entity.kb.mention_features), here computed over the article's plain text
from beam_pipelines.parsers.wikitext.parse_article. No Beam here.
"""

from typing import List, Sequence, Tuple

from beam_pipelines.parsers import records
from beam_pipelines.parsers import wikitext
from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema


def _sentence_spans_of_mention_lines(text: str,
                                     links: Sequence[wikitext.Link]) -> List[Tuple[int, int]]:
  """mention_features_lib.sentence_spans(text), restricted to the lines holding a link.

  Sentences never cross a line, so the spans of the other lines are never looked up by
  mention_features; skipping them saves most of the sentence splitting on long pages.

  Returns:
    [(start, end)) character offsets into `text`, in text order.
  """
  spans: List[Tuple[int, int]] = []
  done_until = -1  # end of the last line split (links come in text order)
  for link in links:
    if link.start < done_until:
      continue
    line_start = text.rfind("\n", 0, link.start) + 1
    line_end = text.find("\n", link.start)
    if line_end < 0:
      line_end = len(text)
    for start, end in mention_features_lib.sentence_spans(text[line_start:line_end]):
      spans.append((line_start + start, line_start + end))
    done_until = line_end
  return spans


def article_mentions(parsed: wikitext.ParsedArticle, page_id: int,
                     title: str) -> List[Tuple[str, records.MentionTuple]]:
  """The mentions of an article: one per link, with its features (sentence spans split once).

  Args:
    parsed: the article rendered by wikitext.parse_article.
    page_id: the page's id; mention ids are 'PAGE_ID:INDEX', INDEX the link's position in
      `parsed.links`.
    title: the page's normalized title (the mentions' source page).

  Returns:
    [(raw link target, MentionTuple)] in link order; the target is not yet resolved through
    redirects.
  """
  sentences = _sentence_spans_of_mention_lines(parsed.text, parsed.links)
  mentions = []
  for index, link in enumerate(parsed.links):
    features = mention_features_lib.mention_features(parsed.text, link.start, link.end,
                                                     sentences=sentences)
    mentions.append((link.target, (
        f"{page_id}:{index}", title, features[schema.MENTION_SPAN],
        features[schema.MENTION_LEFT], features[schema.MENTION_RIGHT],
        features[schema.MENTION_SENTENCE], link.source)))
  return mentions
