"""Entity-linking evaluation sets in their standard formats, as a list of `EvalMention`.

Every loader returns mentions as (document text, character span, raw gold title), so evaluation
describes each mention with `mention_features.mention_features` exactly like extraction does
(paper section 4.1) and scores it with `metrics.score_rankings` (section 5). Gold titles are
kept raw (underscores, percent-escapes, '--NME--'); normalization and redirect resolution happen
once, in scoring, for gold and predictions alike.

Formats:
- `aida`: AIDA CoNLL-style TSV (AIDA-YAGO2, KORE50): '-DOCSTART- (id)' lines, one token per
  line, mention tokens with `token \\t B|I \\t mention \\t gold \\t ...`.
- `jsonl`: one document per line, `{"text", "mentions": [{"start", "end", "entity"}]}`, offsets
  in characters (Unicode code points), end exclusive; optional "id".
- `nif`: GERBIL NIF 2.0 Turtle (nif:Context + phrases with nif:beginIndex/nif:endIndex and
  itsrdf:taIdentRef), parsed with rdflib.
- `wikinews`: the paper's Wikinews set (google-research/dense_representations_for_entity_retrieval):
  `mentions.tsv` (docid, position, length, mention, url), `docs.tsv` (docid, date, url, title,
  wiki_md5, text_md5) and the document texts its `parse_wikinews.py` writes, one file per docid.

Malformed input raises ValueError naming the file and the line (or record).
"""

import dataclasses
import hashlib
import os
import re
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dense_entity.common import fileio
from dense_entity.kb.mention_features import mention_features, sentence_spans

NIL = "--NME--"

_DOCSTART = "-DOCSTART-"
_YAGO_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_WIKIPEDIA_URL = re.compile(r"^https?://en\.wikipedia\.org/wiki/(.+)$")
_DBPEDIA_URL = re.compile(r"^https?://dbpedia\.org/resource/(.+)$")

_NIF = "http://persistence.uni-leipzig.org/nlp2rdf/ontologies/nif-core#"
_ITSRDF = "http://www.w3.org/2005/11/its/rdf#"


@dataclasses.dataclass(frozen=True)
class EvalMention:
  """One evaluation mention: a character span of a document and its gold entity.

  Attributes:
    doc_id: the document's id in the dataset.
    text: the whole document text (shared by the document's mentions).
    start: span start, a character (code point) offset into `text`.
    end: span end, exclusive; 0 <= start < end <= len(text).
    gold: the raw gold title as in the dataset (e.g. 'David_Beckham', 'Tabby%27s_star'), or a
      NIL label such as '--NME--'.
  """
  doc_id: str
  text: str
  start: int
  end: int
  gold: str

  @property
  def mention(self) -> str:
    """The span text, text[start:end]."""
    return self.text[self.start:self.end]


def features(m: EvalMention) -> Dict[str, str]:
  """The paper's four mention features of `m` (section 4.1): mention_features(text, start, end)."""
  return mention_features(m.text, m.start, m.end)


def all_features(mentions: Sequence[EvalMention]) -> List[Dict[str, str]]:
  """`features` of every mention, splitting each distinct document into sentences once.

  Returns:
    `[len(mentions)]` feature dicts, in order.
  """
  sentences: Dict[int, List[Tuple[int, int]]] = {}
  texts: Dict[int, str] = {}  # Keeps the texts alive so their id() stays unique.
  result = []
  for m in mentions:
    key = id(m.text)
    if key not in sentences:
      texts[key] = m.text
      sentences[key] = sentence_spans(m.text)
    result.append(mention_features(m.text, m.start, m.end, sentences=sentences[key]))
  return result


def _check_span(text: str, start: int, end: int, where: str) -> None:
  if not 0 <= start < end <= len(text):
    raise ValueError(f"{where}: mention span [{start}, {end}) is empty or outside a text of "
                     f"{len(text)} characters")


def title_from_uri(uri: str) -> str:
  """Maps an entity URI or URL to a raw title.

  'http(s)://en.wikipedia.org/wiki/TITLE' and 'http(s)://dbpedia.org/resource/TITLE' give
  TITLE (still raw: underscores and percent-escapes are left to `titles.normalize_title`);
  GERBIL's '.../notInWiki/...' URIs give NIL ('--NME--'); any other URI is returned unchanged
  (it then matches no KB entity and is reported as missing from the KB, never dropped).
  """
  for pattern in (_WIKIPEDIA_URL, _DBPEDIA_URL):
    match = pattern.match(uri)
    if match:
      return match.group(1)
  if "/notInWiki/" in uri:
    return NIL
  return uri


# ----------------------------------------------------------------------------- AIDA TSV


def _decode_yago(name: str) -> str:
  """Decodes YAGO2's backslash escapes: 'John_F\\u002e_Kennedy' -> 'John_F._Kennedy'."""
  if "\\u" not in name:
    return name
  decoded = _YAGO_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)
  # Characters outside the BMP are written as surrogate pairs: join them.
  return decoded.encode("utf-16", "surrogatepass").decode("utf-16")


def _utf8_lines(f, path: str) -> Iterator[Tuple[int, str]]:
  """Yields (line number from 1, line) of the binary file `f`, each line decoded as UTF-8.

  Raises:
    ValueError: naming `path` and the line that is not UTF-8 (decoding line by line names the
      line itself; a text-mode reader fails a block ahead of it).
  """
  for line_number, raw in enumerate(f, 1):
    try:
      yield line_number, raw.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"{path}:{line_number}: not UTF-8 text ({e.reason} at byte {e.start} "
                       "of the line); evaluation sets are read as UTF-8") from None


def load_aida_tsv(path: str) -> List[EvalMention]:
  """Loads an AIDA CoNLL-style TSV file (AIDA-YAGO2, KORE50).

  Format: a '-DOCSTART- (doc id)' line opens each document; then one token per line, blank lines
  between sentences. A mention token has at least 4 tab-separated columns: token, 'B' (first
  token of a mention) or 'I' (continuation), the full mention, the gold entity (YAGO2 name with
  '\\uXXXX' escapes, decoded here, e.g. 'David_Beckham') or '--NME--'; further columns (Wikipedia
  URL, ids) are ignored.

  The document text is rebuilt by joining all its tokens with single spaces (sentences too), and
  mention offsets point into it, so text[start:end] is the mention's tokens joined by spaces.

  Args:
    path: the .tsv file (UTF-8).

  Returns:
    Mentions in file order; doc_id is the text inside the DOCSTART parentheses.

  Raises:
    ValueError: naming the file and line, for tokens before the first DOCSTART, an empty token,
      2-3 columns, a tag other than B/I, an 'I' that does not continue a mention, an empty
      gold column, or a mention line whose columns are separated by spaces, not tabs; naming
      the file, for text that is not UTF-8 and for a file with no mention (with the likely
      cause: no tab-separated line).
  """
  mentions: List[EvalMention] = []
  doc_id: Optional[str] = None
  tokens: List[str] = []
  length = 0  # Length of " ".join(tokens).
  spans: List[Tuple[int, int, str, str]] = []  # (start, end, mention column, gold)
  open_span: Optional[List] = None  # [start, end, mention column, gold] of the current mention.

  def flush() -> None:
    if doc_id is None:
      return
    text = " ".join(tokens)
    for start, end, _, gold in spans:
      mentions.append(EvalMention(doc_id, text, start, end, gold))

  line_number = 0
  with open(path, "rb") as f:
    for line_number, line in _utf8_lines(f, path):
      line = line.rstrip("\r\n")
      where = f"{path}:{line_number}"
      if line.startswith(_DOCSTART):
        if open_span:
          spans.append(tuple(open_span))
        open_span = None
        flush()
        match = re.fullmatch(r"\s*\((.*)\)\s*", line[len(_DOCSTART):])
        doc_id = (match.group(1) if match else line[len(_DOCSTART):]).strip()
        if not doc_id:
          doc_id = f"doc{line_number}"
        tokens, length, spans = [], 0, []
        continue
      if not line.strip():  # Sentence boundary: a mention never crosses it.
        if open_span:
          spans.append(tuple(open_span))
        open_span = None
        continue
      if doc_id is None:
        raise ValueError(f"{where}: token before the first {_DOCSTART} line")
      fields = line.split("\t")
      token = fields[0]
      if not token.strip():
        raise ValueError(f"{where}: empty token")
      spaced = line.split()
      if len(fields) == 1 and len(spaced) >= 4 and spaced[1] in ("B", "I"):
        raise ValueError(f"{where}: columns separated by spaces, not tabs ({line[:60]!r}); "
                         "AIDA columns are tab-separated: token, B/I, mention, gold")
      start = length + 1 if tokens else 0
      tokens.append(token)
      length = start + len(token)
      if len(fields) == 1:
        if open_span:
          spans.append(tuple(open_span))
        open_span = None
        continue
      if len(fields) < 4:
        raise ValueError(f"{where}: expected 1 column (token) or at least 4 (token, B/I, "
                         f"mention, gold), got {len(fields)}")
      tag, mention_column, gold = fields[1], fields[2], _decode_yago(fields[3].strip())
      if not gold:
        raise ValueError(f"{where}: empty gold entity column (use {NIL} for NIL)")
      if tag == "B":
        if open_span:
          spans.append(tuple(open_span))
        open_span = [start, length, mention_column, gold]
      elif tag == "I":
        if not open_span or open_span[2] != mention_column or open_span[3] != gold:
          raise ValueError(f"{where}: 'I' token {token!r} does not continue a mention "
                           "(no 'B' token with the same mention and gold before it)")
        open_span[1] = length
      else:
        raise ValueError(f"{where}: mention tag must be 'B' or 'I', got {tag!r}")
  if open_span:
    spans.append(tuple(open_span))
  flush()
  if not mentions:
    # Any tab-separated token line is a mention or an error above, so none has tabs.
    cause = ("the file is empty" if not line_number else
             "no line has tab-separated columns (token<TAB>B|I<TAB>mention<TAB>gold); columns "
             "separated by spaces?")
    raise ValueError(f"{path}: no mentions in {line_number} lines: {cause}")
  return mentions


# ----------------------------------------------------------------------------- JSONL


def load_jsonl(path: str) -> List[EvalMention]:
  """Loads the plain JSONL format: one document per line.

  Each line: `{"text": str, "mentions": [{"start": int, "end": int, "entity": str|null}],
  "id": optional str}`. Offsets are character (code point) offsets into "text", end exclusive.
  "entity" is the gold title (raw, e.g. 'Ore_River'), '--NME--' or null (NIL). A mention may
  carry "mention": the span text, which is then checked. Blank lines are skipped; doc_id is
  "id" when given, else '<file name>:<line>'.

  Raises:
    ValueError: naming the file, line and mention index, for invalid JSON, a missing or
      mistyped field, an empty or out-of-range span, or a "mention" that differs from the span.
  """
  mentions: List[EvalMention] = []
  name = os.path.basename(path)
  for line_number, record in fileio.read_jsonl_objects(path):
    where = f"{path}:{line_number}"
    text = record.get("text")
    if not isinstance(text, str):
      raise ValueError(f'{where}: "text" must be a string')
    doc_id = record.get("id", f"{name}:{line_number}")
    if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
      raise ValueError(f'{where}: "id" must be a string')
    doc_mentions = record.get("mentions")
    if not isinstance(doc_mentions, list):
      raise ValueError(f'{where}: "mentions" must be a list')
    for i, m in enumerate(doc_mentions):
      at = f"{where}: mention {i}"
      if not isinstance(m, dict):
        raise ValueError(f"{at}: expected a JSON object")
      start, end = m.get("start"), m.get("end")
      for key, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool):
          raise ValueError(f'{at}: "{key}" must be an integer, got {value!r}')
      _check_span(text, start, end, at)
      if "entity" not in m:
        raise ValueError(f'{at}: missing "entity" (use "{NIL}" or null for NIL)')
      entity = m["entity"]
      if entity is None:
        entity = NIL
      if not isinstance(entity, str):
        raise ValueError(f'{at}: "entity" must be a string or null, got {entity!r}')
      surface = m.get("mention")
      if isinstance(surface, str) and surface != text[start:end]:
        raise ValueError(f'{at}: "mention" {surface!r} differs from text[{start}:{end}] = '
                         f"{text[start:end]!r}")
      mentions.append(EvalMention(str(doc_id), text, start, end, entity))
  return mentions


# ----------------------------------------------------------------------------- NIF


def _utf16_to_code_points(text: str, offset: int) -> Optional[int]:
  """Converts a UTF-16 code-unit offset into a code-point offset (None if inside a pair)."""
  units = 0
  for i, char in enumerate(text):
    if units == offset:
      return i
    units += 2 if ord(char) > 0xFFFF else 1
    if units > offset:
      return None
  return len(text) if units == offset else None


def load_nif(path: str) -> List[EvalMention]:
  """Loads a GERBIL NIF 2.0 Turtle file (the format of most GERBIL benchmarks).

  Documents are `nif:Context` resources with `nif:isString`; mentions are resources with
  `nif:referenceContext` (the context), `nif:beginIndex`, `nif:endIndex` (code-point offsets into
  the context string, end exclusive; UTF-16 offsets, as some Java tools write them, are accepted
  when `nif:anchorOf` shows they are meant), and `itsrdf:taIdentRef`, mapped to a title by
  `title_from_uri` (Wikipedia or DBpedia URIs preferred when there are several). A phrase without
  taIdentRef is NIL ('--NME--').

  Returns:
    Mentions sorted by (context URI, start, end); doc_id is the context URI.

  Raises:
    ValueError: naming the file and the resource, for invalid Turtle, a context with no or
      several strings, a phrase whose context has no string, a missing or non-integer index, an
      empty or out-of-range span, or an `nif:anchorOf` that differs from the span.
  """
  import rdflib  # pylint: disable=g-import-not-at-top

  nif = rdflib.Namespace(_NIF)
  itsrdf = rdflib.Namespace(_ITSRDF)
  graph = rdflib.Graph()
  try:
    graph.parse(path, format="turtle")
  except (OSError, UnicodeDecodeError):
    raise
  except Exception as e:  # rdflib raises several parser-specific types.
    raise ValueError(f"{path}: invalid Turtle: {e}") from None

  contexts: Dict[str, str] = {}
  for subject in set(graph.subjects(nif.isString)):
    strings = list(graph.objects(subject, nif.isString))
    if len(strings) != 1:
      raise ValueError(f"{path}: context <{subject}> has {len(strings)} nif:isString values")
    contexts[str(subject)] = str(strings[0])

  def integer(phrase, predicate, name: str) -> int:
    values = list(graph.objects(phrase, predicate))
    if len(values) != 1:
      raise ValueError(f"{path}: phrase <{phrase}> has {len(values)} {name} values")
    try:
      return int(str(values[0]))
    except ValueError:
      raise ValueError(f"{path}: phrase <{phrase}> {name} {str(values[0])!r} is not an "
                       "integer") from None

  mentions: List[EvalMention] = []
  for phrase in set(graph.subjects(nif.referenceContext)):
    references = list(graph.objects(phrase, nif.referenceContext))
    if len(references) != 1:
      raise ValueError(f"{path}: phrase <{phrase}> has {len(references)} nif:referenceContext")
    context = str(references[0])
    if context not in contexts:
      raise ValueError(f"{path}: phrase <{phrase}> refers to <{context}>, which has no "
                       "nif:isString")
    text = contexts[context]
    start = integer(phrase, nif.beginIndex, "nif:beginIndex")
    end = integer(phrase, nif.endIndex, "nif:endIndex")
    anchor = graph.value(phrase, nif.anchorOf)
    if anchor is not None and text[start:end] != str(anchor):
      cp_start, cp_end = _utf16_to_code_points(text, start), _utf16_to_code_points(text, end)
      if cp_start is not None and cp_end is not None and text[cp_start:cp_end] == str(anchor):
        start, end = cp_start, cp_end
    _check_span(text, start, end, f"{path}: phrase <{phrase}>")
    if anchor is not None and text[start:end] != str(anchor):
      raise ValueError(f"{path}: phrase <{phrase}>: nif:anchorOf {str(anchor)!r} differs from "
                       f"the context's [{start}, {end}) = {text[start:end]!r}")
    uris = sorted(str(u) for u in graph.objects(phrase, itsrdf.taIdentRef))
    titles = [title_from_uri(u) for u in uris]
    # Prefer a URI that names a Wikipedia title, then NIL markers, then anything else.
    known = [t for u, t in zip(uris, titles) if t != u and t != NIL]
    if known:
      gold = known[0]
    elif not uris or NIL in titles:
      gold = NIL
    else:
      gold = titles[0]
    mentions.append(EvalMention(context, text, start, end, gold))
  mentions.sort(key=lambda m: (m.doc_id, m.start, m.end))
  return mentions


# ----------------------------------------------------------------------------- Wikinews


def _read_tsv_with_header(path: str, required: Sequence[str]):
  """Yields (line number, {column: value}) for each data row of a headed TSV file."""
  with open(path, encoding="utf-8", newline="") as f:
    header = f.readline().rstrip("\r\n").split("\t")
    missing = [c for c in required if c not in header]
    if missing:
      raise ValueError(f"{path}:1: header {header} lacks column(s) {missing}")
    for line_number, line in enumerate(f, 2):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = line.split("\t")
      if len(fields) != len(header):
        raise ValueError(f"{path}:{line_number}: expected {len(header)} tab-separated fields, "
                         f"got {len(fields)}")
      yield line_number, dict(zip(header, fields))


def load_wikinews(mentions_tsv: str, docs_tsv: str, texts_dir: str,
                  verify_md5: bool = False) -> List[EvalMention]:
  """Loads the paper's Wikinews set (section 5) in its release format.

  The format of google-research/dense_representations_for_entity_retrieval (Gillick et al.
  2019): two index files shipped with the code, and texts rebuilt from a Wikinews dump by its
  `parse_wikinews.py`.

  Args:
    mentions_tsv: `mentions.tsv`, header `docid position length mention url`; position and
      length are character offsets into the document text; url is the gold Wikipedia URL
      (https://en.wikipedia.org/wiki/TITLE), mapped by `title_from_uri`.
    docs_tsv: `docs.tsv`, header `docid date url title wiki_md5 text_md5`.
    texts_dir: the `text/` folder written by `parse_wikinews.py`, one UTF-8 file per docid.
    verify_md5: also check each text file's MD5 against docs.tsv's text_md5.

  Returns:
    Mentions in mentions.tsv order; doc_id is the docid.

  Raises:
    ValueError: naming the file and line, for a bad header or row, a docid not in docs.tsv, a
      missing text file, non-integer offsets, a span outside the text, a span whose text differs
      from the mention column, or (with verify_md5) a checksum mismatch.
  """
  docs = {row["docid"]: (line_number, row) for line_number, row in
          _read_tsv_with_header(docs_tsv, ("docid", "text_md5"))}
  texts: Dict[str, str] = {}
  mentions: List[EvalMention] = []
  for line_number, row in _read_tsv_with_header(
      mentions_tsv, ("docid", "position", "length", "mention", "url")):
    where = f"{mentions_tsv}:{line_number}"
    doc_id = row["docid"]
    if doc_id not in docs:
      raise ValueError(f"{where}: docid {doc_id!r} is not in {docs_tsv}")
    if doc_id not in texts:
      text_path = os.path.join(texts_dir, doc_id)
      try:
        with open(text_path, "rb") as f:
          data = f.read()
      except FileNotFoundError:
        raise ValueError(f"{where}: document text {text_path} not found (texts_dir must be the "
                         "text/ folder written by parse_wikinews.py)") from None
      if verify_md5:
        docs_line, doc_row = docs[doc_id]
        if hashlib.md5(data).hexdigest() != doc_row["text_md5"]:
          raise ValueError(f"{docs_tsv}:{docs_line}: text_md5 of {doc_id!r} does not match "
                           f"{text_path}")
      try:
        texts[doc_id] = data.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(f"{text_path}: not UTF-8: {e}") from None
    text = texts[doc_id]
    try:
      start, length = int(row["position"]), int(row["length"])
    except ValueError:
      raise ValueError(f"{where}: position {row['position']!r} and length {row['length']!r} "
                       "must be integers") from None
    end = start + length
    _check_span(text, start, end, where)
    if text[start:end] != row["mention"]:
      raise ValueError(f"{where}: text[{start}:{end}] = {text[start:end]!r} differs from the "
                       f"mention {row['mention']!r}")
    mentions.append(EvalMention(doc_id, text, start, end, title_from_uri(row["url"])))
  return mentions


# ----------------------------------------------------------------------------- specs


def _load_wikinews_dir(directory: str) -> List[EvalMention]:
  texts_dir = os.path.join(directory, "text")
  if not os.path.isdir(texts_dir):
    texts_dir = directory
  return load_wikinews(os.path.join(directory, "mentions.tsv"),
                       os.path.join(directory, "docs.tsv"), texts_dir)


LOADERS: Dict[str, Callable[[str], List[EvalMention]]] = {
    "aida": load_aida_tsv,
    "jsonl": load_jsonl,
    "nif": load_nif,
    "wikinews": _load_wikinews_dir,
}


def load(spec: str) -> List[EvalMention]:
  """Loads a dataset from a 'FORMAT:PATH' spec.

  Formats: 'aida:FILE.tsv', 'jsonl:FILE.jsonl', 'nif:FILE.ttl', 'wikinews:DIR' (DIR holds
  mentions.tsv, docs.tsv and the text/ folder; texts directly in DIR are accepted too).

  Raises:
    ValueError: for a spec without 'FORMAT:' or an unknown format, a dataset with no mention
      or text that is not UTF-8 (naming the file), and whatever the loader raises for
      malformed input.
    FileNotFoundError: naming a missing file.
  """
  fmt, sep, path = spec.partition(":")
  fmt = fmt.strip().lower()
  if not sep or not path:
    raise ValueError(f"dataset spec {spec!r} must be FORMAT:PATH with FORMAT one of "
                     f"{sorted(LOADERS)}")
  if fmt not in LOADERS:
    raise ValueError(f"dataset spec {spec!r}: unknown format {fmt!r}; expected one of "
                     f"{sorted(LOADERS)}")
  try:
    mentions = LOADERS[fmt](path)
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); the {fmt} "
                     "format is read as UTF-8") from None
  if not mentions:
    raise ValueError(f"{path}: no mentions in this {fmt} dataset; nothing to evaluate")
  return mentions


def name_of(spec: str) -> str:
  """The report name of a 'FORMAT:PATH' dataset: the file (or directory) name without its
  extension ('jsonl:eval/aida/aida_testa.jsonl' -> 'aida_testa')."""
  return os.path.splitext(os.path.basename(spec.split(":", 1)[-1].rstrip("/")))[0]
