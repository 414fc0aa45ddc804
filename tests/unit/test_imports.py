"""The module graph: no import cycle among flopsweep modules (lazy, function-level imports
included), and the analysis imports neither torch nor flopsweep's formulas."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration.test_imports import (  # shared with the integration tier
    _closure,
    _graph,
)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_among_flopsweep_modules() -> None:
    graph = _graph("flopsweep")
    assert len(graph) > 15
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_config_imports_nothing_of_flopsweep() -> None:
    assert _graph("flopsweep")["flopsweep.config"] == set()


def test_validation_imports_neither_the_launcher_nor_the_worker() -> None:
    graph = _graph("flopsweep")
    closure = _closure(graph, "flopsweep.plan")
    assert "flopsweep.config" in closure and "flopsweep.models" in closure  # the scan sees plan's imports
    processes = {
        "flopsweep.launch",
        "flopsweep.worker",
        "flopsweep.autobatch",
        "flopsweep.modelsearch",
        "flopsweep.sizesearch",
        "flopsweep.job",
    }
    assert not {m for m in closure if m.startswith("flopsweep.job.")} and not closure & processes, closure


def test_the_training_step_and_the_metrics_do_not_import_the_profiler() -> None:
    graph = _graph("flopsweep")
    for module in ("flopsweep.backends", "flopsweep.metrics"):
        assert "flopsweep.profile" not in _closure(graph, module), module
    assert "flopsweep.annotations" in graph["flopsweep.profile"] & graph["flopsweep.trainers"]


def test_the_cycle_scan_finds_a_cycle() -> None:
    """The scan itself: lazy imports count, and a cycle is reported as a path."""
    graph = _graph("flopsweep")
    assert "flopsweep.profile" in graph["flopsweep.worker"]  # imported only inside a function
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


PARTS = ("memory_terms", "activation_memory", "offload_memory")
STEP_PARTS = ("workload", "comm_time", "compute_time")


def _defined(module: str) -> set[str]:
    """The public names a module defines at its top level (functions, classes, assignments)."""
    import ast
    import importlib

    tree = ast.parse(Path(importlib.import_module(module).__file__).read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize(
    ("face", "parts"),
    [("memory", PARTS), ("steptime", STEP_PARTS), ("predict", STEP_PARTS)],
)
def test_the_estimators_faces_hand_on_every_name_of_their_parts(face: str, parts: tuple[str, ...]) -> None:
    """``memory`` and ``steptime`` were split by topic; every public name a part defines is still the
    face's (the callers, the tests and docs/reference name them there), the same object, and no part
    imports its face."""
    import importlib

    whole = importlib.import_module(f"flopsweep.{face}")
    graph = _graph("flopsweep")
    for name in parts:
        part = importlib.import_module(f"flopsweep.{name}")
        public = _defined(f"flopsweep.{name}")
        assert len(public) >= 3, name
        missing = sorted(n for n in public if getattr(whole, n, None) is not getattr(part, n))
        assert not missing, (face, name, missing)
        assert f"flopsweep.{face}" not in _closure(graph, f"flopsweep.{name}")
