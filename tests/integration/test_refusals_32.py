"""Session 32's new-user trial (docs/reliability-4.md, rows 269 on) as a user types it: ``python run.py``
from an empty folder; a refusal is one line on stderr and leaves no folder. The checks themselves:
``tests/unit/test_prehydra_32.py``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, run_py

from flopsweep import tree


def _one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The refusal's one line, after its exit status and an empty stdout are checked."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flopsweep: ") and " Fix: " in lines[0], proc.stderr[
        -2000:
    ]
    return lines[0]


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["model=gpt-tiny", "device=cpu", f"hydra.run.dir={ROOT}/conf"],
        [
            "-m",
            "plan=true",
            "model=gpt-tiny",
            "device=cpu",
            "seed=1,2",
            f"hydra.sweep.dir={ROOT}/conf/backend",
        ],
    ],
)
def test_a_folder_inside_conf_is_refused_and_conf_is_left_as_it_was(tmp_path: Path, args: list[str]) -> None:
    """It exited 0 and wrote ``conf/.hydra/`` (``+.hydra`` in ``--help``) or ``conf/backend/multirun.yaml``
    (``backend=multirun``, then Hydra's ConfigKeyError)."""
    before = _tree(ROOT / "conf")
    line = _one_line(run_py(*args, cwd=tmp_path, timeout=300))
    key = args[-1].partition("=")[0]
    assert line.startswith(
        f"flopsweep: Invalid config: {args[-1]}: is inside {ROOT / 'conf'} (conf/, the config"
    )
    example = "multirun/my-sweep" if "-m" in args else "outputs/my-run"
    assert line.endswith(f"Fix: choose a folder outside it, e.g. {key}={example}.")
    assert _tree(ROOT / "conf") == before and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_run_folder_through_hydras_cwd_into_conf_is_refused(tmp_path: Path) -> None:
    """``hydra.run.dir=${hydra:runtime.cwd}/<..>/conf/backend``: the lock's callback could not resolve it
    (Hydra sets its config after the callbacks), Hydra made that a warning, and the plan wrote
    ``conf/backend/{plan.csv,run.log,.hydra/}`` (docs/reliability-4.md #276)."""
    before = _tree(ROOT / "conf")
    up = "/".join([".."] * len(tmp_path.parts))
    value = "${hydra:runtime.cwd}/" + up + str(ROOT / "conf" / "backend")
    proc = run_py("plan=true", "model=gpt-tiny", f"hydra.run.dir={value}", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"is inside {ROOT / 'conf'} (conf/, the config folder)" in proc.stderr.strip().splitlines()[-1]
    assert _tree(ROOT / "conf") == before and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_tuner_that_prunes_every_set_up_leaves_no_folder(tmp_path: Path) -> None:
    """``space.layouts=[tp2]`` on 3 ranks: the good line, exit 2 (the plan's, #528: was exit 1 and "no set-up
    to measure"); it left ``multirun/D/T/multirun.yaml``."""
    proc = run_py(
        "-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny", "space.layouts=[tp2]", "nproc_per_node=3",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "flopsweep: Invalid config: space.layouts=[tp2]: this machine's ranks place none of its layouts (on "
        "nnodes=1 x nproc_per_node=3, tp2 needs its degree 2 to divide the 3 ranks). Fix: set "
        "space.layouts=[dp,tp3]."
    )
    assert not list(tmp_path.iterdir()), _tree(tmp_path)


@pytest.mark.slow
def test_a_key_added_with_two_pluses_is_refused_before_hydra(tmp_path: Path) -> None:
    """``++steps.bogus=1``: the job refused it after Hydra made the run's folder, as "a '+' override"."""
    line = _one_line(run_py("model=gpt-tiny", "device=cpu", "++steps.bogus=1", cwd=tmp_path, timeout=300))
    assert line == (
        "flopsweep: Invalid config: steps.bogus=1: is not a key of steps (a '++' override adds keys without "
        "checking them). Fix: drop ++steps.bogus=1 (the keys of steps are warmup, measure, max_extra_warmup, "
        "gc_freq)."
    )
    assert not list(tmp_path.iterdir()), _tree(tmp_path)


@pytest.mark.slow
def test_a_calibration_record_nested_too_deep_is_named_with_the_limit(tmp_path: Path) -> None:
    """A ``metrics.json`` 40 levels down: "holds no metrics.json" though one was there."""
    records, here = tmp_path / "records", tmp_path / "here"
    here.mkdir()
    deep = records.joinpath(*[f"d{i}" for i in range(1, 41)])
    deep.mkdir(parents=True)
    (deep / "metrics.json").write_text("{}")
    args = ["plan=true", "plan_gpu=H100", "model=gpt-tiny", f"predict.calibration={records}"]
    line = _one_line(run_py(*args, cwd=here, timeout=300))
    assert line.startswith(
        f"flopsweep: Invalid config: predict.calibration='{records}': holds no metrics.json within "
        f"{tree.MAX_DEPTH} levels: folders nested deeper are not searched (flopsweep's limit of a walk; "
    )
    assert line.endswith(f"Fix: name a folder at most {tree.MAX_DEPTH} levels above the records, or give a "
                         "run's metrics.json or a sweep folder that holds some, or null.")  # fmt: skip
    assert not list(here.iterdir())
