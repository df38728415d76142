"""Tests of beam_pipelines.parsers.records: the records encoded without protos (and without
TensorFlow) are tf.train.Example's deterministic serialization (issue 17, item 1)."""

import subprocess
import sys

import pytest
import tensorflow as tf

from beam_pipelines.parsers import records
from dense_entity.kb import schema

_LONG_TEXT = "Ünïcode text " * 1400  # lengths over 2**14: 3-byte varints
_ENTITIES = [
    records.Entity("A", "", (), (), ()),
    records.Entity("Jürgen Klinsmann", "Jürgen Klinsmann is a footballer. " * 600,
                   ("Players", "Ünï", ""), ("Klinsi",), ("page", "link_target", "title_list")),
    records.Entity("B" * 200, "x" * 130, ("c",) * 150, (), ("title_list",)),
    # Title-only entries (the shared empty entries and sources are made once and reused).
    records.Entity("Ünï title", "", (), (), ("title_list",)),
    records.Entity("C", "", (), ("Alias", "Ålias"), ("link_target", "title_list")),
    records.Entity("D", "", ("Cat",), (), ("title_list",)),
    # No aliases, categories or text (entities only links name: their entries before the
    # title's come from a prefix made once).
    records.Entity("Zug", "", (), (), ("link_target",)),
    records.Entity("Ü" * 700, "", (), (), ("link_target", "title_list")),
]
_MENTIONS = [
    ("1:0", "Source page", "Klinsmann", "left", "right", "x [MASK] y", "prose"),
    ("7:123", "Søurce", "", "", "ü" * 200, "[MASK]", "table"),
    ("12345:67", "Søurce " * 30, "span ü", _LONG_TEXT, "r" * 128, _LONG_TEXT, "template"),
]


def _feature(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")
                                                               for v in values]))


def _entity_example(entity: records.Entity) -> tf.train.Example:
  return tf.train.Example(features=tf.train.Features(feature={
      schema.ENTITY_TITLE: _feature([entity.title]),
      schema.ENTITY_TEXT: _feature([entity.text]),
      schema.ENTITY_CATEGORIES: _feature(entity.categories),
      schema.ENTITY_ALIASES: _feature(entity.aliases),
      schema.ENTITY_SOURCE: _feature(entity.sources),
  }))


def _mention_example(mention, entity: records.Entity) -> tf.train.Example:
  mention_id, source_page, span, left, right, sentence, link_source = mention
  return tf.train.Example(features=tf.train.Features(feature={
      schema.MENTION_SPAN: _feature([span]),
      schema.MENTION_LEFT: _feature([left]),
      schema.MENTION_RIGHT: _feature([right]),
      schema.MENTION_SENTENCE: _feature([sentence]),
      schema.ENTITY_TITLE: _feature([entity.title]),
      schema.ENTITY_TEXT: _feature([entity.text]),
      schema.ENTITY_CATEGORIES: _feature(entity.categories),
      schema.ENTITY_ALIASES: _feature(entity.aliases),
      schema.SOURCE_PAGE: _feature([source_page]),
      schema.MENTION_ID: _feature([mention_id]),
      schema.LINK_SOURCE: _feature([link_source]),
  }))


def test_entity_record_is_the_examples_bytes():
  for entity in _ENTITIES + _ENTITIES:  # twice: the cached entries give the same bytes
    assert records.entity_record(entity) == _entity_example(entity).SerializeToString(
        deterministic=True)


def test_mention_record_from_payload_is_the_examples_bytes():
  for entity in _ENTITIES:
    part = records.entity_features_part(entity)
    for mention in _MENTIONS:
      payload = records.mention_payload(mention)
      assert payload[:3] == mention[:3]
      record = records.mention_record(payload, part)
      assert record == _mention_example(mention, entity).SerializeToString(deterministic=True)
      parsed = tf.train.Example.FromString(record).features.feature
      assert parsed[schema.MENTION_SPAN].bytes_list.value == [mention[2].encode("utf-8")]
      assert parsed[schema.MENTION_LEFT].bytes_list.value == [mention[3].encode("utf-8")]
      assert list(parsed[schema.ENTITY_CATEGORIES].bytes_list.value) == [
          c.encode("utf-8") for c in entity.categories]
    assert records.mention_records([records.mention_payload(m) for m in _MENTIONS], entity) == [
        _mention_example(m, entity).SerializeToString(deterministic=True) for m in _MENTIONS]


def test_one_value_entries_at_every_length_where_a_header_grows_are_the_examples_bytes():
  # A mention's own entries, and an entity's title and text, take their heads from a table up
  # to 1,024 bytes and compute them beyond: lengths around each varint step (127/128 of the value, the bytes list, the
  # feature and the entry) and around the table's end give tf.train.Example's bytes.
  entity = _ENTITIES[0]
  part = records.entity_features_part(entity)
  for n in list(range(0, 140)) + list(range(1015, 1035)) + [16377, 16380, 16384, 16390]:
    for text in ("x" * n, ("ü" * n)[:max(0, n // 2)]):
      mention = (text or "0", "Page " + text, text, text, text, text, "prose")
      record = records.mention_record(records.mention_payload(mention), part)
      assert record == _mention_example(mention, entity).SerializeToString(
          deterministic=True), n
      # An entity's title and text take their heads from the same kind of table.
      other = records.Entity(text or "0", text, ("c",), (), ("page",))
      assert records.entity_record(other) == _entity_example(other).SerializeToString(
          deterministic=True), n
      assert records.mention_record(records.mention_payload(mention),
                                    records.entity_features_part(other)) == _mention_example(
                                        mention, other).SerializeToString(deterministic=True)
      bare = records.Entity(text or "0", "", (), (), ("link_target",))
      assert records.entity_record(bare) == _entity_example(bare).SerializeToString(
          deterministic=True), n
      assert records.mention_record(records.mention_payload(mention),
                                    records.entity_features_part(bare)) == _mention_example(
                                        mention, bare).SerializeToString(deterministic=True)


def test_the_extraction_does_not_import_tensorflow():
  # Every Beam worker process imports the pipeline's modules; TensorFlow cost each ~3 s.
  code = ("import sys\n"
          "from beam_pipelines.pipelines import extraction\n"
          "from beam_pipelines import extract_wikipedia\n"
          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow'))\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip() == "[]"


def test_varint_is_protobufs():
  """records._varint (a table up to 2**14, a loop above) gives protobuf's own varint bytes."""
  from google.protobuf.internal import encoder  # pylint: disable=g-import-not-at-top
  values = list(range(0x4000 + 300)) + [2**21 - 1, 2**21, 2**28 + 5, 2**35, 2**63 - 1]
  for n in values:
    assert records._varint(n) == encoder._VarintBytes(n), n  # pylint: disable=protected-access
  with pytest.raises(ValueError):  # not the table's last entry
    records._varint(-1)  # pylint: disable=protected-access
