"""Dense entity retrieval (Gillick et al., CoNLL 2019, "DEER") as software people run."""

import glob
import importlib.util
import os
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# The modules compiled with Cython when it and a C compiler are at hand (pyproject.toml's build
# requirements bring Cython): the page parse and what it calls, pure Python with no Beam, run
# once per page or link (issue 17: the extraction's parse 8-10% less CPU). Compiled as they
# are: the same code and results (annotations are not taken as C types), no .pyx; each build
# is used only while its .py is unchanged (dense_entity.common.compiled). Without a C compiler
# the install goes on without them (pure Python, the same results). A module listed here must
# hand Beam no lambda or closure it defines (Beam cannot pickle them compiled).
COMPILED_MODULES = [
    "beam_pipelines.parsers.descriptions",
    "beam_pipelines.parsers.html_article",
    "beam_pipelines.parsers.mentions",
    "beam_pipelines.parsers.mw_tree",
    "beam_pipelines.parsers.namespaces",
    "beam_pipelines.parsers.page_kinds",
    "beam_pipelines.parsers.pages",
    "beam_pipelines.parsers.records",
    "beam_pipelines.parsers.title_lists",
    "beam_pipelines.parsers.wikitext",
    "dense_entity.kb.mention_features",
    "dense_entity.kb.script_ranges",
    "dense_entity.kb.titles",
]
HERE = os.path.dirname(os.path.abspath(__file__))


def _load_compiled():
  """dense_entity/common/compiled.py, the import hook's module (standard library only), loaded
  alone from its file (the package is not installed yet): its digest, sidecar suffix and
  reading of DENSE_ENTITY_PURE_PYTHON are the ones the hook checks against."""
  spec = importlib.util.spec_from_file_location(
      "_dense_entity_compiled", os.path.join(HERE, "dense_entity", "common", "compiled.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


_COMPILED = _load_compiled()
SIDECAR_SUFFIX = _COMPILED.SIDECAR_SUFFIX


CYTHON_BUILD_DIR = os.path.join("build", "cython")


def _source(module: str) -> str:
  return os.path.join(*module.split(".")) + ".py"


def _read(path: str) -> str:
  try:
    with open(path, encoding="ascii") as f:
      return f.read().strip()
  except (OSError, ValueError):
    return ""


def _remove_builds_in_tree() -> None:
  """Removes the compiled builds (and digests) an earlier editable install left beside the
  sources: with DENSE_ENTITY_PURE_PYTHON set at install, none is wanted."""
  for module in COMPILED_MODULES:
    stem = os.path.join(HERE, os.path.splitext(_source(module))[0])
    for path in glob.glob(glob.escape(stem) + ".*.so") + glob.glob(
        glob.escape(stem) + ".*.so" + SIDECAR_SUFFIX):
      os.remove(path)


def _extensions():
  if _COMPILED.pure_python_requested():
    _remove_builds_in_tree()
    return []
  try:
    from Cython.Build import cythonize  # pylint: disable=g-import-not-at-top
  except ImportError:  # only without build isolation (pyproject.toml brings Cython)
    print("dense-entity: Cython not found; building without compiled modules (pure Python)",
          file=sys.stderr)
    return []
  # Each module's digest now, before Cython reads it: the digest written beside its build. A .c
  # made from another version of the source is removed first, so that Cython makes it anew
  # (it goes by timestamps, which a copy or a restore can leave older than the .c).
  digests = {}
  for module in COMPILED_MODULES:
    digests[module] = _COMPILED.source_digest(_source(module))
    c_file = os.path.join(CYTHON_BUILD_DIR, os.path.splitext(_source(module))[0] + ".c")
    if os.path.exists(c_file) and _read(c_file + SIDECAR_SUFFIX) != digests[module]:
      os.remove(c_file)
  extensions = cythonize(
      [Extension(module, [_source(module)]) for module in COMPILED_MODULES],
      build_dir=CYTHON_BUILD_DIR, language_level=3, quiet=True,
      compiler_directives={"annotation_typing": False, "binding": True})
  for extension in extensions:
    extension.optional = True  # a failed compile leaves the module's source (cythonize drops it)
    extension.source_digest = digests[extension.name]
    with open(extension.sources[0] + SIDECAR_SUFFIX, "w", encoding="ascii") as f:
      f.write(extension.source_digest + "\n")  # the source its .c was made from
  return extensions


class BuildExtWithSourceDigests(build_ext):
  """build_ext that writes beside each extension module built the SHA-256 of the .py it was
  compiled from (SIDECAR_SUFFIX): dense_entity.common.compiled imports the extension only
  while the .py matches it. An extension that fails to build is left out (optional: the
  module's source is imported)."""

  def build_extension(self, ext):
    super().build_extension(ext)
    built = self.get_ext_fullpath(ext.name)
    if os.path.exists(built):
      with open(built + SIDECAR_SUFFIX, "w", encoding="ascii") as f:
        f.write(ext.source_digest + "\n")

  def copy_extensions_to_source(self):
    super().copy_extensions_to_source()  # an editable install's (inplace): their digests too
    build_py = self.get_finalized_command("build_py")
    for ext in self.extensions:
      built = os.path.join(self.build_lib, self.get_ext_filename(ext.name))
      package = ext.name.rpartition(".")[0]
      inplace = os.path.join(build_py.get_package_dir(package), os.path.basename(built))
      if os.path.exists(inplace) and os.path.exists(built + SIDECAR_SUFFIX):
        self.copy_file(built + SIDECAR_SUFFIX, inplace + SIDECAR_SUFFIX, level=self.verbose)

  def get_outputs(self):
    outputs = super().get_outputs()
    return outputs + [path + SIDECAR_SUFFIX for path in outputs]

setup(
    name="dense-entity",
    version="0.1.0",
    description="Dense entity retrieval: dual-encoder entity linking over Wikipedia",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["dense_entity", "dense_entity.*", "beam_pipelines",
                                    "beam_pipelines.*", "export", "export.*"]),
    install_requires=[
        "tensorflow==2.20.*",
        "tensorflow-text==2.20.*",
        "scann==1.4.2",
        "apache-beam==2.77.*",
        "google-crc32c>=1.5",  # Beam's TFRecord reader checks record CRCs with it
        "absl-py>=2.1",
        "numpy>=1.26",
        "mwparserfromhell==0.7.*",
        "lxml>=5.2,<7",  # HTML dumps: the article HTML's tree (parsers.html_article)
        "blingfire==0.1.8",
        "gensim==4.4.*",  # its wheel ships the real Wikipedia sample the demo reads
        "bm25s==0.3.*",
        "rdflib>=7.0",
        "tqdm>=4.66",
        "anyascii>=0.3",  # ASCII folding of Latin titles for the KB's matching key
        "matplotlib>=3.8",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5"],
        "bench": ["faiss-cpu>=1.8", "wikiextractor==3.1.*"],
    },
    entry_points={"console_scripts": ["dense-entity=dense_entity.cli:main"]},
    ext_modules=_extensions(),
    cmdclass={"build_ext": BuildExtWithSourceDigests},
)
