"""Shared by the end-to-end tests: run ``run.py`` as a user would, read its records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = str(ROOT / "run.py")


def run_py(
    *args: str, cwd: Path = ROOT, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` in a subprocess (text output captured, never raises on exit status)."""
    return subprocess.run(
        [sys.executable, RUN_PY, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def run_sweep(sweep_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python run.py -m ARGS`` into ``sweep_dir``."""
    return run_py("-m", *args, f"hydra.sweep.dir={sweep_dir}")


def records(sweep_dir: Path) -> list[dict]:
    """Every ``metrics.json`` under ``sweep_dir``, in path order."""
    return [json.loads(p.read_text()) for p in sorted(Path(sweep_dir).rglob("metrics.json"))]


def make_plan(cfg, env=None):
    """The plan a job would launch: ``flopsweep.plan.plan`` on ``env`` (this machine when None)."""
    from flopsweep.plan import Environment, plan

    return plan(cfg, env or Environment.detect())


def validate(cfg, env=None):
    """The config a job would run: ``flopsweep.plan.plan`` (validate, then resolve on ``env``,
    this machine when None), as the job calls it."""
    from flopsweep.plan import Environment, plan

    return plan(cfg, env or Environment.detect()).cfg
