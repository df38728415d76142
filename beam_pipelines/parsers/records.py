"""The records the extraction passes between its steps and writes, as tf.train.Example bytes.

Between steps, mentions and articles are plain tuples (they encode fast with Beam's default
coder) and entities a frozen dataclass. The records written to the TFRecord files (features
named in dense_entity.kb.schema) are the deterministic serialization of tf.train.Examples,
encoded here directly in the protobuf wire format (a tf.train.Features is its map entries in
key order, each entry written alone), without building protos and without TensorFlow: building
protos was a tenth of the pipeline, and importing TensorFlow cost every Beam worker process
about 3 s (issue 17, item 1). A mention carries its own features already encoded
(MentionPayload, from mention_payload) from the page that found it to its record, which
prepends its entity's encoded features (entity_features_part, once per entity: every entity
feature sorts before every mention feature). tests/beam_pipelines/parsers/test_records.py
checks every encoder against tf.train.Example's own serialization.
"""

import dataclasses
import functools
from typing import Iterable, List, Sequence, Tuple

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


# ---------------------------------------------------------------------------------------------
# The records as bytes (protobuf wire format), without protos
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


# The varints of 0 .. 2**14 - 1 (one or two bytes), made once: a mention record's length, a
# field's of up to 16 KB (the bytearray loop below took 1.1 us a record, issue 17).
_SMALL_VARINTS = [bytes((n,)) for n in range(0x80)] + [
    bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x80, 0x4000)]


def _varint(n: int) -> bytes:
  """Protobuf base-128 varint of n >= 0 (ValueError for a negative n)."""
  if 0 <= n < 0x4000:
    return _SMALL_VARINTS[n]
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


@functools.lru_cache(maxsize=4096)
def _frequent_entry(key: str, values: Tuple[str, ...]) -> bytes:
  """_entry of values that most entities share (no categories, no aliases, no text, the few
  combinations of sources), made once: most of a KB of all titles is title-only entries."""
  return _entry(_KEY_FIELDS[key], values)


def _one_value_entry_head(prefix: bytes, n: int) -> bytes:
  """The bytes of _entry(key, (value,)) before the value, for a value of n bytes: the entry's
  field header, the key field and the Feature's field header (`prefix`), the Feature's length,
  its bytes_list's field header and the value's."""
  bytes_list = 1 + len(_varint(n)) + n
  feature = 1 + len(_varint(bytes_list)) + bytes_list
  entry = len(prefix) + len(_varint(feature)) + feature
  return (b"\n" + _varint(entry) + prefix + _varint(feature) + b"\n" + _varint(bytes_list)
          + b"\n" + _varint(n))


# Values up to this many bytes take their entry's head from a table (_HEADS).
_HEAD_TABLE_BYTES = 1024
# Key -> (the heads of its one-value entries by value length, its prefix), for the features
# that always hold one value: a mention's own, and an entity's title and text.
_HEADS = {key: ([_one_value_entry_head(_KEY_FIELDS[key] + b"\x12", n)
                 for n in range(_HEAD_TABLE_BYTES)], _KEY_FIELDS[key] + b"\x12")
          for key in _MENTION_OWN_KEYS + [schema.ENTITY_TITLE, schema.ENTITY_TEXT]}


def _one_value_entry(key: str, value: str) -> bytes:
  """_entry(_KEY_FIELDS[key], (value,)), its head from _HEADS."""
  data = value.encode("utf-8")
  n = len(data)
  heads, prefix = _HEADS[key]
  return (heads[n] if n < _HEAD_TABLE_BYTES else _one_value_entry_head(prefix, n)) + data


_ALIASES, _CATEGORIES, _SOURCE, _TEXT, _TITLE = _ENTITY_RECORD_KEYS
assert (_ALIASES, _CATEGORIES, _SOURCE, _TEXT, _TITLE) == (
    schema.ENTITY_ALIASES, schema.ENTITY_CATEGORIES, schema.ENTITY_SOURCE, schema.ENTITY_TEXT,
    schema.ENTITY_TITLE)
assert _MENTION_ENTITY_KEYS == [_ALIASES, _CATEGORIES, _TEXT, _TITLE]


def _entity_entries(entity: Entity) -> Tuple[bytes, bytes, bytes, bytes]:
  """The map entries of an entity's aliases, categories, text and title (key order)."""
  aliases, categories, text = entity.aliases, entity.categories, entity.text
  return (
      _entry(_KEY_FIELDS[_ALIASES], aliases) if aliases else _frequent_entry(_ALIASES, ()),
      (_entry(_KEY_FIELDS[_CATEGORIES], categories) if categories
       else _frequent_entry(_CATEGORIES, ())),
      _one_value_entry(_TEXT, text) if text else _frequent_entry(_TEXT, ("",)),
      _one_value_entry(_TITLE, entity.title))


# The entries of an entity with no aliases, no categories and no text (most entities: those
# only links name), before its title's: aliases, categories and text, for
# entity_features_part, and by sources aliases, categories, source and text (_bare_prefix),
# for entity_record.
_BARE_PART_PREFIX = b"".join((_frequent_entry(_ALIASES, ()), _frequent_entry(_CATEGORIES, ()),
                              _frequent_entry(_TEXT, ("",))))


@functools.lru_cache(maxsize=64)
def _bare_prefix(sources: Tuple[str, ...]) -> bytes:
  return b"".join((_frequent_entry(_ALIASES, ()), _frequent_entry(_CATEGORIES, ()),
                   _frequent_entry(_SOURCE, sources), _frequent_entry(_TEXT, ("",))))


def entity_record(entity: Entity) -> bytes:
  """The entity record's bytes: a tf.train.Example of the schema.ENTITY_* features (title,
  text, categories, aliases, source), serialized deterministically (entries in key order:
  the source's between the categories' and the text's). An entity with no aliases,
  categories or text (most: those only links name) is its title's entry after a prefix made
  once per sources (issue 17: 28k of the 7 English dumps' entities)."""
  if not (entity.aliases or entity.categories or entity.text):
    return _field(_bare_prefix(tuple(entity.sources)) + _one_value_entry(_TITLE, entity.title))
  aliases, categories, text, title = _entity_entries(entity)
  return _field(b"".join((aliases, categories, _frequent_entry(_SOURCE, tuple(entity.sources)),
                          text, title)))


def entity_features_part(entity: Entity) -> bytes:
  """The encoded entity features of a mention record (its map entries, in key order: title,
  text, categories, aliases; the same for all the entity's mentions)."""
  if not (entity.aliases or entity.categories or entity.text):
    return _BARE_PART_PREFIX + _one_value_entry(_TITLE, entity.title)
  return b"".join(_entity_entries(entity))


# (key field + the Feature's field header, index in a MentionTuple) of each of a mention's own
# features, in key order; and (its heads, prefix, index), for mention_features_part.
_MENTION_TUPLE_FIELDS = (schema.MENTION_ID, schema.SOURCE_PAGE, schema.MENTION_SPAN,
                         schema.MENTION_LEFT, schema.MENTION_RIGHT, schema.MENTION_SENTENCE,
                         schema.LINK_SOURCE)
_MENTION_OWN_ENTRIES = tuple((_KEY_FIELDS[k] + b"\x12", _MENTION_TUPLE_FIELDS.index(k))
                             for k in _MENTION_OWN_KEYS)
_MENTION_OWN_HEADS = tuple((_HEADS[k][0], prefix, index)
                           for k, (prefix, index) in zip(_MENTION_OWN_KEYS, _MENTION_OWN_ENTRIES))


def mention_features_part(mention: MentionTuple) -> bytes:
  """The encoded features of a mention's own (its map entries, in key order): span, contexts,
  sentence, source page, mention id, link source (_entry with one value each; it runs once
  per link, so each entry's head comes from a table by the value's length, issue 17)."""
  parts = []
  append = parts.append
  for heads, prefix, index in _MENTION_OWN_HEADS:
    value = mention[index].encode("utf-8")
    n = len(value)
    append(heads[n] if n < _HEAD_TABLE_BYTES else _one_value_entry_head(prefix, n))
    append(value)
  return b"".join(parts)


def mention_payload(mention: MentionTuple) -> MentionPayload:
  """MentionTuple -> (mention_id, source_page, span, mention_features_part(mention))."""
  return mention[0], mention[1], mention[2], mention_features_part(mention)


def mention_record(payload: MentionPayload, entity_part: bytes) -> bytes:
  """The mention record's bytes (a tf.train.Example: the mention's own features and its gold
  entity's title, text, categories and aliases, serialized deterministically) from the
  mention's payload and its entity's entity_features_part."""
  own = payload[3]
  return b"".join((b"\n", _varint(len(entity_part) + len(own)), entity_part, own))  # one copy


def mention_records(payloads: Iterable[MentionPayload], entity: Entity) -> List[bytes]:
  """mention_record of each payload, all with gold `entity` (its part encoded once)."""
  return mention_records_with_part(payloads, entity_features_part(entity))


def mention_records_with_part(payloads: Iterable[MentionPayload],
                              entity_part: bytes) -> List[bytes]:
  """mention_record(payload, entity_part) of each payload, in one loop."""
  n, varint = len(entity_part), _varint
  return [b"".join((b"\n", varint(n + len(p[3])), entity_part, p[3])) for p in payloads]
