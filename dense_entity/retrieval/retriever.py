"""Entity retrieval for mentions in text: the library API behind `dense-entity link`.

Gillick et al. (2019), section 5.2: entities are encoded once (WS/index); at query time a
mention is encoded by the exported mention encoder and its nearest entities by cosine are
found in a brute-force or ScaNN index. This module puts the pieces of a workspace together:

  retriever = EntityRetriever.load("WS")                    # or "WS/export"
  retriever.retrieve([("Phoenix once again played a late night show", 0, 7)], k=5)
  # -> [[("Phoenix (band)", 0.91), ("Phoenix, Arizona", 0.87), ...]]
  text, start, end = parse_marked("[[Phoenix]] once again played a late night show")
  retriever.link([(text, start, end)], k=5)
  # -> [LinkResult(entity="Phoenix (band)", probability=0.83, entities=[...])]; entity None
  #    (NIL) when the NIL calibrator (retrieval.nil) puts P(top-1 right) below its threshold

Mentions are (text, span start, span end) tuples, character offsets into `text` with the end
exclusive, or dicts of the four mention features (`schema.MENTION_FEATURES`). Features of a
(text, start, end) mention are built by `mention_features.mention_features`, the function
extraction uses, so a mention is described the same way in training and at query time.

Marked text: `parse_marked` / `parse_all_marked` read mentions written as `[[span]]`. The
marker is not wiki-link syntax: the characters between `[[` and `]]` are the span as written
(`[[A|B]]` is the span 'A|B'). Text cannot contain a literal `[[` or `]]` outside a marker.
"""

import json
import os
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from dense_entity.kb import mention_features as mention_features_lib
from dense_entity.kb import schema
from dense_entity.retrieval import kb_versions
from dense_entity.retrieval import nil as nil_lib

# A (text, span start, span end) mention, or the four mention features.
Mention = Union[Tuple[str, int, int], Mapping[str, str]]

OPEN_MARK = "[["
CLOSE_MARK = "]]"
# An opening marker is the last two brackets of a run ('[[[X]]]' marks 'X' inside literal
# brackets, as MediaWiki renders it); a closing one the first two.
_MARK = re.compile(r"\[\[(?!\[)|\]\]")

DEFAULT_BATCH_SIZE = 256


def parse_all_marked(text: str) -> Tuple[str, List[Tuple[int, int]]]:
  """Removes `[[` / `]]` markers from `text` and returns the marked spans.

  Args:
    text: text with one or more mentions marked, e.g. '[[Phoenix]] played in [[Phoenix]]'.

  Returns:
    (plain text without the markers, [(start, end), ...]) with character offsets into the plain
    text, end exclusive, in order of appearance. Whitespace just inside a marker is left out of
    its span ('[[ Phoenix ]]' gives the span 'Phoenix').

  Raises:
    ValueError: no marked mention, a marker left open or closed without opening, nested markers,
      or a marker holding only whitespace; the message gives the character offset.
  """
  plain, spans = [], []
  pos, length, open_at, open_raw = 0, 0, None, None
  for m in _MARK.finditer(text):
    plain.append(text[pos:m.start()])
    length += m.start() - pos
    pos = m.end()
    if m.group() == OPEN_MARK:
      if open_at is not None:
        raise ValueError(f"nested '[[' at character {m.start()} (a mention is already open at "
                         f"character {open_raw}) in {text!r}")
      open_at, open_raw = length, m.start()
    else:
      if open_at is None:
        raise ValueError(f"']]' at character {m.start()} closes no '[[' in {text!r}")
      span = "".join(plain)[open_at:length]
      start = open_at + (len(span) - len(span.lstrip()))
      end = length - (len(span) - len(span.rstrip()))
      if start >= end:
        raise ValueError(f"empty mention '[[{span}]]' at character {open_raw} in {text!r}")
      spans.append((start, end))
      open_at = None
  if open_at is not None:
    raise ValueError(f"'[[' at character {open_raw} is never closed with ']]' in {text!r}")
  plain.append(text[pos:])
  if not spans:
    raise ValueError(f"no mention marked with [[...]] in {text!r}")
  return "".join(plain), spans


def parse_marked(text: str) -> Tuple[str, int, int]:
  """Parses text with exactly one mention marked as `[[...]]`.

  Example: '[[Phoenix]] once again played a late night show'
  -> ('Phoenix once again played a late night show', 0, 7).

  Args:
    text: text with one marked mention.

  Returns:
    (plain text, span start, span end), character offsets into the plain text, end exclusive;
    the tuple is a mention `EntityRetriever.retrieve` accepts.

  Raises:
    ValueError: no marked mention, more than one (use `parse_all_marked`), or bad markers.
  """
  plain, spans = parse_all_marked(text)
  if len(spans) > 1:
    raise ValueError(f"{len(spans)} mentions are marked in {text!r}; expected exactly one "
                     "(parse_all_marked returns them all)")
  return (plain,) + spans[0]


class InputError(ValueError):
  """A `link` input that cannot be read; the message names its line (or argument)."""


def parse_link_input(line: str, where: str) -> Tuple[str, List[Tuple[int, int]], dict]:
  """Reads one `link` input: marked text or a JSON object.

  Accepted forms:
  - text with mentions marked `[[...]]` (one or more; one result per mention);
  - JSON {"text": "...", "start": S, "end": E} (character offsets, end exclusive);
  - JSON {"text": "... [[mention]] ..."}.
  A JSON object may carry an "id", copied to the output.

  Args:
    line: the input, without its line break.
    where: 'line N' or 'argument N', used in error messages.

  Returns:
    (plain text, [(start, end), ...], extra fields to echo: {"id": ...} or {}).

  Raises:
    InputError: naming `where`, for bytes that are not UTF-8, malformed JSON, missing or
      mistyped fields, a span outside the text or of whitespace only, or no / bad `[[...]]`
      markers.
  """
  try:
    # Python reads undecodable stdin bytes as lone surrogates; they cannot reach the model.
    line.encode("utf-8")
  except UnicodeEncodeError as e:
    raise InputError(f"{where}: not valid UTF-8 (undecodable bytes at characters "
                     f"{e.start}-{e.end - 1})") from e
  extra = {}
  stripped = line.strip()
  if stripped.startswith("{"):
    try:
      record = json.loads(stripped)
    except json.JSONDecodeError as e:
      raise InputError(f"{where}: starts with '{{' but is not valid JSON: {e}") from e
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
      raise InputError(f"{where}: a JSON input needs a string field \"text\"")
    if "id" in record:
      extra["id"] = record["id"]
    text = record["text"]
    has_start, has_end = "start" in record, "end" in record
    if has_start or has_end:
      start, end = record.get("start"), record.get("end")
      if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
        raise InputError(f"{where}: \"start\" and \"end\" must both be integers (character "
                         f"offsets), got {start!r} and {end!r}")
      if not 0 <= start < end <= len(text):
        raise InputError(f"{where}: span [{start}, {end}) is empty or outside a text of "
                         f"{len(text)} characters")
      if not text[start:end].strip():
        raise InputError(f"{where}: span [{start}, {end}) holds only whitespace")
      return text, [(start, end)], extra
  else:
    text = line
  try:
    plain, spans = parse_all_marked(text)
  except ValueError as e:
    raise InputError(f"{where}: {e}") from e
  return plain, spans, extra


def to_features(mentions: Sequence[Mention]) -> List[Dict[str, str]]:
  """Builds the four mention features of each mention (paper section 4.1).

  Args:
    mentions: `[num_mentions]` of (text, start, end) tuples or feature dicts (extra keys are
      ignored; values must be str).

  Returns:
    `[num_mentions]` dicts {schema.MENTION_SPAN, MENTION_LEFT, MENTION_RIGHT,
    MENTION_SENTENCE: str}.

  Raises:
    ValueError / TypeError: naming the mention's position, for a tuple that is not
      (str, int, int), a span outside its text, or a dict missing a feature.
  """
  if isinstance(mentions, (str, bytes)) or isinstance(mentions, Mapping):
    raise TypeError("mentions must be a list of (text, start, end) tuples or feature dicts, "
                    f"got a single {type(mentions).__name__}")
  out = []
  for i, mention in enumerate(mentions):
    if isinstance(mention, Mapping):
      missing = [n for n in schema.MENTION_FEATURES if n not in mention]
      if missing:
        raise ValueError(f"mention {i}: missing features {missing}; a feature dict needs "
                         f"{list(schema.MENTION_FEATURES)}")
      bad = [n for n in schema.MENTION_FEATURES if not isinstance(mention[n], str)]
      if bad:
        raise TypeError(f"mention {i}: features {bad} are not str")
      out.append({n: mention[n] for n in schema.MENTION_FEATURES})
      continue
    if isinstance(mention, (str, bytes)) or not isinstance(mention, Sequence) or len(
        mention) != 3:
      raise TypeError(f"mention {i}: expected (text, start, end) or a dict of "
                      f"{list(schema.MENTION_FEATURES)}, got {mention!r:.200}")
    text, start, end = mention
    if not isinstance(text, str) or not all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (start, end)):
      raise TypeError(f"mention {i}: expected (str, int, int), got "
                      f"({type(text).__name__}, {type(start).__name__}, {type(end).__name__})")
    try:
      out.append(mention_features_lib.mention_features(text, int(start), int(end)))
    except ValueError as e:
      raise ValueError(f"mention {i}: {e}") from e
  return out


class LinkResult(NamedTuple):
  """One mention's answer from `EntityRetriever.link`.

  entity: the linked title, or None for NIL (P(top-1 right) below the calibrator's threshold);
    the top-1 title when no calibrator is loaded.
  probability: calibrated P(top-1 entity is right), or None without a calibrator.
  entities: the top-k (title, cosine) pairs, best first, as `retrieve` returns them (also for
    a NIL answer: the candidates that were judged unlikely).
  """
  entity: Optional[str]
  probability: Optional[float]
  entities: List[Tuple[str, float]]

  @property
  def is_nil(self) -> bool:
    return self.entity is None


def _resolve_paths(path: str, index_dir: Optional[str]) -> Tuple[str, str]:
  """Returns (export dir, index dir) for a workspace root or an export dir."""
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  if os.path.isfile(os.path.join(path, savedmodel.MANIFEST_FILE)):
    export_dir = path
    default_index = os.path.join(os.path.dirname(os.path.abspath(path)), "index")
  elif os.path.isfile(os.path.join(path, "export", savedmodel.MANIFEST_FILE)):
    export_dir = os.path.join(path, "export")
    default_index = os.path.join(path, "index")
  else:
    raise FileNotFoundError(
        f"{path} is neither a workspace (no export/{savedmodel.MANIFEST_FILE}) nor an export "
        f"directory (no {savedmodel.MANIFEST_FILE}); run the export stage first")
  # Resolved once: a KB update (retrieval.kb_versions) that switches WS/index while the
  # retriever loads cannot mix two KB versions.
  return export_dir, kb_versions.resolve_index_dir(index_dir or default_index)


class EntityRetriever:
  """Top-k entities for mentions: mention encoder + entity index + titles (paper section 5.2).

  Build with `EntityRetriever.load`. Scores are cosines in [-1, 1] between the mention encoding
  and the entity encodings, best first.

  Attributes:
    titles: `[num_entities]` entity titles; row id i of the index is titles[i].
    index: the export.index.EntityIndex searched.
    index_kind: the index kind requested ('brute_force', 'ah' or 'ah_tree').
    model_fingerprint: fingerprint of the exported model (the index was built from it).
    kb_version: the KB version loaded (retrieval.kb_versions; 0 for an index never updated).
    export_dir, index_dir: where the encoder and the index were loaded from.
    nil_calibrator: the retrieval.nil.NilCalibrator `link` applies, or None (no NIL answers).
  """

  def __init__(self, mention_encoder: Any, index: Any, titles: Sequence[str],
               model_fingerprint: str, export_dir: str = "", index_dir: str = "",
               nil_calibrator: Optional[nil_lib.NilCalibrator] = None):
    if len(titles) != index.num_entities:
      raise ValueError(f"{len(titles)} entity titles for an index of {index.num_entities} "
                       f"entities ({index_dir}); the titles file and the index do not match")
    self.mention_encoder = mention_encoder
    self.index = index
    self.titles = list(titles)
    self.index_kind = index.kind
    self.model_fingerprint = model_fingerprint
    self.export_dir = export_dir
    self.index_dir = index_dir
    if nil_calibrator is not None and nil_calibrator.model_fingerprint not in (
        None, model_fingerprint):
      raise ValueError(f"the NIL calibrator was fitted for model "
                       f"{nil_calibrator.model_fingerprint!r}, the retriever's model is "
                       f"{model_fingerprint!r}; refit it")
    self.nil_calibrator = nil_calibrator
    kb_manifest = kb_versions.read_manifest(index_dir) if index_dir else None
    self.kb_version = kb_manifest["kb_version"] if kb_manifest else 0

  @classmethod
  def load(cls, path: str, index_kind: str = "brute_force",
           index_dir: Optional[str] = None,
           nil_calibrator: Optional[str] = "auto") -> "EntityRetriever":
    """Loads the mention encoder, an entity index and the entity titles.

    Accepted `path`s:
    - a workspace root WS (WORKSPACE.md): the encoder from WS/export, the index from WS/index;
    - an export directory (holding export_manifest.json): the index from the directory `index`
      beside it (EXPORT/../index), unless `index_dir` is given.
    The index directory is resolved once (a KB version of `dense-entity kb`), so a KB update
    published meanwhile is seen entirely or not at all.

    Args:
      path: workspace root or export directory.
      index_kind: 'brute_force' (exact), 'ah' or 'ah_tree' (ScaNN), a subdirectory of the
        index directory.
      index_dir: overrides the index directory (holding entity_titles.txt and `index_kind`/).
      nil_calibrator: path of a NIL calibrator (retrieval.nil) for `link`; 'auto' (default):
        EXPORT/nil_calibrator.json when it exists, else none; None or '': none.

    Returns:
      An EntityRetriever.

    Raises:
      FileNotFoundError: `path` is neither a workspace nor an export directory, or the index or
        titles file is missing (the message names the path).
      ValueError: the index was built from another model or has another dimension, the
        titles do not match the index, or the NIL calibrator is malformed or was fitted for
        another model.
    """
    # Imported here: `dense-entity --help` and parse_marked stay free of TensorFlow.
    from dense_entity.retrieval import index_builder  # pylint: disable=g-import-not-at-top
    from dense_entity.retrieval import index as index_lib  # pylint: disable=g-import-not-at-top
    from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
    if index_kind not in index_lib.KINDS:
      raise ValueError(f"unknown index kind {index_kind!r}; expected one of {index_lib.KINDS}")
    export_dir, index_dir = _resolve_paths(path, index_dir)
    manifest = savedmodel.read_manifest(export_dir)
    titles_path = os.path.join(index_dir, index_lib.TITLES_FILENAME)
    if not os.path.isfile(titles_path):
      raise FileNotFoundError(f"{titles_path} is missing: no entity index beside {export_dir} "
                              "(run export.encode_entities, or pass index_dir)")
    index = index_lib.load_index(index_dir, index_kind,
                                 expected_model_fingerprint=manifest["model_fingerprint"],
                                 expected_dim=manifest["encoding_dim"])
    calibrator = nil_lib.find_calibrator(export_dir, nil_calibrator,
                                         manifest["model_fingerprint"])
    encoder = savedmodel.load_encoder(os.path.join(export_dir, savedmodel.MENTION_ENCODER_DIR))
    return cls(encoder, index, index_builder.read_titles(titles_path),
               manifest["model_fingerprint"], export_dir, index_dir, calibrator)

  @property
  def num_entities(self) -> int:
    return len(self.titles)

  def encode(self, mentions: Sequence[Mention],
             batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
    """Encodes mentions: float32 `[num_mentions, encoding_dim]`, L2-normalised.

    Raises:
      ValueError / TypeError: a malformed mention (see `to_features`).
    """
    features = to_features(mentions)
    if not features:
      return np.zeros((0, self.index.dim), np.float32)
    return self.mention_encoder({n: [f[n] for f in features] for n in schema.MENTION_FEATURES},
                                batch_size=batch_size)

  def retrieve(self, mentions: Sequence[Mention], k: int = 10,
               batch_size: int = DEFAULT_BATCH_SIZE) -> List[List[Tuple[str, float]]]:
    """Returns the k entities with the highest cosine for each mention, best first.

    Args:
      mentions: `[num_mentions]` (text, span start, span end) tuples (character offsets, end
        exclusive) or dicts of the four mention features; mixing both is fine.
      k: entities per mention, >= 1; k above the number of entities returns all of them.
      batch_size: mentions encoded and searched together.

    Returns:
      `[num_mentions][min(k, num_entities)]` (title, score) pairs, score a cosine (float).
      Brute force ranks equal scores by row id (title order); ScaNN indexes are approximate.

    Raises:
      ValueError: k < 1, a malformed mention (naming its position), or a mention whose
        encoding has zero norm (no cosine is defined).
      TypeError: a mention of the wrong type.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
      raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
      raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    features = to_features(mentions)
    results = []
    for start in range(0, len(features), batch_size):
      chunk = features[start:start + batch_size]
      encodings = self.mention_encoder({n: [f[n] for f in chunk]
                                        for n in schema.MENTION_FEATURES}, batch_size=batch_size)
      zero = np.flatnonzero(np.linalg.norm(encodings, axis=-1) == 0.0)
      if zero.size:
        i = start + int(zero[0])
        raise ValueError(f"mention {i} ({features[i][schema.MENTION_SPAN]!r}) encodes to a "
                         "zero vector; no entity can be ranked for it")
      ids, scores = self.index.search(encodings, int(k))
      for row_ids, row_scores in zip(ids.tolist(), scores.tolist()):
        results.append([(self.titles[i], float(s)) for i, s in zip(row_ids, row_scores)])
    return results

  def link(self, mentions: Sequence[Mention], k: int = 10,
           batch_size: int = DEFAULT_BATCH_SIZE) -> List[LinkResult]:
    """Links each mention to its top entity, or to NIL when the NIL calibrator says the top
    entity is probably wrong (P(top-1 right) < threshold; retrieval.nil).

    Without a calibrator every mention is linked to its top-1 entity and `probability` is
    None. The calibrator's features need the top-2 scores, so at least 2 entities are
    searched (the second is dropped again when k = 1).

    Args:
      mentions, k, batch_size: as in `retrieve`.

    Returns:
      `[num_mentions]` LinkResult(entity or None, probability or None, top-k entities).

    Raises:
      As `retrieve`.
    """
    if self.nil_calibrator is None:
      return [LinkResult(row[0][0], None, row)
              for row in self.retrieve(mentions, k, batch_size)]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
      raise ValueError(f"k must be a positive integer, got {k!r}")
    rows = self.retrieve(mentions, max(int(k), 2), batch_size)
    probabilities = self.nil_calibrator.probability([[s for _, s in row] for row in rows])
    nil = self.nil_calibrator.is_nil(probabilities)
    return [LinkResult(None if is_nil else row[0][0], float(p), row[:k])
            for row, p, is_nil in zip(rows, probabilities, nil)]
