"""The import rule of README's Architecture section, checked on the source tree.

Library packages are layered; a module imports only its own package and the layers below it,
never an entry point; no imports form a circle (function-level imports count too). The layers,
bottom to top:

  dense_entity.common < dense_entity.kb < dense_entity.modeling
      < dense_entity.training, dense_entity.serving < dense_entity.retrieval
      < dense_entity.evaluation < beam_pipelines.dumps < beam_pipelines.parsers
      < beam_pipelines.pipelines
  entry points: dense_entity/*.py (cli, demo, train, evaluate, context_probes),
      beam_pipelines/*.py (extract_wikipedia, mine_hard_negatives), export/*.py, benchmarks/
"""

import ast
import os

import pytest

from tests import testutil

LAYERS = {
    "dense_entity.common": 0,
    "dense_entity.kb": 1,
    "dense_entity.modeling": 2,
    "dense_entity.training": 3,
    "dense_entity.serving": 3,
    "dense_entity.retrieval": 4,
    "dense_entity.evaluation": 5,
    "beam_pipelines.dumps": 6,
    "beam_pipelines.parsers": 7,
    "beam_pipelines.pipelines": 8,
}
TOP_PACKAGES = ("dense_entity", "beam_pipelines", "export", "benchmarks")
# What a package root may import: the import hook that picks a module's compiled build or its
# source (standard library only), installed before any module it concerns is imported.
ROOT_IMPORTS = ("dense_entity.common.compiled",)
# Entry points that dispatch to other entry points (the `dense-entity` command's subcommands).
DISPATCHERS = ("dense_entity.cli",)


def _modules(root: str):
  """{dotted module name: path} of every .py file under the top-level packages."""
  out = {}
  for top in TOP_PACKAGES:
    for directory, _, files in os.walk(os.path.join(root, top)):
      for name in files:
        if name.endswith(".py"):
          path = os.path.join(directory, name)
          dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
          out[dotted.removesuffix(".__init__")] = path
  return out


def _imports(path: str, module: str, modules) -> set:
  """Project modules imported anywhere in the file (module level or inside functions)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
      names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
               for alias in node.names]
    else:
      continue
    for name in names:
      while name and name not in modules:
        name = name.rpartition(".")[0]
      if name and name != module:
        found.add(name)
  return found


def layer_of(module: str):
  """(layer package, rank) of a library module; None for entry points and package roots."""
  for package, rank in LAYERS.items():
    if module == package or module.startswith(package + "."):
      return package, rank
  return None


def check_layout(root: str):
  """Returns a list of violations of the import rule, as readable strings."""
  modules = _modules(root)
  graph = {m: _imports(p, m, modules) for m, p in modules.items()}
  problems = []
  for module, imported in sorted(graph.items()):
    mine = layer_of(module)
    for other in sorted(imported):
      theirs = layer_of(other)
      if other in TOP_PACKAGES:
        continue
      if mine is None:  # an entry point or a top-level package's __init__
        if module in TOP_PACKAGES and other not in ROOT_IMPORTS:
          problems.append(f"{module} (a package root) imports {other}")
        elif (theirs is None and not module.startswith("benchmarks")
              and module not in DISPATCHERS):
          problems.append(f"entry point {module} imports entry point {other}")
        continue
      if theirs is None:
        problems.append(f"library module {module} imports entry point {other}")
      elif theirs[0] != mine[0] and theirs[1] >= mine[1]:
        problems.append(f"{module} ({mine[0]}) imports {other} ({theirs[0]}), "
                        "which is not a lower layer")
  # Circles: depth-first search over the whole graph.
  state, stack = {}, []

  def visit(m):
    state[m] = 1
    stack.append(m)
    for n in sorted(graph.get(m, ())):
      if state.get(n) == 1:
        problems.append("import circle: " + " -> ".join(stack[stack.index(n):] + [n]))
      elif n not in state:
        visit(n)
    stack.pop()
    state[m] = 2

  for m in sorted(graph):
    if m not in state:
      visit(m)
  return problems


def test_project_follows_the_import_rule():
  problems = check_layout(testutil.REPO_ROOT)
  assert not problems, "\n".join(problems)


def test_every_library_module_is_in_a_layer():
  modules = _modules(testutil.REPO_ROOT)
  for name in modules:
    top, _, rest = name.partition(".")
    if top in ("dense_entity", "beam_pipelines") and "." in rest:
      assert layer_of(name), f"{name} is in a package that has no layer in LAYERS"


def test_package_docstrings_say_what_they_hold_and_may_import():
  for package in LAYERS:
    path = os.path.join(testutil.REPO_ROOT, *package.split("."), "__init__.py")
    with open(path, encoding="utf-8") as f:
      doc = ast.get_docstring(ast.parse(f.read()))
    assert doc and "May import" in doc, f"{path}: docstring must say what it may import"


def _write(root, relpath, text=""):
  path = os.path.join(root, relpath)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


@pytest.mark.parametrize("files, expected", [
    # kb importing modeling: an upward import, even inside a function.
    ({"dense_entity/kb/titles.py": "def f():\n  from dense_entity.modeling import layers\n",
      "dense_entity/modeling/layers.py": ""},
     "dense_entity.kb.titles (dense_entity.kb) imports dense_entity.modeling.layers"),
    # training and serving share a rank: neither may import the other.
    ({"dense_entity/training/trainer.py": "from dense_entity.serving import savedmodel\n",
      "dense_entity/serving/savedmodel.py": ""},
     "dense_entity.training.trainer (dense_entity.training) imports "
     "dense_entity.serving.savedmodel"),
    # a library module importing an entry point.
    ({"dense_entity/retrieval/retriever.py": "import export.serving\n",
      "export/serving.py": ""},
     "library module dense_entity.retrieval.retriever imports entry point export.serving"),
    # an entry point importing another one (only the CLI dispatches).
    ({"dense_entity/demo.py": "from dense_entity import evaluate\n",
      "dense_entity/evaluate.py": ""},
     "entry point dense_entity.demo imports entry point dense_entity.evaluate"),
    # a circle inside one package.
    ({"dense_entity/kb/a.py": "from dense_entity.kb import b\n",
      "dense_entity/kb/b.py": "from dense_entity.kb import a\n"},
     "import circle: dense_entity.kb.a -> dense_entity.kb.b -> dense_entity.kb.a"),
])
def test_the_check_catches_upward_imports_and_circles(tmp_path, files, expected):
  for package in ("dense_entity", "export", "beam_pipelines", "benchmarks"):
    _write(str(tmp_path), f"{package}/__init__.py")
  for package in LAYERS:
    _write(str(tmp_path), package.replace(".", "/") + "/__init__.py")
  for relpath, text in files.items():
    _write(str(tmp_path), relpath, text)
  problems = check_layout(str(tmp_path))
  assert any(expected in p for p in problems), problems


def test_the_check_accepts_downward_imports(tmp_path):
  for package in ("dense_entity", "export", "beam_pipelines", "benchmarks"):
    _write(str(tmp_path), f"{package}/__init__.py")
  for package in LAYERS:
    _write(str(tmp_path), package.replace(".", "/") + "/__init__.py")
  _write(str(tmp_path), "dense_entity/kb/schema.py", "import os\n")
  _write(str(tmp_path), "dense_entity/modeling/models.py",
         "from dense_entity.kb import schema\nfrom . import layers\n")
  _write(str(tmp_path), "dense_entity/modeling/layers.py", "")
  _write(str(tmp_path), "export/export_model.py", "from dense_entity.modeling import models\n")
  _write(str(tmp_path), "dense_entity/cli.py", "def f():\n  from dense_entity import demo\n")
  _write(str(tmp_path), "dense_entity/demo.py", "from dense_entity.kb import schema\n")
  assert check_layout(str(tmp_path)) == []
