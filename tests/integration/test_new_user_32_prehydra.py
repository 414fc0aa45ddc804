"""``run.py`` on the session-32 new-user trial's command lines: one line, exit 2, and no ``outputs/`` folder
(was: the job's line after Hydra made ``outputs/<date>/<time>/``, or a run with the digits read as 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_py

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (
            ["model=llama3.1-8b", "plan=true", "plan_gpu=H100", "model.n_kv_head=3"],
            "model.n_kv_head=3: does not",
        ),
        (
            ["model.n_layer=${model.n_head}", "model.n_head=${model.n_layer}"],
            "model.n_layer=${model.n_head}: ",
        ),
        (['steps.measure="٣"'], 'steps.measure="٣": is written in another script\'s digits'),
    ],
)
def test_a_refusal_of_the_trial_is_one_line_and_no_folder(
    tmp_path: Path, args: list[str], start: str
) -> None:
    done = run_py(*args, cwd=tmp_path, timeout=180)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"flopsweep: Invalid config: {start}"), lines
    assert list(tmp_path.iterdir()) == []


def test_a_config_json_with_a_negative_layer_count_is_one_line_and_no_folder(tmp_path: Path) -> None:
    config = json.loads((ROOT / "flopsweep/models/hf_configs/qwen3-tiny.json").read_text())
    path = tmp_path.parent / f"{tmp_path.name}-config.json"
    path.write_text(json.dumps({**config, "num_hidden_layers": -3}))
    done = run_py("model=hf", f"model.config={path}", "plan=true", cwd=tmp_path, timeout=180)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"flopsweep: Invalid config: model.config='{path}': has num_hidden_layers=-3, and it is a size. "
        "Fix: give num_hidden_layers a whole number of at least 1."
    ]
    assert list(tmp_path.iterdir()) == []
