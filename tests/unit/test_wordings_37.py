"""Session 37's small wordings (docs/reliability-7.md #399-#403): a non-finite number shown as ``inf``
instead of the value typed, a fix without an example, a Slurm refusal without ``flopsweep:`` at exit 1,
and an analysis output whose name holds a newline."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.cli import build_parser
from flopsweep import cluster
from hydra_plugins.flopsweep_slurm import refuse
from run import refusal

PLAN = ["plan=true", "plan_gpu=H100"]


FINITE = "must be a finite number. Fix: set e.g."


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("budget.tokens=1e400", f"budget.tokens=1e400: {FINITE} budget.tokens=15e12, or budget.tokens=null."),
        (
            "budget.tokens='1e400'",
            f"budget.tokens=1e400: {FINITE} budget.tokens=15e12, or budget.tokens=null.",
        ),
        ("budget.tokens=-inf", f"budget.tokens=-inf: {FINITE} budget.tokens=15e12, or budget.tokens=null."),
        (
            "budget.tokens=2e12,-1e400",
            f"budget.tokens=-1e400: {FINITE} budget.tokens=15e12, or budget.tokens=null.",
        ),
        (
            "cost.usd_per_gpu_hour=1e400",
            f"cost.usd_per_gpu_hour=1e400: {FINITE} cost.usd_per_gpu_hour=2.5, or "
            "cost.usd_per_gpu_hour=null.",
        ),
        (
            "plan_gpu_memory_gib=1e400",
            "plan_gpu_memory_gib=1e400: must be a positive number of GiB, at most 1048576. Fix: set e.g. "
            "plan_gpu_memory_gib=80.",
        ),
        (
            "timeout_s=1e400",
            "timeout_s=1e400: must be a finite number of seconds > 0. Fix: set e.g. timeout_s=1800.",
        ),
    ],
)
def test_a_non_finite_number_is_shown_as_typed_with_an_example(override: str, line: str) -> None:
    """#399, #400: ``budget.tokens=1e400`` was ``budget.tokens=inf: ... Fix: set budget.tokens to a finite
    value.``: the value as Python holds it, and a fix without a value to type."""
    sweep = ["-m"] if "," in override else []  # one value of a sweep: that value, as typed
    assert refusal([*sweep, *PLAN, override]) == f"Invalid config: {line}"


def test_a_slurm_launcher_without_sinfo_is_one_flopsweep_line_exit_2(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """#401: ``flopsweep -m hydra/launcher=slurm ...`` on a machine without ``sinfo`` printed
    ``hydra/launcher=slurm: no sinfo on PATH: ...`` without ``flopsweep:``, exit 1. Now ``flopsweep: ...``,
    exit 2 (this machine cannot be a Slurm client: the launcher is refused); a controller that does not
    answer stays exit 1. (The client call is the test's: a unit test starts no process.)"""

    def no_sinfo(args: list[str], **_: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", args[0])

    monkeypatch.delenv("SLURM_CONF", raising=False)
    with pytest.raises(cluster.ClusterError) as info:
        cluster.read_sinfo(no_sinfo)
    assert info.value.code == 2
    with pytest.raises(SystemExit) as stop:
        refuse(str(info.value), info.value.code)
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "flopsweep: hydra/launcher=slurm: no sinfo on PATH: this machine has no Slurm client. Fix: run the "
        "sweep on a Slurm login node, or try it here with hydra/launcher=slurm_local\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere.conf"))
    with pytest.raises(cluster.ClusterError) as info:
        cluster.read_sinfo(no_sinfo)
    assert info.value.code == 2 and "SLURM_CONF=" in str(info.value)
    with pytest.raises(SystemExit) as stop:
        refuse("flopsweep: sbatch failed")  # said once, whoever put the prefix on
    assert stop.value.code == 1 and capsys.readouterr().err == "flopsweep: sbatch failed\n"


@pytest.mark.parametrize(
    ("option", "value", "fix"),
    [
        ("--output", "a\nb.csv", "a_b.csv"),
        ("--output", "x\x1b[31m.md", "x_[31m.md"),
        ("--output", "a\u202eb.csv", "a_b.csv"),
        ("--plot", "pl\tx", "pl_x"),
        ("--notebook", "n\rb.ipynb", "n_b.ipynb"),
    ],
)
def test_an_output_name_with_a_control_character_is_refused(
    tmp_path: Path, capsys, option: str, value: str, fix: str
) -> None:
    """#402: ``flopsweep-analysis DIR --output 'a\\nb.csv'`` wrote ``a?b.csv``, a name that breaks every
    listing and shell line showing it; a tab, ESC, CR or a bidirectional mark alike. Now argparse's one
    line, exit 2, the name shown escaped and the fix with ``_``; a non-ASCII name stays allowed."""
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([str(tmp_path), option, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "holds a control or invisible character (shown escaped)" in err and f"Fix: {option} {fix}" in err
    assert "\n" not in err.rstrip("\n") or err.count("\n") <= 2  # usage line at most, then the error
    args = build_parser().parse_args([str(tmp_path), "--output", "ünï.csv"])
    assert str(args.output) == "ünï.csv"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "timeout_s: 1e400\n",
            "timeout_s=1e400: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800 in "
            "conf/sweep/mine.yaml.",
        ),
        (
            "plan: true\nplan_gpu: H100\nbudget:\n  tokens: 1e400\n",
            f"budget.tokens=1e400: {FINITE} budget: {{tokens: 15e12}}, or budget: {{tokens: null}} in "
            "conf/sweep/mine.yaml.",
        ),
        (
            "timeout_s: -.inf\n",
            "timeout_s=-.inf: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800 in "
            "conf/sweep/mine.yaml.",
        ),
    ],
)
def test_a_sweep_files_non_finite_number_is_shown_as_the_file_writes_it(
    tmp_path: Path, text: str, line: str
) -> None:
    """#400: a sweep file's ``timeout_s: 1e400`` (YAML reads it as inf) was ``sweep/mine.yaml:
    timeout_s=inf``; YAML's own ``-.inf`` too, as the file writes it (session 38, #471: was ``-inf``)."""
    from flopsweep.sweep_file_keys import values_problem
    from run import FILE_VALUE_CHECKS

    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - base_config\n  - _self_\n")
    (conf / "sweep" / "mine.yaml").write_text("# @package _global_\n" + text)
    said = values_problem(["+sweep=mine"], FILE_VALUE_CHECKS, str(conf))
    assert said == f"Invalid config: conf/sweep/mine.yaml: {line}"
