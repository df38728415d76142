"""Publishing finished files and directories in place of older ones; reading JSONL objects."""

import json
import os
import shutil
import uuid
from typing import Iterator, Tuple


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
  `directory` never holds a half-written or half-deleted artifact. Both paths must be on one
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
  if backup:
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
