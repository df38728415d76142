"""compiled: a module's compiled build is imported only while it was built from the .py beside it
(bug kind: an extension module left from an earlier build shadows the source a developer
edited, so the edit silently does nothing), and the compiled parse gives what the source gives."""

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from dense_entity.common import compiled
from tests import testutil

_EXT = importlib.machinery.EXTENSION_SUFFIXES[0]  # '.cpython-311-x86_64-linux-gnu.so'


def _package(tmp_path, sidecar="match", with_source=True):
  """tmp_path/fakepkg: mod.py, a stand-in extension module (never loaded: only specs are
  asked for) and its sidecar: the digest of mod.py ('match'), another digest, or none."""
  pkg = tmp_path / "fakepkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  source = b"VALUE = 'from source'\n"
  if with_source:
    (pkg / "mod.py").write_bytes(source)
  (pkg / ("mod" + _EXT)).write_bytes(b"\x7fELF not really")
  if sidecar == "match":
    (pkg / ("mod" + _EXT + compiled.SIDECAR_SUFFIX)).write_text(
        hashlib.sha256(source).hexdigest() + "\n")
  elif sidecar == "other":
    (pkg / ("mod" + _EXT + compiled.SIDECAR_SUFFIX)).write_text(
        hashlib.sha256(b"VALUE = 'older'\n").hexdigest() + "\n")
  (pkg / "plain.py").write_text("VALUE = 1\n")
  return pkg


def _spec(pkg, name="fakepkg.mod"):
  return compiled.CompiledModuleFinder(packages=("fakepkg",)).find_spec(name, [str(pkg)])


def test_the_extension_is_taken_while_its_sidecar_matches_the_source(tmp_path, monkeypatch):
  monkeypatch.delenv(compiled.ENV_PURE_PYTHON, raising=False)
  pkg = _package(tmp_path)
  spec = _spec(pkg)
  assert isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
  assert spec.origin == str(pkg / ("mod" + _EXT))
  assert compiled.import_state("fakepkg.mod") == compiled.COMPILED


def test_an_edited_source_is_imported_instead_of_the_older_build(tmp_path, monkeypatch):
  monkeypatch.delenv(compiled.ENV_PURE_PYTHON, raising=False)
  pkg = _package(tmp_path)
  (pkg / "mod.py").write_text("VALUE = 'edited'\n")
  spec = _spec(pkg)
  assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
  assert spec.origin == str(pkg / "mod.py")
  assert compiled.import_state("fakepkg.mod") == compiled.SOURCE_STALE
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  assert module.VALUE == "edited"


@pytest.mark.parametrize("sidecar, state", [("other", compiled.SOURCE_STALE),
                                            (None, compiled.SOURCE_NO_SIDECAR)])
def test_a_build_of_another_source_or_without_digest_is_not_taken(tmp_path, monkeypatch,
                                                                   sidecar, state):
  monkeypatch.delenv(compiled.ENV_PURE_PYTHON, raising=False)
  spec = _spec(_package(tmp_path, sidecar=sidecar))
  assert spec.origin.endswith("mod.py")
  assert compiled.extension_state(str(tmp_path / "fakepkg" / ("mod" + _EXT)),
                                  str(tmp_path / "fakepkg" / "mod.py")) == state


def test_the_environment_asks_for_the_sources(tmp_path, monkeypatch):
  monkeypatch.setenv(compiled.ENV_PURE_PYTHON, "1")
  spec = _spec(_package(tmp_path))
  assert spec.origin.endswith("mod.py")
  assert compiled.import_state("fakepkg.mod") == compiled.SOURCE_REQUESTED
  monkeypatch.setenv(compiled.ENV_PURE_PYTHON, "0")
  assert _spec(tmp_path / "fakepkg").origin.endswith(_EXT)


@pytest.mark.parametrize("pure", ["", "1"])
def test_a_build_whose_source_is_gone_is_not_imported(tmp_path, monkeypatch, pure):
  # A module renamed or removed: its old build in the tree would still import, and a broken
  # import would go unnoticed until another machine.
  monkeypatch.setenv(compiled.ENV_PURE_PYTHON, pure)
  pkg = _package(tmp_path, with_source=False)
  with pytest.raises(ModuleNotFoundError, match="fakepkg.mod"):
    _spec(pkg)
  assert compiled.import_state("fakepkg.mod") == compiled.ORPHAN


@pytest.mark.parametrize("value, pure", [("1", True), ("yes", True), ("0", False),
                                         ("false", False), (" Off ", False), ("", False)])
def test_the_environment_variable_values(monkeypatch, value, pure):
  monkeypatch.setenv(compiled.ENV_PURE_PYTHON, value)
  assert compiled.pure_python_requested() is pure


def test_a_digest_in_upper_case_or_with_a_line_end_still_matches(tmp_path, monkeypatch):
  monkeypatch.delenv(compiled.ENV_PURE_PYTHON, raising=False)
  pkg = _package(tmp_path)
  sidecar = pkg / ("mod" + _EXT + compiled.SIDECAR_SUFFIX)
  sidecar.write_text(sidecar.read_text().strip().upper() + "\r\n")
  assert _spec(pkg).origin.endswith(_EXT)


def test_other_modules_are_left_to_the_path_finder(tmp_path):
  pkg = _package(tmp_path)
  assert _spec(pkg, "fakepkg.plain").origin == str(pkg / "plain.py")
  assert _spec(pkg, "fakepkg.missing") is None
  finder = compiled.CompiledModuleFinder(packages=("fakepkg",))
  assert finder.find_spec("otherpkg.mod", [str(pkg)]) is None
  assert any(isinstance(f, compiled.CompiledModuleFinder) for f in sys.meta_path)


# Parses real pages (English, Japanese and Greek wikitext, English HTML records) and prints the
# digest of every result with how each parse module was imported.
_PARSE = r"""
import hashlib, itertools, json, pickle, sys
from beam_pipelines.dumps import html_dump, xml_dump
from beam_pipelines.parsers import pages
from dense_entity.common import compiled
parser = pages.PageParser({}, 20_000_000)
digest = hashlib.sha256()
n = 0
for path, limit in json.loads(sys.argv[1]):
  read = html_dump.iter_pages if path.endswith(".ndjson.gz") else xml_dump.iter_pages
  batch = list(itertools.islice(read(path, on_error=lambda e: None), limit))
  results, groups = pages.parse_batch(parser, batch)
  digest.update(pickle.dumps((results, groups), protocol=4))
  n += len(batch)
print(json.dumps({"digest": digest.hexdigest(), "pages": n,
                  "states": compiled.import_states()}))
"""
_INPUTS = [(testutil.shared_data("enwiki", "wikipedia2vec-sample.xml.bz2"), 10_000),
           (testutil.shared_data("otherwiki", "jawiki-truncated-100k.xml.bz2"), 150),
           (testutil.shared_data("otherwiki", "elwiki-truncated-100k.xml.bz2"), 150),
           (testutil.shared_data("html", "enwiki-2014-render-html.ndjson.gz"), 40)]


def _parse_in_subprocess(pure: bool):
  env = dict(os.environ)
  env.pop(compiled.ENV_PURE_PYTHON, None)
  if pure:
    env[compiled.ENV_PURE_PYTHON] = "1"
  out = subprocess.run([sys.executable, "-c", _PARSE, json.dumps(_INPUTS)], env=env,
                       cwd=testutil.REPO_ROOT, capture_output=True, text=True, check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_compiled_parse_gives_what_the_source_gives_on_real_pages():
  source = _parse_in_subprocess(pure=True)
  default = _parse_in_subprocess(pure=False)
  assert source["pages"] == default["pages"] > 300
  assert set(source["states"].values()) <= {compiled.SOURCE_REQUESTED}
  assert default["digest"] == source["digest"]
  # Where this checkout has fresh compiled builds (an install with Cython and a compiler, as
  # README's), the default run took them.
  wikitext = os.path.join(testutil.REPO_ROOT, "beam_pipelines", "parsers", "wikitext")
  if compiled.extension_state(wikitext + _EXT, wikitext + ".py") == compiled.COMPILED:
    assert default["states"]["beam_pipelines.parsers.wikitext"] == compiled.COMPILED
    assert default["states"]["beam_pipelines.parsers.mw_tree"] == compiled.COMPILED
