"""Featurizer: tokens, ids in and out of the graph, degenerate strings, stable hashing."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from dense_entity.modeling import config
from dense_entity.modeling import featurizer
from dense_entity.modeling import models
from dense_entity.kb import schema
from tests import testutil


def _lists(ragged):
  return [[v.decode() if isinstance(v, bytes) else int(v) for v in row]
          for row in ragged.to_list()]


def test_tokenize_words_punctuation_and_mask():
  tokens = featurizer.tokenize(tf.constant(["Port Alder", "AC Milan's [MASK] über-cool",
                                            "", "   "]))
  assert _lists(tokens) == [["port", "alder"],
                            ["ac", "milan", "'", "s", "[mask]", "über", "-", "cool"], [], []]


def test_one_token_and_empty_strings_give_no_bigrams_and_no_nan():
  # A one-token mention has 1 unigram and 0 bigrams; '' and whitespace have no features.
  feat = featurizer.TextFeaturizer(num_buckets=1000)
  unigrams, bigrams = feat(tf.constant(["Zug", "", "   ", "Port Alder"]))
  assert [len(r) for r in _lists(unigrams)] == [1, 0, 0, 2]
  assert [len(r) for r in _lists(bigrams)] == [0, 0, 0, 1]
  tokens = featurizer.bigrams(featurizer.tokenize(tf.constant(["Port Alder"])))
  assert _lists(tokens) == [["port alder"]]
  model = models.DualEncoder(config.get_preset("tiny").model)
  texts = tf.constant(["Zug", "", "   ", "Port Alder"])
  mentions = model.mention_encoder({n: texts for n in schema.MENTION_FEATURES})
  entities = model.entity_encoder({schema.ENTITY_TITLE: texts, schema.ENTITY_TEXT: texts,
                                   schema.ENTITY_CATEGORIES: tf.constant(["", "", "A", "A|B"])})
  for out in (mentions, entities):
    assert out.shape == (4, 8) and out.dtype == tf.float32
    assert np.all(np.isfinite(out.numpy()))


def test_vocabulary_words_get_own_rows_and_others_hash_after_them():
  feat = featurizer.TextFeaturizer(num_buckets=50, vocabulary=["port", "alder"])
  unigrams, bigrams = feat(tf.constant(["Port Alder Zug"]))
  ids = _lists(unigrams)[0]
  assert ids[:2] == [0, 1]
  zug = 2 + int(tf.strings.to_hash_bucket_fast(["zug"], 50)[0])
  assert ids[2] == zug
  assert all(2 <= i < 52 for i in _lists(bigrams)[0])


def test_same_ids_in_and_out_of_tf_function():
  feat = featurizer.TextFeaturizer(num_buckets=1 << 20, vocabulary=["the", "river"])
  texts = tf.constant([row[3] for row in testutil.MENTIONS])
  eager = [t.to_list() for t in feat(texts)]
  graph = [t.to_list() for t in tf.function(feat)(texts)]
  assert eager == graph


_HASH_SCRIPT = """
import json, os, sys
import apache_beam as beam
import tensorflow as tf
from dense_entity.modeling import featurizer
from dense_entity.serving import savedmodel

export_dir, mentions = sys.argv[1], json.loads(sys.argv[2])
texts = mentions["mention_span"] + ["Hello TensorFlow 2.x"]
encoder_path = os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR)


def bucket_ids():  # the documented tf.strings.to_hash_bucket_fast example
  return tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3).numpy().tolist()


def featurizer_ids(f, batch):
  return [ids.to_list() for ids in f(tf.constant(batch))]


out = {"buckets": bucket_ids()}
f = featurizer.TextFeaturizer(num_buckets=1 << 20, vocabulary=["port"])
out["ids"] = featurizer_ids(f, texts)
# As the training input feeds the model: featurized inside a tf.data graph.
graph = next(iter(tf.data.Dataset.from_tensors(tf.constant(texts)).map(f)))
out["graph_ids"] = [ids.to_list() for ids in graph]


class Featurize(beam.DoFn):
  # As a Beam job (the mining round) uses them: the exported encoder loaded in setup.
  def setup(self):
    self.f = featurizer.TextFeaturizer(num_buckets=1 << 20, vocabulary=["port"])
    self.encoder = savedmodel.load_encoder(encoder_path)

  def process(self, batch):
    yield {"buckets": bucket_ids(), "ids": featurizer_ids(self.f, batch),
           "savedmodel": self.encoder(mentions).tolist()}


with beam.Pipeline(runner="FnApiRunner") as p:
  _ = (p | beam.Create([texts]) | beam.ParDo(Featurize())
       | beam.Map(lambda r: print("BEAM " + json.dumps(r))))
print("MAIN " + json.dumps(out))
"""


def test_feature_ids_do_not_depend_on_the_process(tmp_path):
  # Bug bank tf-02: feature ids come from tf.strings.to_hash_bucket_fast, never Python's
  # hash(), so two processes with different PYTHONHASHSEED compute the same ids eagerly, in a
  # tf.data graph (training), inside a Beam DoFn (mining), and through the exported
  # SavedModel, whose encodings also equal this process's model.
  import json  # pylint: disable=g-import-not-at-top
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  tf.keras.utils.set_random_seed(5)
  model = models.DualEncoder(config.get_preset("tiny").model, ["port"])
  export_dir = str(tmp_path / "export")
  savedmodel.export_encoders(model, export_dir)
  rows = testutil.MENTIONS[:3]
  mentions = {name: [row[i] for row in rows] for i, name in enumerate(schema.MENTION_FEATURES)}
  here = model.mention_encoder({n: tf.constant(v) for n, v in mentions.items()}).numpy()
  procs = [subprocess.Popen([sys.executable, "-c", _HASH_SCRIPT, export_dir,
                             json.dumps(mentions)], cwd=testutil.REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONHASHSEED=seed, TF_CPP_MIN_LOG_LEVEL="3"))
           for seed in ("1", "2")]  # two processes at once: the test takes one's time
  results = []
  for proc in procs:
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    results.append({line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
                    for line in stdout.splitlines() if line.startswith(("MAIN ", "BEAM "))})
  first = results[0]["MAIN"]
  assert first["buckets"] == [0, 2, 2]
  texts = tf.constant(mentions[schema.MENTION_SPAN] + ["Hello TensorFlow 2.x"])
  assert [ids.to_list() for ids in featurizer.TextFeaturizer(1 << 20, ["port"])(texts)] == (
      first["ids"])  # and this process (pytest's own hash seed)
  assert first["ids"][0][1][0] == 0  # 'port', a vocabulary word: its own row
  for result in results:
    main, beam = result["MAIN"], result["BEAM"]
    assert main["ids"] == first["ids"] and main["graph_ids"] == first["ids"]
    assert beam["ids"] == first["ids"] and beam["buckets"] == [0, 2, 2]
    np.testing.assert_allclose(beam["savedmodel"], here, atol=1e-5)


def test_category_featurizer_splits_on_separator_and_skips_empty():
  cats = featurizer.CategoryFeaturizer(num_buckets=1000)(tf.constant(["Rivers|Ports", "", "A||"]))
  lengths = [len(r) for r in cats.to_list()]
  assert lengths == [2, 0, 1]
  expected = tf.strings.to_hash_bucket_fast(["Rivers", "Ports"], 1000).numpy().tolist()
  assert cats.to_list()[0] == expected


def test_char_trigrams_of_names_fold_accents_and_mark_word_boundaries():
  f = featurizer.TextFeaturizer(1 << 20)
  tokens = featurizer.tokenize(tf.constant(["Jürgen Zug", "Jurgen zug", "", "a"]))
  ids = _lists(f.char_ngram_ids(tokens))
  # '<jurgen>' has 6 trigrams, '<zug>' 3; accents folded, so both spellings agree.
  assert len(ids[0]) == 9 and ids[0] == ids[1]
  assert ids[2] == [] and len(ids[3]) == 1  # '<a>'
  # The trigram 'zug' and the word 'zug' hash apart (prefixed), within the bucket rows.
  word = _lists(f.unigram_ids(featurizer.tokenize(tf.constant(["zug"]))))[0][0]
  assert word not in ids[0][6:]
  assert all(0 <= i < f.num_rows for i in ids[0])


def test_category_flat_ids_rows_and_counts():
  """Issue 17: the entity tower reads categories flat; the ragged call is built from it."""
  cats = featurizer.CategoryFeaturizer(num_buckets=1000)
  ids, rowids, counts = cats.flat_ids(tf.constant(["Rivers|Ports", "", "A||", "|B"]))
  expected = [int(x) for x in tf.strings.to_hash_bucket_fast(["Rivers", "Ports", "A", "B"], 1000)]
  assert ids.numpy().tolist() == expected
  assert rowids.numpy().tolist() == [0, 0, 2, 3]
  assert counts.numpy().tolist() == [2, 0, 1, 1]
  assert cats(tf.constant(["Rivers|Ports", "", "A||", "|B"])).to_list() == [
      expected[:2], [], expected[2:3], expected[3:]]
