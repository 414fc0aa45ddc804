"""Session 37: a damaged ``conf/config.yaml``, a cluster size written with ``✕`` and a sweep file's subdir the
same for every job, each as a user types the command (docs/reliability-7.md #376-#389): exit 2, one line,
no traceback, nothing written. Planted in one copy of the checkout (``run.py`` reads the ``conf/`` beside
it), run from an empty folder; each refused before Hydra, so no job trains."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import checkout_copy, run_copy

RUN = ["device=cpu", "steps.warmup=1", "steps.measure=1"]


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return checkout_copy(tmp_path_factory.mktemp("conf37"))


def _refused(proc: subprocess.CompletedProcess, work: Path) -> str:
    """The one line of a refusal (exit 2, no traceback, nothing written in ``work``)."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.stderr[-3000:]
    assert list(work.iterdir()) == []
    (line,) = proc.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("old", "new", "start"),
    [
        (  # was: Hydra's 14-line "Could not find 'hydra/sweeper/basic_batchd'", exit 1
            "- override hydra/sweeper: basic_batched",
            "- override hydra/sweeper: basic_batchd",
            "its defaults list picks override hydra/sweeper: basic_batchd, and there is no option",
        ),
        (  # was: a 33-line ValueError traceback
            "- backend: single ",
            "- backend: 3 ",
            "its defaults list picks backend: 3: an option is the name of a file of backend/",
        ),
        (  # was: "Overrides must be at the end of the defaults list", exit 1
            "- _self_",
            "- _selff_",
            "its defaults list names _selff_, which is no config",
        ),
        (  # was: "Key 'defualts' not in 'RunConfig'", exit 1
            "hydra:\n",
            "defualts:\n  - model: gpt-tiny\nhydra:\n",
            "its top-level key defualts is no key of the root config",
        ),
    ],
)
def test_a_damaged_root_config_is_one_line_naming_the_entry(
    copy: tuple[Path, Path], old: str, new: str, start: str
) -> None:
    src, work = copy
    root = src / "conf" / "config.yaml"
    text = root.read_text()
    root.write_text(text.replace(old, new, 1))
    try:
        line = _refused(run_copy(src, work, *RUN), work)
    finally:
        root.write_text(text)
    assert line.startswith(f"flopsweep: Invalid config: conf/config.yaml: {start}"), line
    assert line.endswith("or restore it from the checkout: git checkout conf/config.yaml."), line


def test_a_sweep_files_subdir_of_the_hour_is_refused_before_any_job(copy: tuple[Path, Path]) -> None:
    src, work = copy
    mine = src / "conf" / "sweep" / "mine.yaml"
    mine.write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 0,1\n"
        "  sweep:\n    subdir: ${now:%H}\n"
    )
    try:  # was: job 0 trained, job 1 stopped on .../NN/metrics.json already exists, exit 1
        line = _refused(run_copy(src, work, "-m", "+sweep=mine", *RUN, f"hydra.sweep.dir={work}/S"), work)
    finally:
        mine.unlink()
    assert line == (  # the copy's sweep/ is a folder of its conf/, not the checkout's link to ../sweep
        "flopsweep: Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: ${now:%H}: is the same for "
        "every job (${now:...} is resolved once, as the sweep starts), so every job of the sweep would write "
        "into one folder. Fix: write subdir: ${now:%H}_${hydra.job.num} under its hydra.sweep, or drop "
        "subdir there (the default is ${hydra.job.num})."
    )


def test_a_cluster_size_written_with_a_multiplication_x_names_the_x(copy: tuple[Path, Path]) -> None:
    src, work = copy
    line = _refused(run_copy(src, work, *RUN, "plan=true", "plan_clusters=[H100:8✕8]"), work)
    assert line == (
        "flopsweep: Invalid config: plan_clusters=[H100:8✕8]: Hydra's override grammar cannot read it ('✕' "
        "(U+2715 MULTIPLICATION X) looks like ASCII 'x'). Fix: did you mean plan_clusters=[H100:8x8]?"
    )  # was: Fix: quote each element, 'plan_clusters=["H100:8✕8"]', which then "gives no size"
