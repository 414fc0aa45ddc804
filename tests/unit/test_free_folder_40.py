"""A refusal that says "choose another hydra.run.dir" names a free folder, accepted typed back
(docs/reliability-11.md #725): ``Fix: choose another hydra.run.dir`` (or ``a new hydra.sweep.dir``) named
none, and the one a user invented could be taken as well."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from flopsweep.free_folder import another, free_folder, free_path


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def test_the_folder_named_is_free_beside_the_one_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x-2").mkdir()
    (tmp_path / "x-3").write_text("a file")
    assert free_path(tmp_path / "x") == tmp_path / "x-4"
    assert another(tmp_path / "x") == f"choose another hydra.run.dir, e.g. hydra.run.dir={tmp_path / 'x-4'}"
    assert another(tmp_path / "x", either=True) == (
        f"choose another hydra.run.dir, e.g. hydra.run.dir={tmp_path / 'x-4'}"  # pytest's argv: no -m
    )
    assert free_path("multirun/a/") == Path("multirun/a-2")  # relative as typed


def test_a_path_hydra_or_the_shell_would_split_is_quoted(tmp_path: Path) -> None:
    typed = free_folder(tmp_path / "a b,c", "hydra.sweep.dir")
    assert shlex.split(typed) == [f'hydra.sweep.dir="{tmp_path / "a b,c-2"}"']


def test_the_named_folder_is_accepted_typed_back(tmp_path: Path) -> None:
    """A run folder above a single run's: refused, naming ``hydra.run.dir=...-2``, which then passes."""
    from flopsweep.callbacks import run_folder_problem

    (tmp_path / "e7").mkdir()
    record = {"status": "ok", "run": {"id": "e7", "job_num": None}, "metrics": {}}
    (tmp_path / "e7" / "metrics.json").write_text(json.dumps(record))
    line = run_folder_problem(tmp_path)
    assert line is not None and ", e.g. hydra.run.dir=" in line, line
    fix = shlex.split(line.rsplit(", e.g. ", 1)[1])[0]
    assert fix == f"hydra.run.dir={tmp_path / 'run-2'}"
    folder = fix.partition("=")[2]
    assert run_folder_problem(Path(folder)) is None
    assert refusal(["model=llama-tiny", "device=cpu", "plan=true", fix]) is None


def test_a_sweep_folder_in_the_way_names_a_sweep_folder_accepted_typed_back(tmp_path: Path) -> None:
    from flopsweep.folders import sweep_folder_problem

    sweep = tmp_path / "S"
    sweep.mkdir()
    (sweep / "metrics.json").write_text(json.dumps({"status": "ok", "run": {"id": "a"}}))
    line = sweep_folder_problem(sweep, {}, resume=False)
    assert line is not None and line.endswith(
        f"Fix: choose another hydra.sweep.dir, e.g. hydra.sweep.dir={sweep}-2"
    )
    assert sweep_folder_problem(Path(f"{sweep}-2"), {}, resume=False) is None
    base = ["-m", "model=llama-tiny", "device=cpu", "plan=true", "seed=0,1"]
    assert refusal([*base, f"hydra.sweep.dir={sweep}-2"]) is None
