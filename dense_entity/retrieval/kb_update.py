"""KB updates without retraining: add, change and remove entities of a built workspace.

Gillick et al. (2019), section 4.1: entity ids are not features of the entity tower, so an
entity that appeared after training is encoded from its title, first paragraph, categories and
aliases like any other; section 5.2: retrieval searches pre-encoded entities, so an update is
an edit of the encodings and indexes. `update_kb` (the command `dense-entity kb`) applies one
update to a workspace (WORKSPACE.md) as one new KB version (retrieval.kb_versions):

- added and changed entities are encoded with the workspace's exported entity encoder
  (WS/export/entity_encoder): one row for the entity and one name row per alias, as
  retrieval.entity_encodings encodes the KB (`max_names_per_entity` of the encodings);
- rows are removed by moving the last row into the freed one (swap-remove) and new rows are
  appended, in the same order in every index kind, so row ids stay equal across kinds:
  * brute force (and entity_encodings.npy): the matrix is rewritten with its rows moved
    (O(rows x dim) of I/O, no search structure to rebuild);
  * ScaNN AH and AH + tree: the saved searcher is loaded and edited in place with ScaNN's
    `delete` and `upsert` (new rows are quantized with the existing AH codebook and
    assigned to the existing tree leaves, with SOAR spilling; nothing is retrained), then
    serialized. Exception: scann 1.4.2's `delete` corrupts memory on an AH+tree searcher
    with SOAR spilling (index.derive_config's default; found here: `free(): invalid pointer`
    after a few hundred deletes, with float32 or int8 reordering, while AH, a tree without
    SOAR and `upsert` are fine), so an update that removes rows (remove, or update of an
    entity) rebuilds such an index from the new version's rows: as costly as building it
    (12 minutes for all of Wikipedia), where adding entities costs an upsert (88 s for
    100,000 entities there). The tree and codebook drift from the data as rows change: the KB
    manifest counts the rows changed since the index was trained, and `rebalance_advised`
    turns on above REBALANCE_FRACTION of them (`rebalance`, `dense-entity kb rebalance`,
    retrains: as costly as a build of that index);
- a changed entity keeps its entity id; a removed entity's id goes to the last entity
  (titles are swap-removed like rows), so entity_titles.txt, row_entities.npy and every index
  agree;
- the KB's aliases follow: redirects.tsv (alias -> title, read by the alias-table baselines,
  BM25 and title resolution) gains the aliases of added and changed entities and loses those of
  removed ones; alias_counts.tsv (training anchor counts) loses the removed entities;
- the serving SavedModel (when the workspace has one) is re-exported from the new version
  with its k, search kind and NIL calibrator.

The new version is staged, then published atomically (kb_versions.publish); the current one is
never written. Its kb_manifest.json records the KB version, the model fingerprint, the update
and, per index, how it was updated and how long it took. An index built or updated by another
model than the export is refused (rebuild it with export.encode_entities).
"""

import dataclasses
import datetime
import json
import os
import shutil
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from dense_entity.common import fileio
from dense_entity.kb import schema
from dense_entity.kb import titles as titles_lib
from dense_entity.retrieval import entity_encodings
from dense_entity.retrieval import index as index_lib
from dense_entity.retrieval import index_builder
from dense_entity.retrieval import kb_versions
from dense_entity.serving import savedmodel

ADD, UPDATE, REMOVE = "add", "update", "remove"
# Retrains the ScaNN indexes on the current rows (no entity changes; `rebalance`).
REBALANCE = "rebalance"
OPERATIONS = (ADD, UPDATE, REMOVE, REBALANCE)
# Fraction of a ScaNN index's rows changed (deleted + upserted) since it was trained above which
# the manifest advises `dense-entity kb rebalance`. Measured (benchmarks/kb_update_benchmark,
# AH+tree over the 35k-row demo KB, 2,000 held-out mentions, recall@100 against exact search):
# fresh build 0.921; 10% of the rows upserted after training 0.915 (random rows) / 0.918 (new
# topics), 25% 0.915 / 0.912, 50% 0.902 / 0.894: past ~10% the loss passes half a point.
REBALANCE_FRACTION = 0.1
# Rows copied per block when a matrix is rewritten (bounded memory at any KB size).
_COPY_BLOCK_ROWS = 1 << 17


@dataclasses.dataclass
class EntityRecord:
  """One entity of an update's input (`read_entities`).

  Attributes:
    title: the normalized title (kb.titles.normalize_title): the entity id.
    text: its first paragraph ('' when not given).
    categories: category names.
    aliases: other names (redirect titles).
    where: 'PATH:LINE', for messages.
    has_aliases: whether the input gave "aliases" (an update without it keeps the old ones).
    ignored_fields: fields of the input object that are not entity features (not used;
      counted by `ignored_fields`).
  """
  title: str
  text: str = ""
  categories: List[str] = dataclasses.field(default_factory=list)
  aliases: List[str] = dataclasses.field(default_factory=list)
  where: str = ""
  has_aliases: bool = False
  ignored_fields: List[str] = dataclasses.field(default_factory=list)


def ignored_fields(records: Sequence[EntityRecord]) -> Dict[str, int]:
  """{field: number of records} of the input fields that were not used (e.g. "description")."""
  counts: Dict[str, int] = {}
  for record in records:
    for name in record.ignored_fields:
      counts[name] = counts.get(name, 0) + 1
  return dict(sorted(counts.items()))


def _string_list(value: Any, field: str, where: str) -> List[str]:
  if value is None:
    return []
  if isinstance(value, str):
    value = value.split(schema.CATEGORY_SEPARATOR)
  if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
    raise ValueError(f"{where}: \"{field}\" must be a list of strings or a "
                     f"'{schema.CATEGORY_SEPARATOR}'-joined string")
  return [v.strip() for v in value if v.strip()]


def read_entities(path: str) -> List[EntityRecord]:
  """Reads an update's entities: JSONL objects {"title", "text", "categories", "aliases"}
  (only "title" required; lists or '|'-joined strings; other fields are ignored and listed in
  each record's `ignored_fields`), or plain titles, one per line.

  The file is JSONL when its first non-blank line starts with '{'. Titles are normalized as
  the KB's (kb.titles.normalize_title).

  Returns:
    The records in file order.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: naming 'PATH:LINE', for invalid JSON or UTF-8, a missing or empty title, a
      field of the wrong type, a title with a line break, or a title given twice.
  """
  with open(path, "rb") as f:
    first = next((line for line in f if line.strip()), b"")
  records = []
  if first.lstrip().startswith(b"{"):
    for line_number, obj in fileio.read_jsonl_objects(path):
      where = f"{path}:{line_number}"
      ignored = sorted(set(obj) - {"title", "text", "categories", "aliases"})
      raw = obj.get("title")
      if not isinstance(raw, str):
        raise ValueError(f"{where}: a string \"title\" is required")
      text = obj.get("text") or ""
      if not isinstance(text, str):
        raise ValueError(f"{where}: \"text\" must be a string")
      records.append(EntityRecord(
          raw, " ".join(text.split()), _string_list(obj.get("categories"), "categories", where),
          _string_list(obj.get("aliases"), "aliases", where), where, "aliases" in obj,
          ignored))
  else:
    with open(path, "rb") as f:
      for line_number, line in enumerate(f, 1):
        where = f"{path}:{line_number}"
        try:
          raw = line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
          raise ValueError(f"{where}: not UTF-8 text ({e.reason})") from None
        if raw.strip():
          records.append(EntityRecord(raw, where=where))
  seen = {}
  for record in records:
    title = titles_lib.normalize_title(record.title)
    if not title or "\n" in title or "\r" in title or "\t" in title:
      raise ValueError(f"{record.where}: title {record.title!r} is empty or has a tab or line "
                       "break after normalization")
    if title in seen:
      raise ValueError(f"{record.where}: entity {title!r} is given twice (also at "
                       f"{seen[title]})")
    seen[title] = record.where
    record.title = title
    record.aliases = [a for a in dict.fromkeys(titles_lib.normalize_title(a)
                                               for a in record.aliases) if a and a != title]
  if not records:
    raise ValueError(f"{path}: no entity in the file")
  return records


# ------------------------------------------------------------------------------ row plan

@dataclasses.dataclass
class _Plan:
  """What an update does to rows and entities, in the order every index applies it."""
  delete_positions: List[int]   # swap-remove positions, sequential (ScaNN's delete order)
  kept_rows: np.ndarray         # int64 [kept]: old row id of each kept row, in new order
  new_features: Dict[str, List[str]]  # ENTITY_FEATURES of the appended rows
  row_entities: np.ndarray      # int32 [rows']: entity id of every new row
  titles: List[str]             # entity titles of the new version (line i = entity id i)


def _swap_remove(order: np.ndarray, where: np.ndarray, size: int, item: int) -> Tuple[int, int]:
  """Removes `item` from order[:size] by moving order[size - 1] into its place; returns (its
  position, the new size)."""
  p = int(where[item])
  last = int(order[size - 1])
  order[p] = last
  where[last] = p
  where[item] = -1
  return p, size - 1


def _plan(titles: Sequence[str], row_entities: np.ndarray, operation: str,
          records: Sequence[EntityRecord], max_names: int) -> _Plan:
  """Plans rows and entity ids: rows of removed and changed entities are swap-removed, the
  rows of added and changed entities appended (entity row, then its name rows)."""
  entity_of = {t: i for i, t in enumerate(titles)}
  n, num_rows = len(titles), row_entities.shape[0]
  targets = [entity_of[r.title] for r in records] if operation != ADD else []
  drop = np.zeros(n, bool)
  drop[targets] = True
  order, where = np.arange(num_rows), np.arange(num_rows)
  size, positions = num_rows, []
  for row in np.flatnonzero(drop[row_entities]):
    p, size = _swap_remove(order, where, size, int(row))
    positions.append(p)
  kept = order[:size]
  entity_ids = row_entities[kept].astype(np.int64)
  new_titles = list(titles)
  if operation == REMOVE:
    e_order, e_where, e_size = np.arange(n), np.arange(n), n
    for e in targets:
      _, e_size = _swap_remove(e_order, e_where, e_size, e)
    new_titles = [titles[i] for i in e_order[:e_size]]
    entity_ids = e_where[entity_ids]
  features = {k: [] for k in schema.ENTITY_FEATURES}
  appended = []
  if operation != REMOVE:
    for record in records:
      if operation == ADD:
        entity = len(new_titles)
        new_titles.append(record.title)
      else:
        entity = entity_of[record.title]
      categories = schema.CATEGORY_SEPARATOR.join(record.categories)
      aliases = schema.CATEGORY_SEPARATOR.join(record.aliases)
      names = [(record.title, aliases)] + [
          (name, "") for name in entity_encodings.entity_names(record.title, aliases, max_names)]
      for title, row_aliases in names:
        features[schema.ENTITY_TITLE].append(title)
        features[schema.ENTITY_TEXT].append(record.text)
        features[schema.ENTITY_CATEGORIES].append(categories)
        features[schema.ENTITY_ALIASES].append(row_aliases)
        appended.append(entity)
  row_map = np.concatenate([entity_ids, np.asarray(appended, np.int64)]).astype(np.int32)
  return _Plan(positions, kept.astype(np.int64), features, row_map, new_titles)


# ------------------------------------------------------------------------------ writing

def _rewrite_rows(source: str, target: str, kept_rows: np.ndarray, new_rows: np.ndarray) -> None:
  """Writes to `target` the .npy `source` with rows `kept_rows` (in that order) then
  `new_rows`, in the source's dtype, block by block (memory: one block)."""
  old = np.load(source, mmap_mode="r")
  if (new_rows.shape[0] == 0 and kept_rows.shape[0] == old.shape[0]
      and np.array_equal(kept_rows, np.arange(old.shape[0]))):
    del old
    try:  # unchanged: versions are never written, so they can share the file
      os.link(source, target)
    except OSError:
      shutil.copyfile(source, target)
    return
  out = np.lib.format.open_memmap(target, mode="w+", dtype=old.dtype,
                                  shape=(kept_rows.shape[0] + new_rows.shape[0], old.shape[1]))
  for start in range(0, kept_rows.shape[0], _COPY_BLOCK_ROWS):
    block = kept_rows[start:start + _COPY_BLOCK_ROWS]
    if block.size and block[-1] - block[0] == block.size - 1 and np.all(np.diff(block) == 1):
      out[start:start + block.size] = old[block[0]:block[-1] + 1]  # contiguous: one read
    else:
      out[start:start + block.size] = old[np.sort(block)][np.argsort(np.argsort(block))]
  if new_rows.shape[0]:
    out[kept_rows.shape[0]:] = new_rows.astype(old.dtype)
  out.flush()
  del out, old


def _write_index_manifest(manifest: Dict[str, Any], directory: str, num_rows: int,
                          update: Dict[str, Any]) -> None:
  files = {path: size for path, size in index_lib.dir_files(directory).items()
           if path != index_lib.MANIFEST_FILENAME}
  manifest = dict(manifest, num_entities=int(num_rows), files=files, kb_update=update)
  fileio.write_text_atomically(os.path.join(directory, index_lib.MANIFEST_FILENAME),
                               json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _read_json(path: str) -> Dict[str, Any]:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _update_index(kind: str, source_dir: str, target_dir: str, plan: _Plan,
                  new_rows: np.ndarray, history: Dict[str, Any],
                  retrain_from: Optional[str] = None,
                  reason: Optional[str] = None) -> Dict[str, Any]:
  """Writes index `kind` of the new version; returns its entry of the KB manifest.

  With `retrain_from` (an .npy of the new version's rows), a ScaNN index is built afresh from
  it instead of edited, for `reason`."""
  start = time.perf_counter()
  manifest = _read_json(os.path.join(source_dir, index_lib.MANIFEST_FILENAME))
  num_rows = int(plan.row_entities.shape[0])
  os.makedirs(target_dir)
  trained_rows = int(history.get("rows_when_trained", manifest["num_entities"]))
  changed = int(history.get("rows_changed_since_trained", 0))
  if manifest["effective_kind"] != index_lib.BRUTE_FORCE and retrain_from is not None:
    # A fresh build on the current rows (parameters derived from their number, as a build).
    index = index_lib.EntityIndex.build(np.load(retrain_from, mmap_mode="r"), kind,
                                        manifest["model_fingerprint"],
                                        normalize_rows=bool(manifest.get("rows_normalized",
                                                                         True)))
    shutil.rmtree(target_dir)
    manifest = index.save(target_dir)
    del index
    trained_rows, changed = num_rows, 0
    entry = {"strategy": f"rebuilt ({reason}): tree and AH codebook trained on the new "
                         "version's rows"}
  elif manifest["effective_kind"] == index_lib.BRUTE_FORCE:
    _rewrite_rows(os.path.join(source_dir, index_lib.BRUTE_FORCE_FILENAME),
                  os.path.join(target_dir, index_lib.BRUTE_FORCE_FILENAME), plan.kept_rows,
                  new_rows)
    strategy = "rows rewritten (swap-removed rows, appended rows); exact, nothing to retrain"
    entry = {"strategy": strategy}
  else:
    # The saved searcher, edited in place: delete (ScaNN moves the last datapoint into the
    # freed slot, as the plan does) and upsert (appends, quantized with the trained codebook,
    # assigned to the trained leaves).
    config = index_lib.IndexConfig(**manifest["parameters"])
    scann_dir = os.path.join(source_dir, index_lib.SCANN_DIRNAME)
    index_lib.ScannIndex.check_assets(scann_dir, int(manifest["num_entities"]),
                                      int(manifest["dim"]),
                                      os.path.join(source_dir, index_lib.MANIFEST_FILENAME),
                                      config.reorder_dtype)
    searcher = index_lib._import_scann_pybind().load_searcher(  # pylint: disable=protected-access
        os.path.abspath(scann_dir))
    raw = searcher.searcher
    if plan.delete_positions:
      raw.delete(list(plan.delete_positions))
    if new_rows.shape[0]:
      raw.upsert([None] * new_rows.shape[0], np.ascontiguousarray(new_rows, np.float32),
                 min(256, new_rows.shape[0]))
    if raw.size() != num_rows:
      raise RuntimeError(f"ScaNN index {source_dir}: {raw.size()} datapoints after the update, "
                         f"{num_rows} expected")
    out = os.path.join(target_dir, index_lib.SCANN_DIRNAME)
    os.makedirs(out)
    searcher.serialize(out, relative_path=True)
    changed += len(plan.delete_positions) + int(new_rows.shape[0])
    entry = {"strategy": "ScaNN delete + upsert on the trained searcher (tree and AH codebook "
                         "kept; no retraining)"}
    del searcher, raw
  entry.update({
      "seconds": round(time.perf_counter() - start, 3),
      "rows_when_trained": trained_rows,
      "rows_changed_since_trained": changed,
  })
  if manifest["effective_kind"] != index_lib.BRUTE_FORCE:
    entry["rebalance_advised"] = changed > REBALANCE_FRACTION * max(1, trained_rows)
  _write_index_manifest(manifest, target_dir, num_rows,
                        {"kb_version": history["kb_version"], **entry})
  return entry


def _read_tsv(path: str) -> List[List[str]]:
  if not os.path.isfile(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def _write_tsv(path: str, rows: Sequence[Sequence[str]]) -> None:
  fileio.write_text_atomically(path, "".join("\t".join(r) + "\n" for r in rows))


def _update_aliases(source_dir: str, extract_dir: str, target_dir: str, operation: str,
                    records: Sequence[EntityRecord], titles: Sequence[str]) -> Dict[str, int]:
  """Writes redirects.tsv and alias_counts.tsv of the new version; returns counts."""
  def source(name):
    return kb_versions.kb_file(source_dir, name, extract_dir)

  redirects = _read_tsv(source(schema.REDIRECTS_FILE))
  counts = _read_tsv(source(schema.ALIAS_COUNTS_FILE))
  kb = set(titles)
  touched = {r.title for r in records}
  replaced = ({r.title for r in records if r.has_aliases} if operation == UPDATE
              else touched if operation == REMOVE else set())
  before = len(redirects)
  # A redirect whose title is now an entity, or whose target is gone or gets new aliases, goes.
  redirects = [r for r in redirects if len(r) >= 2 and r[1] not in replaced and r[0] not in kb]
  added = 0
  if operation != REMOVE:
    have = {r[0] for r in redirects}
    for record in records:
      for alias in record.aliases:
        if alias not in kb and alias not in have:
          redirects.append([alias, record.title])
          have.add(alias)
          added += 1
  redirects.sort()
  counts_before = len(counts)
  if operation == REMOVE:
    counts = [r for r in counts if len(r) < 2 or r[1] not in touched]
  _write_tsv(os.path.join(target_dir, schema.REDIRECTS_FILE), redirects)
  _write_tsv(os.path.join(target_dir, schema.ALIAS_COUNTS_FILE), counts)
  return {"redirects": len(redirects), "redirects_added": added,
          "redirects_removed": before - (len(redirects) - added),
          "alias_counts_removed": counts_before - len(counts)}


# ------------------------------------------------------------------------------ the update

def _check_records(operation: str, records: Sequence[EntityRecord], titles: Sequence[str]):
  kb = set(titles)
  if operation == ADD:
    present = [r for r in records if r.title in kb]
    if present:
      raise ValueError(f"{present[0].where}: entity {present[0].title!r} is already in the KB "
                       f"({len(present)} of {len(records)} are); use `kb update` to change it")
  else:
    missing = [r for r in records if r.title not in kb]
    if missing:
      raise ValueError(f"{missing[0].where}: entity {missing[0].title!r} is not in the KB "
                       f"({len(missing)} of {len(records)} are not); nothing was changed")
  if operation == REMOVE and len(records) >= len(titles):
    raise ValueError(f"removing all {len(titles)} entities would leave an empty KB")


def _index_kinds(version_dir: str) -> List[str]:
  return [k for k in index_lib.KINDS
          if os.path.isfile(os.path.join(version_dir, k, index_lib.MANIFEST_FILENAME))]


def _check_fingerprints(version_dir: str, kinds: Sequence[str], fingerprint: str,
                        kb_manifest: Optional[Dict[str, Any]]) -> None:
  """Raises ValueError when an index or the KB was built or updated by another model."""
  for kind in kinds:
    path = os.path.join(version_dir, kind, index_lib.MANIFEST_FILENAME)
    built = _read_json(path).get("model_fingerprint")
    if built != fingerprint:
      raise ValueError(f"{path}: the index was built by model {built!r}, the export is model "
                       f"{fingerprint!r}; an update would mix two models' encodings. Rebuild "
                       "the index with export.encode_entities")
  if kb_manifest and kb_manifest.get("model_fingerprint") != fingerprint:
    raise ValueError(f"{os.path.join(version_dir, kb_versions.MANIFEST_FILE)}: KB version "
                     f"{kb_manifest.get('kb_version')} was updated by model "
                     f"{kb_manifest.get('model_fingerprint')!r}, the export is model "
                     f"{fingerprint!r}; rebuild the index with export.encode_entities")


def _max_names(version_dir: str) -> int:
  path = os.path.join(version_dir, entity_encodings.ENCODINGS_MANIFEST)
  if os.path.isfile(path):
    return int(_read_json(path).get("max_names_per_entity",
                                    entity_encodings.DEFAULT_MAX_NAMES_PER_ENTITY))
  return entity_encodings.DEFAULT_MAX_NAMES_PER_ENTITY


def update_kb(workspace: str, operation: str, records: Sequence[EntityRecord],
              keep_versions: int = 2, serving: bool = True, batch_size: int = 1024,
              step: Optional[Callable[[str], None]] = None,
              entity_encoder: Optional[Callable[..., np.ndarray]] = None) -> Dict[str, Any]:
  """Applies one update to the KB of `workspace` as a new, atomically published version.

  Args:
    workspace: a workspace root with WS/export (export_manifest.json) and WS/index (a built
      index, or a KB version symlink of an earlier update).
    operation: 'add' (records not in the KB), 'update' (records in the KB: re-encoded from
      the given fields; aliases kept unless given), 'remove' (records in the KB; only titles
      are read) or 'rebalance' (no records; see `rebalance`).
    records: from `read_entities`.
    keep_versions: finished versions kept (the new one included), >= 1.
    serving: re-export the serving SavedModel into the new version when the workspace has
      one (WS/export/serving or a version's serving/).
    batch_size: entities per encoder call.
    step: called with the name of each finished step ('encoded', 'indexes', 'serving',
      'staged'); an exception from it aborts the update (the current version stays).
    entity_encoder: the loaded WS/export/entity_encoder (savedmodel.load_encoder), for a
      process that updates many times; None loads it when there is something to encode.

  Returns:
    The new version's kb_manifest.json.

  Raises:
    FileNotFoundError: no export or no index in the workspace.
    ValueError: an unknown operation, records that do not fit it (added entity already in the
      KB, changed or removed one missing: the message names the input line), an index built
      or updated by another model than the export, or another update holding the lock
      (kb_versions.KBUpdateError).
  """
  if operation not in OPERATIONS:
    raise ValueError(f"unknown KB operation {operation!r}; expected one of {OPERATIONS}")
  if keep_versions < 1:
    raise ValueError(f"keep_versions must be >= 1, got {keep_versions}")
  started = time.perf_counter()
  export_dir = os.path.join(workspace, "export")
  index_link = os.path.join(workspace, "index")
  serving_link = os.path.join(export_dir, kb_versions.SERVING_DIR)
  export_manifest = savedmodel.read_manifest(export_dir)
  fingerprint, dim = export_manifest["model_fingerprint"], int(export_manifest["encoding_dim"])
  if not os.path.isfile(os.path.join(index_link, index_lib.TITLES_FILENAME)):
    raise FileNotFoundError(f"{index_link}: no {index_lib.TITLES_FILENAME}; build the index "
                            "first (python -m export.encode_entities)")
  store = kb_versions.store_dir(index_link)
  with kb_versions.update_lock(store):
    kb_versions.remove_staging(store)
    current = kb_versions.resolve_index_dir(index_link)
    kinds = _index_kinds(current)
    if not kinds:
      raise FileNotFoundError(f"{current}: no index ({', '.join(index_lib.KINDS)})")
    kb_manifest = kb_versions.read_manifest(current)
    _check_fingerprints(current, kinds, fingerprint, kb_manifest)
    titles = index_builder.read_titles(os.path.join(current, index_lib.TITLES_FILENAME))
    row_entities = index_lib.read_row_entities(current)
    if row_entities is None:
      row_entities = np.arange(len(titles), dtype=np.int32)
    if operation != REBALANCE:
      _check_records(operation, records, titles)
    # Checks passed: from here on the workspace may be migrated to versions.
    kb_versions.migrate(index_link, serving_link)
    current = kb_versions.resolve_index_dir(index_link)
    # A serving model directory at WS/export/serving in a workspace already versioned (what
    # export.serving wrote over the symlink before round 25, which updates then left stale):
    # its k, search and calibrator are the newest, the re-export takes them, and the
    # directory gives way to the symlink once the new version is published.
    exported_serving = (serving_link if os.path.isdir(serving_link)
                        and not os.path.islink(serving_link) and os.path.isfile(
                            os.path.join(serving_link, "serving_manifest.json")) else None)
    version = (kb_manifest["kb_version"] if kb_manifest else 0) + 1
    version = max([version] + [v + 1 for v in kb_versions.versions(store)])
    plan = _plan(titles, row_entities, ADD if operation == REBALANCE else operation, records,
                 _max_names(current))
    read_seconds = time.perf_counter() - started
    new_rows = np.zeros((0, dim), np.float32)
    num_new = len(plan.new_features[schema.ENTITY_TITLE])
    t0 = time.perf_counter()
    if num_new:
      encoder = entity_encoder or savedmodel.load_encoder(
          os.path.join(export_dir, savedmodel.ENTITY_ENCODER_DIR))
      new_rows = encoder(plan.new_features, batch_size=batch_size)
    encode_seconds = time.perf_counter() - t0
    if step:
      step("encoded")
    staging = kb_versions.new_staging_dir(store, version)
    try:
      manifest = _stage(current, staging, workspace, operation, records, plan, new_rows, kinds,
                        fingerprint, version, kb_manifest, serving, step,
                        serving_settings=exported_serving)
      manifest["seconds"] = dict(manifest.pop("_seconds"), read=round(read_seconds, 3),
                                 encode=round(encode_seconds, 3),
                                 total=round(time.perf_counter() - started, 3))
      fileio.write_text_atomically(os.path.join(staging, kb_versions.MANIFEST_FILE),
                                   json.dumps(manifest, indent=2, sort_keys=True) + "\n")
      if step:
        step("staged")
      kb_versions.publish(index_link, staging, version, keep_versions)
    except BaseException:
      shutil.rmtree(staging, ignore_errors=True)
      raise
    if os.path.isdir(os.path.join(index_link, kb_versions.SERVING_DIR)) and (
        not os.path.lexists(serving_link) or os.path.islink(serving_link)
        or (exported_serving and manifest.get("serving"))):
      aside = None
      if exported_serving:  # the directory found above (the condition's last case)
        aside = f"{serving_link}.old-{uuid.uuid4().hex[:8]}"
        os.rename(serving_link, aside)
      kb_versions.link_to_index_serving(serving_link, index_link)
      if aside:
        shutil.rmtree(aside, ignore_errors=True)
  return manifest


def _stage(current, staging, workspace, operation, records, plan, new_rows, kinds, fingerprint,
           version, kb_manifest, serving, step,
           serving_settings: Optional[str] = None) -> Dict[str, Any]:
  """Writes every file of the new version into `staging`; returns its KB manifest (unwritten).
  The serving model is re-exported with the settings of `serving_settings` (a serving model
  directory) or else of the current version's."""
  fileio.write_text_atomically(os.path.join(staging, index_lib.TITLES_FILENAME),
                               "".join(t + "\n" for t in plan.titles))
  with open(os.path.join(staging, index_lib.ROW_ENTITIES_FILENAME), "wb") as f:
    np.save(f, plan.row_entities)
  history = (kb_manifest or {}).get("indexes", {})
  num_rows = int(plan.row_entities.shape[0])
  seconds = {}
  t0 = time.perf_counter()
  encodings_path = os.path.join(current, entity_encodings.ENCODINGS_FILE)
  if os.path.isfile(encodings_path):
    _rewrite_rows(encodings_path, os.path.join(staging, entity_encodings.ENCODINGS_FILE),
                  plan.kept_rows, new_rows)
  indexes = {}
  for kind in sorted(kinds, key=lambda k: k != index_lib.BRUTE_FORCE):  # brute force first
    retrain_from, reason = None, None
    built = _read_json(os.path.join(current, kind, index_lib.MANIFEST_FILENAME))
    scann = built["effective_kind"] != index_lib.BRUTE_FORCE
    if operation == REBALANCE and scann:
      retrain_from, reason = _rows_file(staging), "rebalance"
    elif scann and plan.delete_positions and _has_soar(built):
      retrain_from = _rows_file(staging)
      reason = ("rows removed from an AH+tree index with SOAR spilling: scann 1.4.2's delete "
                "corrupts memory there (free(): invalid pointer), so the index is rebuilt")
    indexes[kind] = _update_index(kind, os.path.join(current, kind),
                                  os.path.join(staging, kind), plan, new_rows,
                                  dict(history.get(kind, {}), kb_version=version),
                                  retrain_from, reason)
  encodings_manifest = os.path.join(current, entity_encodings.ENCODINGS_MANIFEST)
  if os.path.isfile(encodings_manifest):
    fileio.write_text_atomically(
        os.path.join(staging, entity_encodings.ENCODINGS_MANIFEST),
        json.dumps(dict(_read_json(encodings_manifest), num_entities=len(plan.titles),
                        num_rows=num_rows, kb_version=version), indent=2, sort_keys=True)
        + "\n")
  seconds["entity_encodings_npy"] = round(time.perf_counter() - t0 - sum(
      e["seconds"] for e in indexes.values()), 3)
  t0 = time.perf_counter()
  aliases = _update_aliases(current, os.path.join(workspace, "extract"), staging, operation,
                            records, plan.titles)
  seconds["aliases"] = round(time.perf_counter() - t0, 3)
  summary_path = os.path.join(current, index_builder.SUMMARY_FILENAME)
  summary = _read_json(summary_path) if os.path.isfile(summary_path) else {}
  summary.update(num_entities=len(plan.titles), num_rows=num_rows, model_fingerprint=fingerprint,
                 titles=os.path.join(os.path.dirname(staging), kb_versions.version_name(version),
                                     index_lib.TITLES_FILENAME), kb_version=version)
  for kind, entry in indexes.items():
    summary.setdefault("indexes", {}).setdefault(kind, {})["kb_update"] = entry
  fileio.write_text_atomically(os.path.join(staging, index_builder.SUMMARY_FILENAME),
                               json.dumps(summary, indent=2, sort_keys=True) + "\n")
  if step:
    step("indexes")
  serving_entry = None
  old_serving = serving_settings or os.path.join(current, kb_versions.SERVING_DIR)
  if serving and os.path.isfile(os.path.join(old_serving, "serving_manifest.json")):
    serving_entry = _export_serving(os.path.join(workspace, "export"), staging, old_serving,
                                    version)
    if step:
      step("serving")
  counts = {ADD: 0, UPDATE: 0, REMOVE: 0}
  if operation in counts:
    counts[operation] = len(records)
  return {
      "format": kb_versions.MANIFEST_FORMAT,
      "kb_version": version,
      "parent_version": (kb_manifest or {}).get("kb_version", 0),
      "model_fingerprint": fingerprint,
      "num_entities": len(plan.titles),
      "num_rows": num_rows,
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "update": {"operation": operation, "entities": counts,
                 "rows_removed": len(plan.delete_positions), "rows_added": int(new_rows.shape[0]),
                 "input": sorted({r.where.rsplit(":", 1)[0] for r in records})},
      "indexes": indexes,
      "aliases": aliases,
      "serving": serving_entry,
      "_seconds": seconds,
  }


def _rows_file(staging: str) -> str:
  """The new version's rows (its brute-force encodings or entity_encodings.npy, both written
  before the ScaNN indexes) for a ScaNN build."""
  for path in (os.path.join(staging, entity_encodings.ENCODINGS_FILE),
               os.path.join(staging, index_lib.BRUTE_FORCE, index_lib.BRUTE_FORCE_FILENAME)):
    if os.path.isfile(path):
      return path
  raise FileNotFoundError(f"{staging}: neither a brute_force index nor "
                          f"{entity_encodings.ENCODINGS_FILE}: nothing to build ScaNN from")


def _has_soar(manifest: Dict[str, Any]) -> bool:
  """Whether a saved index (its index_manifest.json) is an AH+tree one with SOAR spilling."""
  return (manifest["effective_kind"] == index_lib.AH_TREE
          and manifest["parameters"].get("soar_lambda") is not None)


def _export_serving(export_dir: str, staging: str, old_serving: str, version: int):
  """Re-exports the serving SavedModel (same k, search and NIL calibrator) into the version."""
  from dense_entity.retrieval import serving_model  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  old = serving_model.read_manifest(old_serving)
  calibrator = old.get("nil_calibrator")
  calibrator_path = None
  if calibrator:
    calibrator_path = os.path.join(staging, ".nil_calibrator.json")
    fileio.write_text_atomically(calibrator_path, json.dumps(calibrator))
  out = os.path.join(staging, kb_versions.SERVING_DIR)
  manifest = serving_model.export_serving_model(export_dir, staging, out, int(old["k"]),
                                                search=old.get("search", "auto"),
                                                nil_calibrator=calibrator_path)
  if calibrator_path:
    os.remove(calibrator_path)
  # Paths into the staging directory name the version directory it becomes.
  final = os.path.join(os.path.dirname(staging), kb_versions.version_name(version))
  for key in ("entity_source", "titles"):
    if isinstance(manifest.get(key), str):
      manifest[key] = manifest[key].replace(os.path.abspath(staging), final)
  manifest["kb_version"] = version
  fileio.write_text_atomically(os.path.join(out, serving_model.MANIFEST_FILE),
                               json.dumps(manifest, indent=2, sort_keys=True) + "\n")
  return {"k": manifest["k"], "search": manifest["search"],
          "seconds": round(time.perf_counter() - start, 3)}


def rebalance(workspace: str, keep_versions: int = 2, serving: bool = True,
              step: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
  """Retrains the ScaNN indexes of the current KB on its current rows, as a new version.

  After many updates the tree leaves and AH codebook, trained on the rows of the first build,
  fit the rows less well (kb_update docstring; `rebalance_advised` in the KB manifest). This
  builds each ScaNN index afresh from the brute-force rows (as costly as building that index:
  12 minutes for AH + tree over the 5.7M rows of all of Wikipedia); entities, row ids, titles
  and the brute-force index are unchanged (shared by hard links).

  Returns:
    The new version's kb_manifest.json.

  Raises:
    As `update_kb`.
  """
  return update_kb(workspace, REBALANCE, [], keep_versions=keep_versions, serving=serving,
                   step=step)
