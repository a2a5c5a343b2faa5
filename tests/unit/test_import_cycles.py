"""No import cycle anywhere in src/, not even one closed through ``TYPE_CHECKING`` imports or
imports inside functions (issue 31): a module of a cycle can't be read, tested or moved
alone. Every import statement of every module is parsed (``ast``, whatever guards it), and
the graph over kube_nudge's modules must have no strongly connected component but single
modules. Importing a submodule runs its package's ``__init__`` too, but that is Python's
order, not a dependency the code states: only the module an import names counts."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

Graph = Mapping[str, set[str]]


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.Module, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the module ``name`` names in its import statements."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return found & modules


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module under ``root`` and the modules under ``root`` it imports."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    modules = set(paths)
    return {
        name: imported(
            ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", modules
        )
        - {name}
        for name, path in paths.items()
    }


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def one_cycle(graph: Graph, component: Iterable[str]) -> list[str]:
    """A path through ``component`` that comes back to where it started, to show."""
    members = set(component)
    start = min(members)
    path, seen = [start], {start}
    while True:
        target = min(t for t in graph[path[-1]] if t in members)
        if target in seen:
            return [*path[path.index(target) :], target]
        path.append(target)
        seen.add(target)


def test_no_module_in_src_is_part_of_an_import_cycle() -> None:
    graph = import_graph(SRC)
    assert len(graph) > 100  # the walk found the product
    shown = [
        f"{len(component)} modules ({', '.join(component)}), e.g. "
        + " -> ".join(one_cycle(graph, component))
        for component in cycles(graph)
    ]
    assert shown == []


def test_a_cycle_closed_only_by_a_type_checking_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\nB = 1\n"
    )
    (package / "c.py").write_text("def f():\n    from . import a\n")
    graph = import_graph(tmp_path)
    assert graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert one_cycle(graph, ["pkg.a", "pkg.b"]) == ["pkg.a", "pkg.b", "pkg.a"]
