"""Versions of a workspace's KB: immutable version directories and one atomic pointer.

A KB update (retrieval.kb_update, `dense-entity kb`) never writes into the index directory
that readers use. After the first update a workspace is laid out as:

  WS/index          -> symlink 'index.kb/v000003' (relative): the current KB version
  WS/index.kb/v000002/, v000003/
                    one finished version each: entity_titles.txt, row_entities.npy, one
                    directory per index kind, indexes.json, entity_encodings.npy (when the
                    workspace had one), redirects.tsv and alias_counts.tsv (the KB's aliases,
                    for the alias table and BM25), serving/ (the serving SavedModel, when the
                    workspace had one) and kb_manifest.json (written last)
  WS/index.kb/.lock flock of the update running; WS/index.kb/.v*.tmp-*: a staged version
  WS/export/serving -> symlink '../index/serving' (when the workspace had a serving model)

A new version is staged in WS/index.kb, renamed to vNNNNNN when complete, and published by
replacing the WS/index symlink with os.replace (one rename(2): atomic on POSIX). A reader that
resolves WS/index once (`resolve_index_dir`, as EntityRetriever.load, the serving export and
the evaluator do) reads one version throughout, before or after an update, never a mix; a
killed update leaves the staged directory, which the next update removes, and the current
version as it was. Version directories older than the `keep` newest are removed after a
publish (a reader still loading one of those, started two updates ago, would fail).

The first update migrates a plain WS/index directory into WS/index.kb/v000000 (one rename,
then the symlink); a reader resolving WS/index during those microseconds retries
(`resolve_index_dir`).
"""

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

STORE_SUFFIX = ".kb"
MANIFEST_FILE = "kb_manifest.json"
# index_builder.SUMMARY_FILENAME (not imported: this module stays free of numpy and TF).
SUMMARY_FILE = "indexes.json"
MANIFEST_FORMAT = "dense_entity.kb_manifest/1"
SERVING_DIR = "serving"
_LOCK_FILE = ".lock"
_VERSION = re.compile(r"^v(\d{6,})$")
_STAGING_PREFIX = ".v"
# How long a reader waits for WS/index to reappear while the first update migrates it.
_MIGRATION_WAIT_S = 2.0


class KBUpdateError(ValueError):
  """A KB update that cannot run: another is running, or the workspace is not updatable."""


def store_dir(index_link: str) -> str:
  """WS/index.kb for the index path WS/index."""
  return os.path.abspath(index_link).rstrip(os.sep) + STORE_SUFFIX


def version_name(version: int) -> str:
  return f"v{version:06d}"


def resolve_index_dir(index_dir: str) -> str:
  """The directory that `index_dir` names now, symlinks resolved once (a KB version directory
  of a workspace updated by `dense-entity kb`, or `index_dir` itself).

  Readers call this once and read every file from the result, so an update published while
  they load cannot mix two versions. While the first update migrates a plain WS/index into
  WS/index.kb (a rename, then the symlink), `index_dir` is missing for microseconds: this waits
  up to 2 s for it to reappear.

  Returns:
    The absolute real path, or `index_dir` unchanged when it does not exist.
  """
  deadline = time.monotonic() + _MIGRATION_WAIT_S
  while (not os.path.exists(index_dir) and os.path.isdir(store_dir(index_dir))
         and time.monotonic() < deadline):
    time.sleep(0.01)
  if not os.path.exists(index_dir):
    return index_dir
  return os.path.realpath(index_dir)


def read_manifest(version_dir: str) -> Optional[Dict[str, Any]]:
  """The kb_manifest.json of a version directory, or None: an index never updated, or one
  rebuilt in place since (export.encode_entities through the WS/index symlink rewrites
  indexes.json without the version's `kb_version`); its KB-version files (kb_manifest.json,
  redirects.tsv, alias_counts.tsv) are then stale and not to be read.

  Raises:
    ValueError: naming the file, when it is not a JSON object of this format.
  """
  path = os.path.join(version_dir, MANIFEST_FILE)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      manifest = json.load(f)
  except ValueError as e:
    raise ValueError(f"{path} is not valid JSON: {e}") from e
  if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
    raise ValueError(f"{path} is not a KB manifest of format {MANIFEST_FORMAT!r}")
  try:
    with open(os.path.join(version_dir, SUMMARY_FILE), encoding="utf-8") as f:
      summary = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(summary, dict) or summary.get("kb_version") != manifest.get("kb_version"):
    return None
  return manifest


def kb_file(version_dir: str, name: str, fallback_dir: str) -> str:
  """VERSION/NAME when the version is a KB version holding it (redirects.tsv,
  alias_counts.tsv), else FALLBACK_DIR/NAME (the extraction's)."""
  path = os.path.join(version_dir, name)
  if os.path.isfile(path) and read_manifest(version_dir) is not None:
    return path
  return os.path.join(fallback_dir, name)


def versions(store: str) -> List[int]:
  """The finished version numbers in WS/index.kb, ascending."""
  if not os.path.isdir(store):
    return []
  found = [_VERSION.match(n) for n in os.listdir(store)]
  return sorted(int(m.group(1)) for m in found if m)


@contextlib.contextmanager
def update_lock(store: str) -> Iterator[None]:
  """Holds WS/index.kb/.lock for one update (fcntl.flock, released when the process dies).

  Raises:
    KBUpdateError: another update of this KB holds the lock.
  """
  os.makedirs(store, exist_ok=True)
  with open(os.path.join(store, _LOCK_FILE), "w", encoding="utf-8") as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise KBUpdateError(f"{store}: another KB update is running (it holds "
                          f"{os.path.join(store, _LOCK_FILE)}); wait for it") from None
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def remove_staging(store: str) -> List[str]:
  """Removes staged versions that killed updates left in `store`; returns their names."""
  removed = []
  for name in os.listdir(store):
    if name.startswith(_STAGING_PREFIX) and ".tmp-" in name:
      shutil.rmtree(os.path.join(store, name), ignore_errors=True)
      removed.append(name)
  return removed


def new_staging_dir(store: str, version: int) -> str:
  path = os.path.join(store, f".{version_name(version)}.tmp-{uuid.uuid4().hex[:8]}")
  os.makedirs(path)
  return path


def _switch_symlink(link: str, target: str) -> None:
  """Points the symlink `link` at `target` (relative to the link's directory) atomically."""
  tmp = os.path.join(os.path.dirname(link), f".{os.path.basename(link)}.tmp-"
                     f"{uuid.uuid4().hex[:8]}")
  os.symlink(target, tmp)
  try:
    os.replace(tmp, link)
  except BaseException:
    os.remove(tmp)
    raise


def migrate(index_link: str, serving_link: Optional[str] = None) -> bool:
  """Turns a plain index directory WS/index into version 0 of WS/index.kb (under the lock).

  WS/index is renamed to WS/index.kb/v000000 and replaced by a symlink to it; a plain serving
  model directory `serving_link` (WS/export/serving), when given and present, is moved into the
  version (v000000/serving) and replaced by the symlink '../index/serving', so the serving
  model switches with the index. Nothing is copied.

  Returns:
    True when it migrated, False when WS/index already is a version symlink.

  Raises:
    KBUpdateError: WS/index is missing, or a symlink not into WS/index.kb.
  """
  store = store_dir(index_link)
  if os.path.islink(index_link):
    target = os.path.realpath(index_link)
    if os.path.dirname(target) != os.path.realpath(store):
      raise KBUpdateError(f"{index_link} is a symlink to {target}, not to a version in {store}; "
                          "refusing to update it")
    return False
  if not os.path.isdir(index_link):
    raise KBUpdateError(f"{index_link} does not exist: build the index first "
                        "(python -m export.encode_entities)")
  os.makedirs(store, exist_ok=True)
  first = os.path.join(store, version_name(0))
  if os.path.lexists(first):
    raise KBUpdateError(f"{first} exists beside a plain {index_link}; remove one of them")
  os.rename(index_link, first)
  _switch_symlink(index_link, os.path.relpath(first, os.path.dirname(index_link)))
  if serving_link and os.path.isdir(serving_link) and not os.path.islink(serving_link):
    os.rename(serving_link, os.path.join(first, SERVING_DIR))
    link_to_index_serving(serving_link, index_link)
  return True


def link_to_index_serving(serving_link: str, index_link: str) -> None:
  """Points WS/export/serving at WS/index/serving (relative), replacing a symlink there."""
  target = os.path.relpath(os.path.join(os.path.abspath(index_link), SERVING_DIR),
                           os.path.dirname(os.path.abspath(serving_link)))
  if os.path.lexists(serving_link) and not os.path.islink(serving_link):
    raise KBUpdateError(f"{serving_link} is a directory, not a symlink; refusing to replace it")
  _switch_symlink(serving_link, target)


def publish(index_link: str, staging: str, version: int, keep: int = 2) -> str:
  """Renames a complete staged version to WS/index.kb/vNNNNNN, points WS/index at it
  atomically and removes versions older than the `keep` newest (keep >= 1).

  Returns:
    The version directory.
  """
  store = store_dir(index_link)
  final = os.path.join(store, version_name(version))
  os.rename(staging, final)
  _switch_symlink(index_link, os.path.relpath(final, os.path.dirname(os.path.abspath(
      index_link))))
  for old in versions(store)[:-max(1, keep)]:
    shutil.rmtree(os.path.join(store, version_name(old)), ignore_errors=True)
  return final
