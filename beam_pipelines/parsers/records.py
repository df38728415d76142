"""The records the extraction passes between its steps and writes, as tf.train.Examples.

Between steps, mentions and articles are plain tuples (they encode fast with Beam's default
coder) and entities a frozen dataclass; entity_example and mention_example give the records
written to the TFRecord files (features named in dense_entity.kb.schema) as protos.

The extraction writes the same bytes without building protos (issue 17, item 1: building
them was a tenth of the pipeline): entity_record and mention_record encode the
deterministic serialization of those Examples directly (protobuf wire format: a
tf.train.Features is its map entries in key order, each entry written alone), and a mention
carries its own features already encoded (MentionPayload, from mention_payload) from the page
that found it to its record, which prepends its entity's encoded features
(entity_features_part, once per entity: every entity feature sorts before every mention
feature). The encoders are checked against the protos at import; on a mismatch (another
protobuf) they fall back to the protos.
"""

import dataclasses
from typing import Iterable, List, Sequence, Tuple

import tensorflow as tf

from dense_entity.kb import schema

# Mention: (mention_id, source_page, span, left, right, sentence, link_source)
MentionTuple = Tuple[str, str, str, str, str, str, str]
# A mention between the extraction's steps: (mention_id, source_page, span, encoded mention
# features: mention_features_part of its MentionTuple).
MentionPayload = Tuple[str, str, str, bytes]
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



# ---------------------------------------------------------------------------------------------
# The same records as bytes, without protos
# ---------------------------------------------------------------------------------------------

# The features of each record in the order a deterministic serialization writes its map
# entries (sorted keys); every entity feature of a mention record sorts before every mention
# feature (checked below), so a mention record is its entity's part then its own.
_ENTITY_RECORD_KEYS = sorted((schema.ENTITY_TITLE, schema.ENTITY_TEXT,
                              schema.ENTITY_CATEGORIES, schema.ENTITY_ALIASES,
                              schema.ENTITY_SOURCE))
_MENTION_ENTITY_KEYS = sorted((schema.ENTITY_TITLE, schema.ENTITY_TEXT,
                               schema.ENTITY_CATEGORIES, schema.ENTITY_ALIASES))
_MENTION_OWN_KEYS = sorted((schema.MENTION_SPAN, schema.MENTION_LEFT, schema.MENTION_RIGHT,
                            schema.MENTION_SENTENCE, schema.SOURCE_PAGE, schema.MENTION_ID,
                            schema.LINK_SOURCE))
assert max(_MENTION_ENTITY_KEYS) < min(_MENTION_OWN_KEYS)


def _varint(n: int) -> bytes:
  """Protobuf base-128 varint of n >= 0."""
  if n < 0x80:
    return bytes((n,))
  out = bytearray()
  while n >= 0x80:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


def _field(payload: bytes) -> bytes:
  """Field 1, wire type 2 (length-delimited: the only kind these records use)."""
  return b"\n" + _varint(len(payload)) + payload


def _entry(key_field: bytes, values: Sequence[str]) -> bytes:
  """One map entry of tf.train.Features, as a field of Features: key (field 1), value
  (field 2: Feature, its bytes_list (field 1) holding each value (field 1))."""
  bytes_list = b"".join([_field(v.encode("utf-8")) for v in values])
  feature = _field(bytes_list)
  entry = key_field + b"\x12" + _varint(len(feature)) + feature
  return _field(entry)


_KEY_FIELDS = {key: _field(key.encode("utf-8")) for key in
               _ENTITY_RECORD_KEYS + _MENTION_OWN_KEYS}


def _entity_values(entity: Entity):
  return {schema.ENTITY_TITLE: (entity.title,), schema.ENTITY_TEXT: (entity.text,),
          schema.ENTITY_CATEGORIES: entity.categories, schema.ENTITY_ALIASES: entity.aliases,
          schema.ENTITY_SOURCE: entity.sources}


def _fast_entity_record(entity: Entity) -> bytes:
  values = _entity_values(entity)
  return _field(b"".join([_entry(_KEY_FIELDS[k], values[k]) for k in _ENTITY_RECORD_KEYS]))


def _fast_entity_features_part(entity: Entity) -> bytes:
  values = _entity_values(entity)
  return b"".join([_entry(_KEY_FIELDS[k], values[k]) for k in _MENTION_ENTITY_KEYS])


def _fast_mention_features_part(mention: MentionTuple) -> bytes:
  mention_id, source_page, span, left, right, sentence, link_source = mention
  values = {schema.MENTION_SPAN: span, schema.MENTION_LEFT: left,
            schema.MENTION_RIGHT: right, schema.MENTION_SENTENCE: sentence,
            schema.SOURCE_PAGE: source_page, schema.MENTION_ID: mention_id,
            schema.LINK_SOURCE: link_source}
  return b"".join([_entry(_KEY_FIELDS[k], (values[k],)) for k in _MENTION_OWN_KEYS])


def _proto_entity_record(entity: Entity) -> bytes:
  return entity_example(entity).SerializeToString(deterministic=True)


def _proto_entity_features_part(entity: Entity) -> bytes:
  # The Example of the entity's mention features alone, less its two outer headers.
  return _strip_example(tf.train.Example(features=tf.train.Features(feature={
      schema.ENTITY_TITLE: _bytes_feature([entity.title]),
      schema.ENTITY_TEXT: _bytes_feature([entity.text]),
      schema.ENTITY_CATEGORIES: _bytes_feature(entity.categories),
      schema.ENTITY_ALIASES: _bytes_feature(entity.aliases),
  })).SerializeToString(deterministic=True))


def _proto_mention_features_part(mention: MentionTuple) -> bytes:
  mention_id, source_page, span, left, right, sentence, link_source = mention
  return _strip_example(tf.train.Example(features=tf.train.Features(feature={
      schema.MENTION_SPAN: _bytes_feature([span]),
      schema.MENTION_LEFT: _bytes_feature([left]),
      schema.MENTION_RIGHT: _bytes_feature([right]),
      schema.MENTION_SENTENCE: _bytes_feature([sentence]),
      schema.SOURCE_PAGE: _bytes_feature([source_page]),
      schema.MENTION_ID: _bytes_feature([mention_id]),
      schema.LINK_SOURCE: _bytes_feature([link_source]),
  })).SerializeToString(deterministic=True))


def _strip_example(serialized: bytes) -> bytes:
  """An Example's serialization -> its Features' map entries (the two headers removed)."""
  example = tf.train.Example.FromString(serialized)
  return b"".join(tf.train.Features(feature={k: v}).SerializeToString(deterministic=True)
                  for k, v in sorted(example.features.feature.items()))


def _check_fast_encoders() -> bool:
  """Whether the fast encoders give the protos' bytes on entities and mentions with empty,
  non-ASCII, empty-string and long (multi-byte length) values."""
  long_text = "Ünïcode text " * 1400  # lengths over 2**14: 3-byte varints
  entities = [Entity("A", "", (), (), ()),
              Entity("Jürgen Klinsmann", long_text, ("Players", "Ünï"), ("Klinsi", ""),
                     ("page", "link_target")),
              Entity("B" * 200, "x" * 130, ("c",) * 150, (), ("title_list",))]
  mentions = [("1:0", "Src", "", "", "", "[MASK]", "prose"),
              ("12345:67", "Søurce " * 30, "span ü", long_text, "r" * 128, long_text, "table")]
  for entity in entities:
    if _fast_entity_record(entity) != _proto_entity_record(entity):
      return False
    for mention in mentions:
      fast = _field(_fast_entity_features_part(entity) + _fast_mention_features_part(mention))
      if fast != mention_example(mention, entity).SerializeToString(deterministic=True):
        return False
  return True


FAST_ENCODERS = _check_fast_encoders()
if FAST_ENCODERS:
  entity_record = _fast_entity_record
  entity_features_part = _fast_entity_features_part
  mention_features_part = _fast_mention_features_part
else:  # another protobuf version or wire format: the protos (same records, slower)
  entity_record = _proto_entity_record
  entity_features_part = _proto_entity_features_part
  mention_features_part = _proto_mention_features_part
entity_record.__doc__ = ("entity_example(entity), serialized deterministically: the entity "
                         "record's bytes.")
entity_features_part.__doc__ = ("The encoded entity features of a mention record (its map "
                                "entries, in key order; the same for all its mentions).")
mention_features_part.__doc__ = ("The encoded features of a mention's own (its map entries, "
                                 "in key order): span, contexts, sentence, ids, link source.")


def mention_payload(mention: MentionTuple) -> MentionPayload:
  """MentionTuple -> (mention_id, source_page, span, mention_features_part(mention))."""
  return mention[0], mention[1], mention[2], mention_features_part(mention)


def mention_record(payload: MentionPayload, entity_part: bytes) -> bytes:
  """mention_example(mention, entity), serialized deterministically, from the mention's
  payload and its entity's entity_features_part."""
  own = payload[3]
  return b"\n" + _varint(len(entity_part) + len(own)) + entity_part + own


def mention_records(payloads: Iterable[MentionPayload], entity: Entity) -> List[bytes]:
  """mention_record of each payload, all with gold `entity` (its part encoded once)."""
  entity_part = entity_features_part(entity)
  return [mention_record(p, entity_part) for p in payloads]
