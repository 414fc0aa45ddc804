"""``run.py`` with an interpolation of a key the config does not have (the new-user trial of session 31):
one line and exit 2, before Hydra makes its folder; a key only another option has, one line from the job."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.parametrize("plan", [[], ["plan=true"]])
@pytest.mark.parametrize("override", ["model.n_layer=${nope}", "batch.micro_batch_size=${nope}"])
def test_a_missing_key_is_one_line_and_no_folder(tmp_path: Path, plan: list[str], override: str) -> None:
    """Was: a traceback (``InterpolationKeyError``, run.py line 289), exit 1, outputs/ made."""
    done = run_py("model=gpt-tiny", "device=cpu", *plan, override, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"flopsweep: Invalid config: {override}: interpolates a key the config does not have (nope). "
        "Fix: write the value itself, or name a key of the config (${model.seq_len})."
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_key_only_another_option_has_is_the_jobs_one_line(tmp_path: Path) -> None:
    """``model.experts`` is a key of the mixture-of-experts models, not of gpt-tiny: Hydra composes it."""
    run_dir = tmp_path / "run"
    override = "model.n_layer=${model.experts}"
    done = run_py(
        "model=gpt-tiny", "device=cpu", override, f"hydra.run.dir={run_dir}", cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and not (run_dir / "metrics.json").exists()
    assert done.stderr.strip().splitlines()[-1] == (
        f"flopsweep: Invalid config: {override}: Interpolation key 'model.experts' not found. "
        "Fix: set the value it refers to, or drop it."
    )
