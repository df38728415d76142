"""Shared test helpers: tiny extraction outputs written in the workspace's record format."""

import json
import os

import tensorflow as tf

from dense_entity.kb import schema

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(REPO_ROOT, "..", "shared", "data")


def snapshot(directory, skip_dirs=()):
  """{relative path: bytes} of every file under `directory` (folders named in `skip_dirs`, e.g.
  work in progress, left out): to check that a failed run left a directory byte-identical."""
  out = {}
  for root, dirs, names in os.walk(directory):
    dirs[:] = [d for d in dirs if d not in skip_dirs]
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, directory)] = f.read()
  return out


def shared_data(*parts):
  return os.path.join(SHARED_DATA, *parts)


def _bytes(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))


# (span, left, right, sentence, entity title, entity text, categories)
MENTIONS = [
    ("Ore River", "The", "meets the sea .", "The [MASK] meets the sea.", "Ore River",
     "The Ore River is a river in Norland.", ["Rivers"]),
    ("Port Alder", "A ferry near", "at dusk .", "A ferry near [MASK] at dusk.", "Port Alder",
     "Port Alder is a harbor town.", ["Towns", "Ports"]),
    ("the river", "fish swim in", "every spring", "fish swim in [MASK] every spring",
     "Ore River", "The Ore River is a river in Norland.", ["Rivers"]),
    ("Birch Cove", "sailed to", "in May", "They sailed to [MASK] in May.", "Birch Cove",
     "", []),
    ("Alder", "ships leave", "daily", "ships leave [MASK] daily", "Port Alder",
     "Port Alder is a harbor town.", ["Towns", "Ports"]),
    ("Zug", "", "is small", "[MASK] is small", "Zug", "Zug is a town in Switzerland.",
     ["Towns"]),
    ("Lake Ore", "near", ".", "near [MASK].", "Lake Ore", "", []),
    ("Norland", "", "has rivers", "[MASK] has rivers", "Norland", "Norland is a country.",
     ["Countries"]),
]


def mention_example(row, source_page="Norland", mention_id="1:0", link_source=None):
  span, left, right, sentence, title, text, cats = row
  feats = {
      schema.MENTION_SPAN: _bytes([span]), schema.MENTION_LEFT: _bytes([left]),
      schema.MENTION_RIGHT: _bytes([right]), schema.MENTION_SENTENCE: _bytes([sentence]),
      schema.ENTITY_TITLE: _bytes([title]), schema.ENTITY_TEXT: _bytes([text]),
      schema.ENTITY_CATEGORIES: _bytes(cats), schema.SOURCE_PAGE: _bytes([source_page]),
      schema.MENTION_ID: _bytes([mention_id]),
  }
  if link_source is not None:  # None: a record of an older extraction, without the feature
    feats[schema.LINK_SOURCE] = _bytes([link_source])
  return tf.train.Example(features=tf.train.Features(feature=feats))


def write_tiny_extraction(extract_dir, repeats=4, mentions=None, aliases=None,
                          link_source=None):
  """Writes train/held-out mention shards, an entity shard and a MANIFEST.json.

  `mentions` (default MENTIONS) are rows as in MENTIONS; training holds them `repeats` times,
  the held-out shard once. `aliases` (title -> redirect titles) fills ENTITY_ALIASES (default:
  none). `link_source` (mention index -> schema.LINK_SOURCES value) sets LINK_SOURCE (default:
  no such feature, as in older extractions).
  """
  os.makedirs(extract_dir, exist_ok=True)
  MENTIONS = mentions or globals()["MENTIONS"]  # pylint: disable=invalid-name
  rows = MENTIONS * repeats
  for prefix, part in ((schema.TRAIN_MENTIONS_PREFIX, rows),
                       (schema.HELDOUT_MENTIONS_PREFIX, MENTIONS)):
    with tf.io.TFRecordWriter(os.path.join(extract_dir, f"{prefix}-00000-of-00001.tfrecord")) as w:
      for i, row in enumerate(part):
        w.write(mention_example(row, mention_id=f"1:{i}",
                                link_source=link_source and link_source(i)).SerializeToString())
  entities = {}
  for row in MENTIONS:
    entities[row[4]] = (row[5], row[6])
  with tf.io.TFRecordWriter(os.path.join(
      extract_dir, f"{schema.ENTITIES_PREFIX}-00000-of-00001.tfrecord")) as w:
    for title in sorted(entities):
      text, cats = entities[title]
      feats = {schema.ENTITY_TITLE: _bytes([title]), schema.ENTITY_TEXT: _bytes([text]),
               schema.ENTITY_CATEGORIES: _bytes(cats), schema.ENTITY_ALIASES: _bytes((aliases or {}).get(title, [])),
               schema.ENTITY_SOURCE: _bytes(["page"])}
      w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
  with open(os.path.join(extract_dir, schema.ALIAS_COUNTS_FILE), "w") as f:
    f.write("ore river\tOre River\t3\nalder\tPort Alder\t2\nthe river\tOre River\t1\n")
  with open(os.path.join(extract_dir, schema.REDIRECTS_FILE), "w") as f:
    f.write("Ore Stream\tOre River\n")
  with open(os.path.join(extract_dir, schema.MANIFEST_FILE), "w") as f:
    json.dump({"tiny": True}, f)
  return sorted(entities)


def batch_sources(trainer, batches):
  """The source of each of the first `batches` training batches of a Trainer: the mention id's
  prefix before ':' ('1' for the tiny extraction's mentions, a dataset or split name for
  labeled ones). Asserts that every batch comes whole from one source."""
  iterator = iter(trainer._train_dataset())  # pylint: disable=protected-access
  out = []
  for _ in range(batches):
    ids = next(iterator)[schema.MENTION_ID].numpy()
    kinds = {i.decode("utf-8").split(":")[0] for i in ids}
    assert len(kinds) == 1, kinds
    out.append(kinds.pop())
  return out
