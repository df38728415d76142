"""Publishing finished files and directories in place of older ones; whose output a directory
holds; reading JSONL objects."""

import fnmatch
import json
import os
import shutil
import uuid
from typing import Iterator, NamedTuple, Optional, Sequence, Tuple


class OutputKind(NamedTuple):
  """What one stage's output directory holds (WORKSPACE.md gives every file).

  The names are written here, in the bottom layer, so that every stage recognises the others'
  outputs (`check_output_dir`); they are the file contracts of WORKSPACE.md.
  """
  name: str                    # as messages name it, e.g. 'an extraction'
  producer: str                # the command that writes it
  markers: Tuple[str, ...]     # a finished output holds one of these files
  key: Optional[str]           # a key the marker's JSON object holds (MANIFEST.json is shared)
  patterns: Tuple[str, ...]    # fnmatch patterns of every entry it writes, work in progress too


EXTRACTION = OutputKind(
    "an extraction", "python -m beam_pipelines.extract_wikipedia", ("MANIFEST.json",),
    "record_files", ("MANIFEST.json", "stats.json", "alias_counts.tsv", "redirects.tsv",
                     "entities-*", "mentions_train-*", "mentions_heldout-*", ".staging-*"))
MINING_ROUND = OutputKind(
    "a hard negative mining round", "python -m beam_pipelines.mine_hard_negatives",
    ("MANIFEST.json",), "round", ("MANIFEST.json", "stats.json", "hard_negatives-*"))
MODEL = OutputKind(
    "a trained model", "python -m dense_entity.train", ("config.json",), None,
    ("config.json", "vocab.txt", "trained_on.json", "checkpoints", "summaries", ".*.tmp*"))
EXPORT = OutputKind(
    "an export of the encoders", "python -m export.export_model", ("export_manifest.json",), None,
    ("export_manifest.json", "mention_encoder", "entity_encoder", "serving"))
INDEX = OutputKind(
    "entity encodings and indexes", "python -m export.encode_entities or export.build_index",
    ("indexes.json", "encodings_manifest.json"), None,
    ("indexes.json", "encodings_manifest.json", "entity_encodings.npy", "entity_titles.txt",
     "row_entities.npy", "brute_force", "ah", "ah_tree", ".encoding", ".staging-*", ".*.tmp*",
     "*.old-*"))
REPORTS = OutputKind(
    "evaluation reports", "python -m dense_entity.evaluate",
    ("eval.json", "tradeoff.json", "rounds.json", "context_probes.json"), None,
    ("eval.json", "eval.md", "*.png", "*.jsonl", "rounds.json", "tradeoff.json",
     "context_probes*.json"))
SERVING = OutputKind(
    "a serving model", "python -m export.serving", ("serving_manifest.json",), None, ())
ENTITY_INDEX = OutputKind(
    "one index", "python -m export.build_index", ("index_manifest.json",), None, ())
OUTPUT_KINDS = (EXTRACTION, MINING_ROUND, MODEL, EXPORT, INDEX, REPORTS, SERVING, ENTITY_INDEX)


def _holds_marker(directory: str, kind: OutputKind) -> Optional[str]:
  """The marker of `kind` that `directory` holds (with `kind.key` in its JSON), or None."""
  for marker in kind.markers:
    path = os.path.join(directory, marker)
    if not os.path.isfile(path):
      continue
    if kind.key is None:
      return marker
    try:
      with open(path, encoding="utf-8") as f:
        value = json.load(f)
    except (OSError, ValueError):
      continue
    if isinstance(value, dict) and kind.key in value:
      return marker
  return None


def output_kind(directory: str,
                kinds: Sequence[OutputKind] = OUTPUT_KINDS) -> Optional[Tuple[OutputKind, str]]:
  """(kind, marker file) of the first of `kinds` whose finished output `directory` holds, or
  None (not a directory, or no stage's marker in it)."""
  if not os.path.isdir(directory):
    return None
  for kind in kinds:
    marker = _holds_marker(directory, kind)
    if marker:
      return kind, marker
  return None


def check_output_dir(directory: str, kind: OutputKind, flag: str = "--output_dir") -> None:
  """Checks, before a stage does any work, that it may write its output `kind` to `directory`.

  Allowed: a directory that does not exist, an empty one, one holding a marker of `kind` (an
  earlier output, which the stage replaces or resumes), or one holding only entries of `kind`
  (`kind.patterns`: what a killed run of the stage left, e.g. resumable work in progress).
  Anything else is refused, so that no stage mixes its files into another stage's output or a
  user's directory. Remote paths ('gs://...') are not checked.

  Args:
    directory: the stage's output directory.
    kind: the stage's OutputKind.
    flag: the command-line flag that named `directory`, for the message.

  Raises:
    NotADirectoryError: `directory`, or the nearest of its parents that exists, is a file.
    FileExistsError: naming `directory` and what it holds: another stage's output (by its
      marker file) or other files (the first few named).
  """
  if "://" in directory:
    return
  if not os.path.lexists(directory):
    parent = os.path.dirname(os.path.abspath(directory))
    while not os.path.lexists(parent):
      parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
      raise NotADirectoryError(f"{flag}={directory}: {parent} is a file, not a directory")
    return
  if not os.path.isdir(directory):
    raise NotADirectoryError(f"{flag}={directory} is a file, not a directory; give a new or "
                             f"empty directory for {kind.name}, or one that already holds "
                             f"{kind.name}")
  names = sorted(os.listdir(directory))
  if not names or _holds_marker(directory, kind):
    return
  other = output_kind(directory, [k for k in OUTPUT_KINDS if k is not kind])
  if other:
    raise FileExistsError(
        f"{flag}={directory} holds {other[0].name} ({other[1]}, written by {other[0].producer}),"
        f" not {kind.name}; refusing to write into it: give another directory")
  foreign = [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in kind.patterns)]
  if foreign:
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    raise FileExistsError(
        f"{flag}={directory} is not empty and not an output of {kind.producer} (no "
        f"{' or '.join(kind.markers)}; it holds {shown}); refusing to write into it: give a new "
        "or empty directory, or remove it yourself")


def check_replaceable(directory: str, marker: str) -> None:
  """Checks that `directory` may be replaced by a stage's new output: it does not exist, is an
  empty directory, or holds `marker` (the file a finished output of that stage writes last).

  Raises:
    FileExistsError: naming `directory`, when it is a file, or a directory holding anything
      else (another stage's output, a parent of several rounds, a user's files).
  """
  if not os.path.lexists(directory):
    return
  if not os.path.isdir(directory):
    raise FileExistsError(f"{directory} is a file, not an output directory; give another "
                          "output directory")
  if os.path.isfile(os.path.join(directory, marker)) or not os.listdir(directory):
    return
  raise FileExistsError(f"{directory} exists and is not a finished output of this stage (no "
                        f"{marker} in it); refusing to replace it: give another output "
                        "directory or remove it yourself")


def replace_directory(finished_dir: str, directory: str, marker: str) -> None:
  """Moves the complete `finished_dir` to `directory`, replacing what was there.

  The old directory is renamed aside first and deleted only after the new one is in place, so
  `directory` never holds a half-written or half-deleted artifact (a symlink there is
  replaced, its target left alone). Both paths must be on one
  filesystem (`finished_dir` is normally a temporary sibling of `directory`). Only an earlier
  output of the same stage (holding `marker`) or an empty directory is replaced
  (`check_replaceable`).

  Raises:
    FileExistsError: `directory` holds something else; nothing is moved or deleted.
  """
  check_replaceable(directory, marker)
  backup = None
  if os.path.lexists(directory):
    backup = f"{directory}.old-{uuid.uuid4().hex[:8]}"
    os.rename(directory, backup)
  os.rename(finished_dir, directory)
  if backup and os.path.islink(backup):
    os.unlink(backup)  # rmtree refuses a symlink: the link was left beside as '.old-...'
  elif backup:
    shutil.rmtree(backup, ignore_errors=True)


def write_text_atomically(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` through a temporary sibling and a rename, so `path` holds
  either its old content or all of `text`, never part of it."""
  directory, name = os.path.split(path)
  tmp = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex[:8]}")
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def read_jsonl_objects(path: str) -> Iterator[Tuple[int, dict]]:
  """Yields (line number, object) for each non-blank line of a JSONL file (lines from 1).

  Raises:
    FileNotFoundError: when `path` does not exist.
    IsADirectoryError: when `path` is a directory.
    ValueError: naming 'PATH:LINE', for a line that is not UTF-8, invalid JSON or a value that
      is not an object.
  """
  with open(path, "rb") as f:  # decoded line by line, so a bad byte names its line
    for line_number, raw in enumerate(f, 1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{line_number}: not UTF-8 text ({e.reason} at byte "
                         f"{e.start} of the line)") from None
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{line_number}: invalid JSON: {e}") from None
      if not isinstance(record, dict):
        raise ValueError(f"{path}:{line_number}: expected a JSON object, got "
                         f"{type(record).__name__}")
      yield line_number, record
