"""Data that initialises a new model's weights before its first step.

- read_glove: pre-trained GloVe vectors (Pennington et al. 2014) for the unigram rows of the
  shared embedding table (GloVe initialisation, paper section 4.1);
- document_frequencies: for each unigram row, the number of entities whose text holds it, from
  which the lexical context-description channel (layers.ContextMatchEncoder, not in the paper)
  takes its IDF weights. The checkpoint keeps those weights, so a resumed run and the export use
  the same ones;
- kb_document_frequencies: the same, and the titles' character-trigram frequencies for the
  name channel, in one pass.
"""

import bz2
import gzip
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from dense_entity.kb import records
from dense_entity.kb import schema
from dense_entity.modeling import featurizer as featurizer_lib


def read_glove(path: str, max_words: int = 0) -> Tuple[List[str], np.ndarray]:
  """Reads a GloVe text file (`word v1 ... vd` per line, plain, .gz or .bz2); a first line of two
  integers (`count dim`, the word2vec text format's header) is read as the header.

  Args:
    path: the file.
    max_words: keep the first `max_words` words (GloVe files are sorted by frequency); 0: all.

  Returns:
    (words, vectors float32 `[words, d]`); repeated words keep their first vector.

  Raises:
    ValueError: naming the file and line when a line has the wrong number of values (counted
      as values, without the word), a value that is not a number, or bytes that are not UTF-8.
  """
  opener = (gzip.open if path.endswith(".gz") else bz2.open if path.endswith(".bz2")
            else open)
  words, vectors, seen, dim = [], [], set(), None
  with opener(path, "rb") as f:
    for line_no, raw in enumerate(f, 1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{line_no}: not UTF-8 text ({e.reason} at byte {e.start} of "
                         "the line)") from e
      parts = line.rstrip("\n").rstrip().split(" ")
      if line_no == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
        dim = int(parts[1])  # word2vec header: vocabulary size, dimension
        continue
      if dim is None:
        dim = len(parts) - 1
      if len(parts) - 1 != dim or dim < 1:
        raise ValueError(f"{path}:{line_no}: expected a word and {dim} values, got a word "
                         f"and {len(parts) - 1} values")
      if parts[0] in seen or not parts[0]:
        continue
      try:
        vector = np.asarray(parts[1:], dtype=np.float32)
      except ValueError as e:
        raise ValueError(f"{path}:{line_no}: a value of {parts[0]!r} is not a number "
                         f"({e})") from e
      seen.add(parts[0])
      words.append(parts[0])
      vectors.append(vector)
      if max_words and len(words) >= max_words:
        break
  if not words:
    raise ValueError(f"{path}: no vectors")
  return words, np.stack(vectors)


def document_frequencies(text_featurizer, entity_files: List[str],
                         batch_size: int = 1024) -> Tuple[np.ndarray, int]:
  """Counts, for each unigram row of the shared table, the entities whose text holds it.

  Args:
    text_featurizer: the model's featurizer.TextFeaturizer (row ids as the model sees them).
    entity_files: entity TFRecord shards (extraction output).
    batch_size: entities featurized per batch.

  Returns:
    (df int64 `[num_rows]`, number of entities counted). An entity's text is its title and
    first paragraph, as the entity tower's lexical channel reads it (models.EntityEncoder).
  """
  return kb_document_frequencies(text_featurizer, entity_files, batch_size)["context"]


def kb_document_frequencies(text_featurizer, entity_files: List[str], batch_size: int = 1024,
                            names: bool = False) -> Dict[str, Tuple[np.ndarray, int]]:
  """Document frequencies for the lexical channels, in one pass over the KB's entities.

  Returns:
    {"context": (df of unigram rows over 'title text', entities with a token)} and, with
    `names`, "names": (df of character-trigram rows over each entity's title and aliases,
    entities with a trigram),
    each df int64 `[num_rows]`, counting an entity once per row.
  """
  rows = text_featurizer.num_rows

  def distinct_rows(ids):
    # One entry per (entity, row) pair, however often the term occurs, and the number of
    # entities with at least one term.
    keys = ids.value_rowids() * rows + ids.flat_values
    return (tf.unique(keys).y % rows,
            tf.math.count_nonzero(ids.row_lengths(), dtype=tf.int64))

  def featurize(batch):
    # Runs in the tf.data graph (parallel map), not eagerly per batch: at 4.5M entities the
    # eager loop took minutes per channel.
    texts = tf.strings.join([batch[schema.ENTITY_TITLE], batch[schema.ENTITY_TEXT]], " ")
    out = {"context": distinct_rows(text_featurizer(texts)[0])}
    if names:
      # The names the name channel reads: title and aliases (models.EntityEncoder).
      names_text = tf.strings.join([batch[schema.ENTITY_TITLE],
                                    featurizer_lib.alias_text(batch[schema.ENTITY_ALIASES])], " ")
      out["names"] = distinct_rows(text_featurizer.char_ngram_ids(
          featurizer_lib.tokenize(names_text)))
    return out

  counts = {key: [np.zeros(rows, np.int64), 0]
            for key in (("context", "names") if names else ("context",))}
  dataset = records.entity_dataset(entity_files, batch_size).map(
      featurize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
  for batch in dataset.as_numpy_iterator():
    for key, (row_ids, with_terms) in batch.items():
      counts[key][0] += np.bincount(row_ids, minlength=rows)
      counts[key][1] += int(with_terms)
  return {key: (df, n) for key, (df, n) in counts.items()}
