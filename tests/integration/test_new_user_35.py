"""Session 35's new-user trial (docs/reliability-5.md #323, #325, #326), as a user runs them: Hydra's shell
completion installs (for the ``flopsweep`` command too), a tuner with nothing to tune and a bad
``OMP_NUM_THREADS`` are one line, exit 2, nothing made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, run_py


def test_shell_completion_installs_as_hydras_does(tmp_path: Path) -> None:
    """``flopsweep --shell-completion install=bash`` was refused (``install=bash: no such key``); now Hydra's
    bash function, exit 0, which completes a flopsweep command line."""
    run = run_py("--shell-completion", "install=bash", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "hydra_bash_completion()" in run.stdout and "-sc query=bash" in run.stdout
    query = run_py("-sc", "query=bash", cwd=tmp_path, timeout=120, env={"COMP_LINE": "flopsweep mode"})
    assert query.returncode == 0 and query.stdout.split() == ["model.", "model="], query.stdout + query.stderr
    bare = run_py("--shell-completion", cwd=tmp_path, timeout=120)
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    assert bare.stderr.startswith("flopsweep: Invalid config: --shell-completion no subcommand:")
    assert bare.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_a_tuner_with_nothing_to_tune_runs_nothing(tmp_path: Path) -> None:
    run = run_py("-m", "hydra/sweeper=tune", "device=cpu", cwd=tmp_path, timeout=120)
    assert run.returncode == 2, (run.stdout + run.stderr)[-3000:]
    assert run.stderr.startswith("flopsweep: Invalid config: hydra/sweeper=tune: one set-up, nothing to tune")
    assert run.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_an_omp_num_threads_openmp_cannot_read_is_refused_before_anything_runs(tmp_path: Path) -> None:
    run = run_py("device=cpu", "model=llama-tiny", cwd=tmp_path, timeout=120, env={"OMP_NUM_THREADS": "abc"})
    assert run.returncode == 2, (run.stdout + run.stderr)[-3000:]
    assert run.stderr.startswith("flopsweep: OMP_NUM_THREADS='abc': is no positive whole number of threads")
    assert run.stderr.count("\n") == 1 and "libgomp" not in run.stderr and list(tmp_path.iterdir()) == []


def test_the_flopsweep_command_installs_its_completion_for_itself(tmp_path: Path) -> None:
    """Through the ``flopsweep`` console script (``flopsweep.cli.run``, which runs ``run.py`` by ``runpy``,
    that sets ``sys.argv[0]`` to ``run.py``), Hydra registered the completion for ``python``; now for the
    command as invoked."""
    argv = "['/opt/bin/flopsweep', '-sc', 'install=bash']"
    code = f"import sys; sys.argv = {argv}; import flopsweep.cli as c; c.run()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.rstrip().endswith("complete -o nospace -o default -F hydra_bash_completion flopsweep")
