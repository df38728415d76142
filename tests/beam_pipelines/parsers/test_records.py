"""Tests of beam_pipelines.parsers.records: the records encoded without protos are the
protos' deterministic serialization (issue 17, item 1)."""

import tensorflow as tf

from beam_pipelines.parsers import records
from dense_entity.kb import schema

_ENTITIES = [
    records.Entity("A", "", (), (), ()),
    records.Entity("Jürgen Klinsmann", "Jürgen Klinsmann is a footballer. " * 600,
                   ("Players", "Ünï", ""), ("Klinsi",), ("page", "link_target", "title_list")),
]
_MENTIONS = [
    ("1:0", "Source page", "Klinsmann", "left", "right", "x [MASK] y", "prose"),
    ("7:123", "Søurce", "", "", "ü" * 200, "[MASK]", "table"),
]


def test_the_fast_encoders_are_in_use():
  assert records.FAST_ENCODERS


def test_entity_record_is_the_examples_bytes():
  for entity in _ENTITIES:
    assert records.entity_record(entity) == records.entity_example(entity).SerializeToString(
        deterministic=True)
    # The fallback (protos) gives the same bytes.
    assert records._proto_entity_record(entity) == records.entity_record(entity)  # pylint: disable=protected-access


def test_mention_record_from_payload_is_the_examples_bytes():
  for entity in _ENTITIES:
    part = records.entity_features_part(entity)
    assert part == records._proto_entity_features_part(entity)  # pylint: disable=protected-access
    for mention in _MENTIONS:
      payload = records.mention_payload(mention)
      assert payload[:3] == mention[:3]
      assert payload[3] == records._proto_mention_features_part(mention)  # pylint: disable=protected-access
      record = records.mention_record(payload, part)
      assert record == records.mention_example(mention, entity).SerializeToString(
          deterministic=True)
      parsed = tf.train.Example.FromString(record).features.feature
      assert parsed[schema.MENTION_SPAN].bytes_list.value == [mention[2].encode("utf-8")]
      assert list(parsed[schema.ENTITY_CATEGORIES].bytes_list.value) == [
          c.encode("utf-8") for c in entity.categories]
    assert records.mention_records([records.mention_payload(m) for m in _MENTIONS], entity) == [
        records.mention_example(m, entity).SerializeToString(deterministic=True)
        for m in _MENTIONS]
