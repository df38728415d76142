"""Compiled builds of the hot pure-Python modules, used only while they match their source.

setup.py compiles the modules listed in its COMPILED_MODULES (the wikitext parser and what a page's
parse calls: beam_pipelines.parsers, dense_entity.kb's titles and mention features) with Cython,
as they are (no type declarations: the same code, the interpreter's bytecode loop compiled away),
into extension modules beside their sources (an editable install builds them in place). Python
would import such an extension instead of the .py beside it even after the .py was edited; so
this finder, installed by the packages' __init__, takes a module's extension only when the
sidecar file the build wrote beside it (SIDECAR_SUFFIX: the SHA-256 of the .py it was built from)
matches the .py there now. Otherwise, or with DENSE_ENTITY_PURE_PYTHON=1 in the environment, the
.py is imported: the same results, slower (issue 17: the extraction's parse 8-10% more CPU).
An extension whose .py is gone (a module removed or renamed) is not imported at all. Where no
compiler was at hand when installing, there are no extensions and nothing changes.

Compiled code is not seen by cProfile, pdb or coverage, and its annotations are strings (as
under `from __future__ import annotations`): profile, debug and measure coverage with
DENSE_ENTITY_PURE_PYTHON=1.
"""

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
from typing import Dict, Optional, Tuple

# Set to 1 (or any value but '', 0, false, no, off): import every module from its source.
ENV_PURE_PYTHON = "DENSE_ENTITY_PURE_PYTHON"
# Beside an extension module 'X.cpython-311-x86_64-linux-gnu.so': 'X.cpython-...so' + this, the
# hexadecimal SHA-256 of the X.py it was compiled from (written by setup.py's build_ext).
SIDECAR_SUFFIX = ".source-sha256"
# The top-level packages whose modules may have compiled builds.
PACKAGES = ("dense_entity", "beam_pipelines")

# What import_state() reports for a module.
COMPILED = "compiled"
SOURCE_REQUESTED = "source (DENSE_ENTITY_PURE_PYTHON)"
SOURCE_STALE = "source (its compiled build is of another version of the source)"
SOURCE_NO_SIDECAR = "source (a compiled build without its source digest)"
ORPHAN = "not imported (a compiled build whose source is gone: a module removed or renamed)"

_LOCK = threading.Lock()
_STATES: Dict[str, str] = {}  # module -> one of the above, for modules with an extension
_WARNED = set()


def pure_python_requested() -> bool:
  """Whether DENSE_ENTITY_PURE_PYTHON asks for every module's source."""
  return os.environ.get(ENV_PURE_PYTHON, "").strip().lower() not in ("", "0", "false", "no",
                                                                     "off")


def source_digest(path: str) -> str:
  """Hexadecimal SHA-256 of the file's bytes (OSError if it cannot be read)."""
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def extension_state(extension: str, source: str) -> str:
  """Which of a module's two builds to import: COMPILED when `extension`'s sidecar holds the
  digest of `source`; ORPHAN when `source` does not exist (setup.py installs every source
  beside its build: the module was removed or renamed since it was built); else the reason
  the source is imported (SOURCE_REQUESTED, SOURCE_STALE, SOURCE_NO_SIDECAR)."""
  if not os.path.exists(source):
    return ORPHAN
  if pure_python_requested():
    return SOURCE_REQUESTED
  try:
    with open(extension + SIDECAR_SUFFIX, encoding="ascii") as f:
      built_from = f.read().strip().lower()
  except (OSError, ValueError):
    return SOURCE_NO_SIDECAR
  try:
    current = source_digest(source)
  except OSError:
    return SOURCE_NO_SIDECAR  # unreadable now: the import of the source says why
  return COMPILED if built_from == current else SOURCE_STALE


class CompiledModuleFinder(importlib.abc.MetaPathFinder):
  """A meta path finder for the modules of `packages`: an extension module is taken only in
  the COMPILED state of extension_state (its sidecar matches the .py beside it); an ORPHAN
  raises ModuleNotFoundError (after a warning); else the spec of the .py. Other modules
  get the spec importlib's path finder gives (or None)."""

  def __init__(self, packages: Tuple[str, ...] = PACKAGES):
    self._prefixes = tuple(p + "." for p in packages)

  def find_spec(self, fullname: str, path=None, target=None):
    del target  # unused
    if not fullname.startswith(self._prefixes):
      return None
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
      return spec
    source = os.path.join(os.path.dirname(spec.origin), fullname.rpartition(".")[2] + ".py")
    state = extension_state(spec.origin, source)
    with _LOCK:
      _STATES[fullname] = state
    if state == COMPILED:
      return spec
    if state != SOURCE_REQUESTED and fullname not in _WARNED:
      _WARNED.add(fullname)
      if state == ORPHAN:
        logging.getLogger(__name__).warning(
            "%s: %s has no %s beside it: %s; delete it (or `git clean -fX` the tree)",
            fullname, spec.origin, os.path.basename(source), state)
      else:
        logging.getLogger(__name__).warning(
            "%s: importing %s, %s; `pip install -e .` rebuilds it", fullname, source, state)
    if state == ORPHAN:  # (None would let the path finder after this one import it)
      raise ModuleNotFoundError(f"No module named {fullname!r} ({spec.origin}: {state})",
                                name=fullname)
    return importlib.util.spec_from_file_location(fullname, source)


def install() -> None:
  """Puts a CompiledModuleFinder first on sys.meta_path (once per process)."""
  with _LOCK:
    if not any(isinstance(f, CompiledModuleFinder) for f in sys.meta_path):
      sys.meta_path.insert(0, CompiledModuleFinder())


def import_state(module_name: str) -> Optional[str]:
  """How `module_name` (imported in this process) was imported: COMPILED, a SOURCE_* reason,
  or None when it has no extension module (source only)."""
  with _LOCK:
    return _STATES.get(module_name)


def import_states() -> Dict[str, str]:
  """module -> import_state, of this process's imported modules that have an extension."""
  with _LOCK:
    return dict(_STATES)
