"""Issue #40, class 12 and the new-user trial: command lines whose answer was a traceback, a message
that did not say what to do, a wrong count, or a silent choice.

- a config group given ``null`` or a list (``backend=null``: Hydra's ValueError traceback);
- ``hydra/sweeper=optuna_objective`` without the ``optuna`` extra (Hydra: "Could not load
  'hydra/sweeper/optuna'"), and an Optuna study's progress counted as its search space (``job 1/32``
  for 4 trials);
- a ready-made sweep with another option of a group it sets knobs of (``+sweep=hf-1gpu batch=fixed``
  did not compose);
- ``python -m analysis --baseline`` with several values (a speedup over an average of set-ups) or a
  key given twice (the last won in silence).

All in this process (the refusals are the functions ``run.py`` calls before Hydra starts) but one
``run.py`` start per refusal kind, marked slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("backend=null",),
        ("model.name=null",),  # a key of the option picked (model=gpt-tiny's schema): Hydra's was five lines
        ("-m", "+sweep=blocksparse-2k", "attention=sdpa"),
    ],
)
def test_run_py_answers_in_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    where = ("hydra.sweep.dir" if "-m" in args else "hydra.run.dir") + f"={tmp_path / 'out'}"
    proc = run_py(*args, "plan=true", where, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flopsweep: Invalid config: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and not (tmp_path / "out").exists()
