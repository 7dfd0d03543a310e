"""The package's floors: every import points down the data flow, and no two parts import each other.

The test reads the ``ast`` of every module of ``rehearsal_env`` (imports inside functions and under
``TYPE_CHECKING`` included: an import that only dodges a loop at run time is still a loop in the
design) and checks three things:

1. no import cycle between the package's parts (its concept folders and top-level modules);
2. every import between parts goes to the same or a lower floor of :data:`FLOORS`, so a new part
   has to be placed in the data flow before it can land;
3. no import cycle between the private modules of one concept folder.

A failure names the loop (or the upward import) with the file and line of each import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rehearsal_env"

FLOORS: tuple[tuple[str, ...], ...] = (
    # the world: its parts, bottom up
    ("_version", "_home", "_atomic", "_process", "_declared", "schema", "checks"),
    ("backends",),
    ("services", "verdict"),
    ("tools",),
    ("scenarios",),
    ("worlds",),
    ("clock", "rewards"),
    ("identity",),
    ("provenance",),
    # worlds that are not ours: imported from another benchmark, or an application in containers
    ("importers", "sandbox"),
    # the env, and what drives it
    ("env",),
    ("agents",),
    ("records",),
    ("versions",),
    ("runner",),
    ("compiler",),  # the world compiler: an application becomes a world folder, validated by the versions gate
    # hosted episodes: who calls, the live sessions, forks and restores, what a caller sees; the transports above
    ("episodes",),
    ("rescore", "serve", "pool"),
    ("client", "integrations"),
    ("measure",),
    ("readiness", "improve"),
    # outside harnesses: the model gateway; an episode and the product's tools over MCP, ATIF
    ("gateway", "harness", "trajectories"),
    ("cli",),
    ("__init__",),
)
"""The parts of the package from the bottom floor up; a part may import only from its floor or below."""


@dataclass(frozen=True)
class Edge:
    """One import of one module by another."""

    source: str
    """The importing module (``rehearsal_env.x.y``)."""
    target: str
    """The imported module."""
    where: str
    """``path:line`` of the import statement."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str) -> bool:
    base = PACKAGE.parent.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _edges() -> list[Edge]:
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import submodule`` imports the submodule; ``from pkg import name`` the package
                targets = [f"{base}.{a.name}" if _exists(f"{base}.{a.name}") else base for a in node.names]
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            edges += [Edge(module, t, where) for t in targets if t.split(".")[0] == "rehearsal_env"]
    return edges


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One shortest cycle of ``graph`` as a closed path (first node repeated at the end), or None."""
    best: list[str] | None = None
    for start in sorted(graph):
        parent: dict[str, str] = {}
        frontier, seen = [start], {start}
        while frontier and best is None:
            nxt_frontier = []
            for node in frontier:
                for nxt in sorted(graph.get(node, ())):
                    if nxt == start:
                        path = [node]
                        while path[-1] != start:
                            path.append(parent[path[-1]])
                        cycle = [*reversed(path), start]
                        if best is None or len(cycle) < len(best):
                            best = cycle
                    elif nxt not in seen:
                        seen.add(nxt)
                        parent[nxt] = node
                        nxt_frontier.append(nxt)
            frontier = nxt_frontier
    return best


def _describe(cycle: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    hops = [f"  {a} -> {b}  ({', '.join(list(dict.fromkeys(edges[(a, b)]))[:3])})"
            for a, b in zip(cycle, cycle[1:], strict=False)]
    return "import loop " + " -> ".join(cycle) + ":\n" + "\n".join(hops)


EDGES = _edges()


def test_no_cycle_between_parts() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in EDGES:
        a, b = _part(e.source), _part(e.target)
        if a != b:
            graph[a].add(b)
            where[(a, b)].append(e.where)
    cycle = _cycle(graph)
    assert cycle is None, _describe(cycle, where) + "\nMake the lower part independent of the upper one."


def test_every_part_has_a_floor() -> None:
    placed = {p for floor in FLOORS for p in floor}
    parts = {_part(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    missing = sorted(parts - placed)
    assert not missing, (f"parts with no floor: {missing}; add each to FLOORS in {Path(__file__).name} "
                         "where it sits in the data flow")


def test_imports_point_down() -> None:
    floor = {p: i for i, f in enumerate(FLOORS) for p in f}
    upward = sorted({f"  {e.source} -> {e.target}  ({e.where}): floor {floor[_part(e.source)]} imports floor "
                     f"{floor[_part(e.target)]}"
                     for e in EDGES
                     if _part(e.source) in floor and _part(e.target) in floor
                     and floor[_part(e.target)] > floor[_part(e.source)]})
    assert not upward, "imports that point up the data flow:\n" + "\n".join(upward)


@pytest.mark.parametrize("folder", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
def test_no_cycle_inside_a_folder(folder: str) -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    prefix = f"rehearsal_env.{folder}."
    for e in EDGES:
        if e.source.startswith(prefix) and e.target.startswith(prefix) and e.source != e.target:
            if _exists(e.target) and not (PACKAGE.parent / Path(*e.target.split("."))).is_dir():
                graph[e.source].add(e.target)
                where[(e.source, e.target)].append(e.where)
    cycle = _cycle(graph)
    assert cycle is None, _describe(cycle, where)


def test_the_floors_test_sees_a_loop() -> None:
    """The cycle finder itself: a planted loop is found, and a tree has none."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}}) is None
