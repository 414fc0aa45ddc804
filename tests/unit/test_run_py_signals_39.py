"""``python run.py`` sets its Ctrl-C handler before it imports anything of the project's
(docs/reliability-10.md #606, session 39's re-trial of #500): #500 made the console scripts' and ``python -m
analysis``'s first statements set it, while ``run.py`` imported ``flopsweep.signals`` (``contextlib``,
``signal``) first: a SIGINT 40 ms after ``python run.py plan=true`` started (a loaded 2-core machine) was a
``KeyboardInterrupt`` traceback at ``run.py`` line 16, the process killed by the signal (exit -2). Now its
first statement imports :mod:`flopsweep.console`, whose import's first statements set the handler."""

from __future__ import annotations

import ast

from helpers import ROOT


def test_run_pys_first_statement_sets_the_handler_as_a_console_script_does() -> None:
    tree = ast.parse((ROOT / "run.py").read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    first = body[0]
    assert isinstance(first, ast.If) and ast.unparse(first.test) == "__name__ == '__main__'"
    assert [ast.unparse(n) for n in first.body] == ["import flopsweep.console"]


def test_the_console_modules_import_imports_nothing_of_the_projects_before_its_handler() -> None:
    tree = ast.parse((ROOT / "flopsweep" / "console.py").read_text(encoding="utf-8"))
    before = []
    for node in tree.body:
        if isinstance(node, ast.Try):  # the handler's statement
            break
        if isinstance(node, ast.Import | ast.ImportFrom):
            before += [getattr(node, "module", None) or a.name for a in node.names]
    assert set(before) <= {"__future__", "os", "signal", "sys"}
