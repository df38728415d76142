"""GloVe reading and the entity-text document frequencies behind the lexical channel's IDF."""

import bz2

import numpy as np
import pytest
import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import featurizer
from dense_entity.training import initialization
from tests import testutil


def test_read_glove_rejects_ragged_lines(tmp_path):
  path = tmp_path / "glove.txt"
  path.write_text("the 0.1 0.2\nriver 0.3\n")
  with pytest.raises(ValueError, match="glove.txt:2"):
    initialization.read_glove(str(path))
  path.write_text("the 0.1 0.2\nriver 0.3 0.4\nthe 9 9\n")
  words, vectors = initialization.read_glove(str(path))
  assert words == ["the", "river"] and vectors.shape == (2, 2)


def test_read_glove_takes_a_word2vec_header_and_counts_values_not_fields(tmp_path):
  path = tmp_path / "vectors.txt"
  path.write_text("2 3\nthe 0.1 0.2 0.3\nriver 0.4 0.5 0.6\n")  # word2vec text format
  words, vectors = initialization.read_glove(str(path))
  assert words == ["the", "river"] and vectors.shape == (2, 3)
  path.write_text("2 3\nthe 0.1 0.2\n")  # the header says 3 values
  with pytest.raises(ValueError, match="vectors.txt:2: expected a word and 3 values, got a word "
                                       "and 2 values"):
    initialization.read_glove(str(path))
  # Latin-1, not UTF-8, far into the file: the line is the one that holds the byte.
  path.write_bytes(b"the 0.1 0.2\n" * 3000 + b"r\xe9ve 0.3 0.4\n")
  with pytest.raises(ValueError, match=r"vectors.txt:3001: not UTF-8"):
    initialization.read_glove(str(path))
  path.write_text("the 0.1 0.2\nriver 0.3 abc\n")
  with pytest.raises(ValueError, match=r"vectors.txt:2: a value of 'river' is not a number"):
    initialization.read_glove(str(path))
  bz2_path = tmp_path / "vectors.txt.bz2"
  bz2_path.write_bytes(bz2.compress(b"the 0.1 0.2\nriver 0.3 0.4\n"))
  words, vectors = initialization.read_glove(str(bz2_path))
  assert words == ["the", "river"] and vectors.shape == (2, 2)


def test_document_frequencies_count_each_entity_once_per_word(tmp_path):
  extract = str(tmp_path / "extract")
  titles = testutil.write_tiny_extraction(extract)
  # Vocabulary rows 0-3 are these words, so no hash bucket collision can change their counts.
  text_featurizer = featurizer.TextFeaturizer(num_buckets=64,
                                              vocabulary=["norland", "river", "zug", "fish"])
  df, num_entities = initialization.document_frequencies(
      text_featurizer, records.record_files(extract, schema.ENTITIES_PREFIX), batch_size=4)
  assert num_entities == len(titles) == 6  # every entity has a title, even without a text
  assert df.shape == (4 + 64,) and df.dtype == np.int64
  # 'norland': in Ore River's text and twice in Norland's title + text (counted once);
  # 'river': three times in Ore River's title + text; 'zug': Zug; 'fish': only in a mention.
  assert df[:4].tolist() == [2, 1, 1, 0]
  assert df.sum() == sum(
      len(set(text_featurizer(tf.constant([t]))[0].numpy()[0]))
      for t in ["Ore River The Ore River is a river in Norland.",
                "Port Alder Port Alder is a harbor town.", "Birch Cove ", "Lake Ore ",
                "Norland Norland is a country.", "Zug Zug is a town in Switzerland."])


def test_name_frequencies_count_title_trigrams_once_per_entity(tmp_path):
  testutil.write_tiny_extraction(str(tmp_path))
  f = featurizer.TextFeaturizer(1 << 16)
  counts = initialization.kb_document_frequencies(
      f, records.record_files(str(tmp_path), schema.ENTITIES_PREFIX), names=True)
  df, n = counts["names"]
  assert n == 6  # the six entity titles
  row = lambda gram: int(f.char_ngram_ids(featurizer.tokenize(tf.constant([gram])))[0][1])
  # 'ore' is a trigram of 'Ore River' and of 'Lake Ore' (once each, however often).
  assert df[row("ore")] == 2
  context_df, context_n = initialization.document_frequencies(
      f, records.record_files(str(tmp_path), schema.ENTITIES_PREFIX))
  np.testing.assert_array_equal(counts["context"][0], context_df)
  assert counts["context"][1] == context_n
