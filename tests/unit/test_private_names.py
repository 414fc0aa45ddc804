"""No module uses another module's private name (one with a leading underscore, dunders aside).

A name that a second module needs is part of its owner's interface: public and documented there, or
moved to the module that uses it. The scan reads the sources with ``ast`` (nothing is imported) and
finds, in every module of flopsweep/, analysis/, hydra_plugins/, run.py and the benchmark scripts:
``from M import _name`` (relative imports and imports inside functions too), ``M._name`` through any
name bound to one of our modules (``import M``, ``import M as m``, ``from P import m``), a lazy path
``"M:_name"`` and ``getattr(m, "_name")``. Third-party privates (``torch._scaled_mm``, ``os._exit``)
are not ours to rename and are not counted. Tests may use private names; they are not scanned.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("flopsweep", "analysis", "hydra_plugins")

ALLOWED: dict[tuple[str, str], str] = {}
"""``(importing module, "owner._name")`` -> why it must stay. Empty: every cross-module use of a
private name was made public or moved (session 24)."""


def _sources(root: Path) -> dict[str, tuple[Path, bool]]:
    """Module name -> (its file, whether it is a package's ``__init__``)."""
    files = [p for package in PACKAGES for p in (root / package).rglob("*.py")]
    files += [root / "run.py", *(root / "benchmarks").glob("*.py")]
    found = {}
    for path in files:
        if not path.is_file():
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    """The module a ``from`` import names, relative ones resolved against ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The module an expression such as ``m`` or ``flopsweep.predict`` stands for, None for others."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id], *reversed(chain)])


def private_uses(root: Path) -> list[tuple[str, str, int]]:
    """``(importing module, "owner._name", line)`` of each use of another of our modules' private
    name under ``root``."""
    modules = _sources(root)
    found = []
    for me, (path, package) in sorted(modules.items()):
        tree = ast.parse(path.read_text(), str(path))
        bound: dict[str, str] = {}  # local name -> the module it stands for

        def hit(owner: str, name: str, line: int, me: str = me) -> None:
            if owner in modules and owner != me and _private(name):
                found.append((me, f"{owner}.{name}", line))

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]  # ``import a.b`` binds ``a``
                    bound[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom):
                owner = _absolute(me, package, node.level, node.module)
                for alias in node.names:
                    hit(owner, alias.name, node.lineno)
                    if f"{owner}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{owner}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (owner := _dotted(node.value, bound)):
                hit(owner, node.attr, node.lineno)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
                owner, _, name = node.value.partition(":")
                hit(owner, name.split(".")[0], node.lineno)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and (owner := _dotted(node.args[0], bound))
            ):
                hit(owner, node.args[1].value, node.lineno)
    return found


def test_no_module_uses_another_modules_private_name() -> None:
    found = private_uses(ROOT)
    unexplained = [f"{me}:{line} uses {name}" for me, name, line in found if (me, name) not in ALLOWED]
    assert not unexplained, (
        "make the name public in its module (with a docstring) or move it to the one module that uses "
        "it; allow it in ALLOWED only with a reason:\n" + "\n".join(unexplained)
    )
    stale = set(ALLOWED) - {(me, name) for me, name, _ in found}
    assert not stale, f"ALLOWED names uses that no longer exist: {sorted(stale)}"


def test_the_scan_reads_every_package_and_finds_each_kind_of_use(tmp_path: Path) -> None:
    """The scan itself, on a made-up tree: each kind of use is found with its line, a module's own
    private names, dunders, tests and third-party privates are not."""
    scanned = set(_sources(ROOT))
    assert {"flopsweep.predict", "analysis.load", "hydra_plugins.flopsweep_slurm", "run"} <= scanned
    assert "benchmarks.deepspeed_copies" in scanned and len(scanned) > 150
    (tmp_path / "flopsweep" / "sub").mkdir(parents=True)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "flopsweep" / "__init__.py").write_text("")
    (tmp_path / "flopsweep" / "owner.py").write_text("def _helper():\n    pass\n_CONST = 1\n")
    (tmp_path / "flopsweep" / "sub" / "__init__.py").write_text("from .. import owner\n_x = owner._CONST\n")
    (tmp_path / "flopsweep" / "user.py").write_text(
        "import os\n"
        "import torch\n"
        "from flopsweep import owner\n"
        "import flopsweep.owner as own\n"
        "from .owner import _helper\n"
        "def f():\n"
        "    from flopsweep.owner import _CONST\n"
        "    getattr(owner, '_helper')\n"
        "    os._exit(0)\n"
        "    torch._scaled_mm\n"
        "    owner.__name__\n"
        "    return own._CONST, 'flopsweep.owner:_helper'\n"
    )
    (tmp_path / "flopsweep" / "owner2.py").write_text("def _mine():\n    pass\n_mine()\n")
    (tmp_path / "analysis" / "__init__.py").write_text("import flopsweep.owner\nflopsweep.owner._helper()\n")
    (tmp_path / "run.py").write_text("")
    (tmp_path / "tests" / "test_x.py").write_text("from flopsweep.owner import _helper\n")
    assert sorted(private_uses(tmp_path)) == [
        ("analysis", "flopsweep.owner._helper", 2),
        ("flopsweep.sub", "flopsweep.owner._CONST", 2),
        ("flopsweep.user", "flopsweep.owner._CONST", 7),
        ("flopsweep.user", "flopsweep.owner._CONST", 12),
        ("flopsweep.user", "flopsweep.owner._helper", 5),
        ("flopsweep.user", "flopsweep.owner._helper", 8),
        ("flopsweep.user", "flopsweep.owner._helper", 12),
    ]
