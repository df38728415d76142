"""The records the extraction passes between its steps and writes, as tf.train.Examples.

Between steps, mentions and articles are plain tuples (they encode fast with Beam's default
coder) and entities a frozen dataclass; entity_example and mention_example give the records
written to the TFRecord files (features named in dense_entity.kb.schema).
"""

import dataclasses
from typing import Iterable, Tuple

import tensorflow as tf

from dense_entity.kb import schema

# Mention: (mention_id, source_page, span, left, right, sentence, link_source)
MentionTuple = Tuple[str, str, str, str, str, str, str]
# Article: (page_id, first_paragraph, categories)
ArticleTuple = Tuple[int, str, Tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class Entity:
  """An entity of the knowledge base: its title, text, categories, aliases (redirect titles)
  and where it was found (sources: 'page', 'link_target', 'description')."""
  title: str
  text: str
  categories: Tuple[str, ...]
  aliases: Tuple[str, ...]
  sources: Tuple[str, ...]


def _bytes_feature(values: Iterable[str]) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")
                                                               for v in values]))


def entity_example(entity: Entity) -> tf.train.Example:
  """The entity record (schema.ENTITY_* features)."""
  return tf.train.Example(features=tf.train.Features(feature={
      schema.ENTITY_TITLE: _bytes_feature([entity.title]),
      schema.ENTITY_TEXT: _bytes_feature([entity.text]),
      schema.ENTITY_CATEGORIES: _bytes_feature(entity.categories),
      schema.ENTITY_ALIASES: _bytes_feature(entity.aliases),
      schema.ENTITY_SOURCE: _bytes_feature(entity.sources),
  }))


def mention_example(mention: MentionTuple, entity: Entity) -> tf.train.Example:
  """The mention record: the four mention features, the gold entity's features, ids, and
  where the link was written (schema.LINK_SOURCE)."""
  mention_id, source_page, span, left, right, sentence, link_source = mention
  return tf.train.Example(features=tf.train.Features(feature={
      schema.MENTION_SPAN: _bytes_feature([span]),
      schema.MENTION_LEFT: _bytes_feature([left]),
      schema.MENTION_RIGHT: _bytes_feature([right]),
      schema.MENTION_SENTENCE: _bytes_feature([sentence]),
      schema.ENTITY_TITLE: _bytes_feature([entity.title]),
      schema.ENTITY_TEXT: _bytes_feature([entity.text]),
      schema.ENTITY_CATEGORIES: _bytes_feature(entity.categories),
      schema.ENTITY_ALIASES: _bytes_feature(entity.aliases),
      schema.SOURCE_PAGE: _bytes_feature([source_page]),
      schema.MENTION_ID: _bytes_feature([mention_id]),
      schema.LINK_SOURCE: _bytes_feature([link_source]),
  }))

