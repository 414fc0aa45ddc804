"""The console scripts' lines as they start (docs/reliability-9.md #500): :mod:`flopsweep.console` writes
its own copies of :mod:`flopsweep.signals`' lines, since its import, which sets the handler, must not import
``signal`` first; read here from its source (importing it would set the handler in this process)."""

from __future__ import annotations

import ast
from pathlib import Path

from flopsweep import signals

CONSOLE = Path(signals.__file__).with_name("console.py")


def _constants() -> dict[str, str]:
    tree = ast.parse(CONSOLE.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


def test_the_consoles_lines_are_the_signals_modules() -> None:
    constants = _constants()
    assert constants["RUN_LINE"] == signals.STOP_LINE
    assert constants["ANALYSIS_LINE"] == signals.ANALYSIS_LINE
    assert constants["ANALYSIS"] == "flopsweep-analysis"
