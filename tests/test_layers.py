"""The source folders are layers, lowest first; a module imports only from its own layer or
lower ones.

* ``transform_lib``: transform-dialect primitives; imports no other tdsched layer;
* ``targets``: compiling, running and checking through IREE (and the workload model);
* ``recipes``: content (workloads, models, lowering, shipped recipes);
* ``schedules``: the DSL, the commands and sweeps, on top of everything.

Inside ``schedules`` the folders are layers too (:data:`SCHEDULES_FOLDERS`): ``base``,
``dsl``, ``frontends``, ``compile``, ``measure``, ``sweep``, then ``regress`` and ``tune``,
then ``cli`` on top; no module lies outside them. And no module imports in a circle, even
within one folder.

Modules are parsed, not imported, so a leak is found even in code no test runs, including
imports inside functions and ``if TYPE_CHECKING:`` blocks. Shipped Python recipe files
(``recipes/*.py`` other than ``__init__.py``) are recipe documents written with the
top layer's Python API and loaded by path, like the YAML ones; they are checked to be
imported by no module instead.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

LAYERS = ("transform_lib", "targets", "recipes", "schedules")
REPO = Path(__file__).resolve().parent.parent

SCHEDULES_FOLDERS: tuple[frozenset[str], ...] = (
    frozenset({"base"}),
    frozenset({"dsl"}),
    frozenset({"frontends"}),
    frozenset({"compile"}),
    frozenset({"measure"}),
    frozenset({"sweep"}),
    frozenset({"regress", "tune"}),
    frozenset({"cli"}),
)
"""The folders of ``schedules``, lowest first (docs/architecture.md): recipe model, front
ends, compile, the measurement core, then the policies over it, then the command line.
Folders of one rank do not import each other."""


def is_recipe_document(path: Path, root: Path) -> bool:
    """A shipped Python recipe (``recipes/<name>.py``), found by path like YAML recipes."""
    rel = path.relative_to(root)
    return rel.parent == Path("recipes") and not rel.name.startswith("_")


@functools.cache  # each test reads the same files
def imported_modules(path: Path, root: Path) -> tuple[tuple[int, str], ...]:
    """(line, absolute name) for every import in ``path`` (``from m import x`` gives
    ``m.x``); relative imports are resolved against the ``tdsched.<folder>`` package the
    file installs as."""
    rel = path.relative_to(root)
    package = ["tdsched", *rel.parent.parts]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                up = node.level - 1
                parts = package[: len(package) - up] if up else package
                base = ".".join([*parts, *([node.module] if node.module else [])])
            # each imported name may be a module of its own (`from .. import recipes`)
            found += [
                (node.lineno, base if alias.name == "*" else f"{base}.{alias.name}")
                for alias in node.names
            ]
    return tuple(found)


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "tdsched" and parts[1] in LAYERS:
        return parts[1]
    return None


def violations(root: Path) -> list[str]:
    """``file:line: ...`` for each import of a higher layer (or of a recipe document)."""
    found = []
    documents = {
        "tdsched.recipes." + p.stem
        for p in (root / "recipes").glob("*.py")
        if is_recipe_document(p, root)
    }
    for rank, folder in enumerate(LAYERS):
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            # one message per import statement, however many names it imports
            by_line = dict(reversed(imported_modules(path, root)))
            for line, module in sorted(by_line.items()):
                target = layer_of(module)
                if any(module == d or module.startswith(d + ".") for d in documents):
                    found.append(
                        f"{where}:{line}: imports the recipe document {module}; "
                        "recipes are loaded by path, not imported"
                    )
                elif target is not None and LAYERS.index(target) > rank:
                    if is_recipe_document(path, root):
                        continue
                    found.append(
                        f"{where}:{line}: {folder} imports {module}, from the higher layer "
                        f"{target} (layers, lowest first: {', '.join(LAYERS)})"
                    )
    return found


def subpackage_cycles(root: Path) -> list[str]:
    """``file:line: ...`` for each import from one subpackage of a layer into a sibling
    (``recipes/workloads`` → ``recipes/models``) that depends on the first in turn,
    directly or through others."""
    found = []
    for folder in LAYERS:
        edges: dict[str, dict[str, str]] = {}
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).parts
            if len(rel) < 2:
                continue
            for line, module in imported_modules(path, root):
                parts = module.split(".")
                if (
                    len(parts) > 3
                    and parts[:2] == ["tdsched", folder]
                    and parts[2] != rel[0]
                    and (root / folder / parts[2]).is_dir()
                ):
                    where = f"{path.relative_to(root).as_posix()}:{line}"
                    edges.setdefault(rel[0], {}).setdefault(parts[2], where)

        def reaches(start: str, goal: str, edges: dict[str, dict[str, str]] = edges) -> bool:
            todo, seen = [start], set()
            while todo:
                node = todo.pop()
                if node == goal:
                    return True
                if node not in seen:
                    seen.add(node)
                    todo += edges.get(node, {})
            return False

        for a, targets in sorted(edges.items()):
            for b, where in sorted(targets.items()):
                if reaches(b, a):
                    found.append(
                        f"{where}: {folder}/{a} imports {folder}/{b}, which depends on "
                        f"{folder}/{a} in turn; move what both need below them"
                    )
    return found


def _module_name(path: Path, root: Path) -> str:
    parts = ["tdsched", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _rank(folder: str) -> int | None:
    return next((r for r, names in enumerate(SCHEDULES_FOLDERS) if folder in names), None)


def schedules_folder_violations(root: Path) -> list[str]:
    """``file:line: ...`` for each import in ``schedules`` of a folder that is not below
    the importer's (:data:`SCHEDULES_FOLDERS`), and each module or folder outside them."""
    found = []
    for path in sorted((root / "schedules").rglob("*.py")):
        rel = path.relative_to(root / "schedules").parts
        where = path.relative_to(root).as_posix()
        if len(rel) == 1:
            if rel[0] != "__init__.py":
                found.append(f"{where}: a module outside the folders of schedules; move it")
            continue
        rank = _rank(rel[0])
        if rank is None:
            found.append(f"{where}: folder {rel[0]} is in no rank of SCHEDULES_FOLDERS")
            continue
        for line, module in sorted(dict(reversed(imported_modules(path, root))).items()):
            parts = module.split(".")
            if len(parts) < 3 or parts[:2] != ["tdsched", "schedules"] or parts[2] == rel[0]:
                continue
            other = _rank(parts[2])
            if other is not None and other >= rank:
                found.append(
                    f"{where}:{line}: schedules/{rel[0]} imports {module}, which is not below "
                    f"it (folders, lowest first: "
                    f"{', '.join('/'.join(sorted(f)) for f in SCHEDULES_FOLDERS)})"
                )
    return found


def module_cycles(root: Path) -> list[str]:
    """Each set of modules that import each other in a circle (through any number of
    modules, any kind of import), as ``a <-> b <-> ...``."""
    paths = {_module_name(p, root): p for folder in LAYERS for p in (root / folder).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        graph[name] = set()
        for _, module in imported_modules(path, root):
            while module and module not in paths:
                module = module.rpartition(".")[0]  # `from pkg import name`: the package
            if module and module != name:
                graph[name].add(module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(" <-> ".join(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_higher_layer() -> None:
    assert violations(REPO) == []


def test_no_subpackages_import_each_other() -> None:
    assert subpackage_cycles(REPO) == []


def test_schedules_folders_import_only_folders_below_them() -> None:
    assert schedules_folder_violations(REPO) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert module_cycles(REPO) == []


def test_every_layer_has_modules() -> None:
    for folder in LAYERS:
        assert list((REPO / folder).rglob("*.py")), folder


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for folder in LAYERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("transform_lib/a.py", "import tdsched.targets.compiler\n", "transform_lib/a.py:1:"),
        ("targets/sub/b.py", "\nfrom ...recipes import x\n", "targets/sub/b.py:2:"),
        ("targets/b.py", "from .. import schedules\n", "targets/b.py:1:"),
        (
            "recipes/w/c.py",
            "def f():\n    from tdsched.schedules.cli.main import main\n",
            "recipes/w/c.py:2:",
        ),
        ("transform_lib/g/d.py", "from tdsched.recipes.m import X\n", "transform_lib/g/d.py:1:"),
        ("schedules/e.py", "from tdsched.recipes import my_recipe\n", "schedules/e.py:1:"),
    ],
)
def test_leaks_are_found(tmp_path: Path, name: str, text: str, expected: str) -> None:
    root = _tree(tmp_path, {name: text, "recipes/my_recipe.py": "import tdsched.schedules\n"})
    found = violations(root)
    assert len(found) == 1 and found[0].startswith(expected), found


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("schedules/a.py", "from tdsched.transform_lib import x\nfrom ..recipes import y\n"),
        ("recipes/w/b.py", "from tdsched.targets.workload import Workload\nfrom . import c\n"),
        ("targets/sub/c.py", "from ..workload import Workload\nfrom ... import transform_lib\n"),
        ("transform_lib/g/d.py", "from ..payload import ops_under\nimport numpy\n"),
        ("recipes/doc.py", "from tdsched.schedules.frontends.python_api import RecipeBuilder\n"),
    ],
)
def test_downward_imports_pass(tmp_path: Path, name: str, text: str) -> None:
    assert violations(_tree(tmp_path, {name: text})) == []


def test_subpackage_cycles_are_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "recipes/a/__init__.py": "",
            "recipes/a/m.py": "from ..b.n import x\n",
            "recipes/b/__init__.py": "",
            "recipes/b/n.py": "\nfrom tdsched.recipes.c import y\n",
            "recipes/c/__init__.py": "from tdsched.recipes.a.m import z\n",
            "recipes/d/__init__.py": "from ..a import m\n",
        },
    )
    assert subpackage_cycles(root) == [
        "recipes/a/m.py:1: recipes/a imports recipes/b, which depends on recipes/a in turn; "
        "move what both need below them",
        "recipes/b/n.py:2: recipes/b imports recipes/c, which depends on recipes/b in turn; "
        "move what both need below them",
        "recipes/c/__init__.py:1: recipes/c imports recipes/a, which depends on recipes/c in "
        "turn; move what both need below them",
    ]


def test_schedules_folder_leaks_and_stray_modules_are_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "schedules/dsl/__init__.py": "",
            "schedules/dsl/a.py": "def f():\n    from ..measure.b import x\n",
            "schedules/measure/__init__.py": "",
            "schedules/measure/b.py": "from ..dsl.a import y\nfrom ..cli.main import z\n",
            "schedules/stray.py": "",
        },
    )
    found = schedules_folder_violations(root)
    assert [f.split(":")[0:2] for f in found] == [
        ["schedules/dsl/a.py", "2"],
        ["schedules/measure/b.py", "2"],
        ["schedules/stray.py", " a module outside the folders of schedules; move it"],
    ], found


def test_module_cycles_are_found_through_hidden_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "schedules/dsl/__init__.py": "",
            "schedules/dsl/recipe.py": "from .when import check\n",
            "schedules/dsl/when.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .conditions import Skipped\n"
            ),
            "schedules/dsl/conditions.py": "def f():\n    from . import recipe\n",
            "schedules/dsl/steps.py": "from .recipe import Recipe\n",
        },
    )
    assert module_cycles(root) == [
        "tdsched.schedules.dsl.conditions <-> tdsched.schedules.dsl.recipe "
        "<-> tdsched.schedules.dsl.when"
    ]
