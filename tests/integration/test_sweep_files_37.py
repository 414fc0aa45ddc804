"""Session 37's new-user trial as a user types it (docs/reliability-7.md #366, #372, #373, #374): a sweep file
whose defaults entry is a pick without the space after its colon, whose search starts at 0 blocks, whose
pool's slots are one text or another script's digits. Each was Hydra's error (exit 1), a job folder and an
``invalid`` record (exit 0), a line with Hydra's ``ChoiceSweep(...)`` repr, or a job pinned to a device
``٠``. Now one line naming the file before Hydra, exit 2, no traceback, nothing made; one process each, no
training. The file is planted in one copy of ``run.py``, ``conf/`` and the packages, never in the
checkout's ``sweep/`` (tests/unit/test_sweep_files_37.py holds each line's check and its fix)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import checkout_copy, run_copy

HEAD = "# @package _global_\ndevice: cpu\nsteps: {warmup: 1, measure: 1}\n"
POOL = "defaults:\n  - override /hydra/launcher: pool\nhydra:\n  launcher:\n"
SHOWN = "flopsweep: Invalid config: conf/sweep/mine.yaml"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return checkout_copy(tmp_path_factory.mktemp("checkout"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "line"),
    [
        (  # #366: Hydra's "Could not load 'sweep/override /model:gpt-125m'" and its search path, exit 1
            "defaults:\n  - override /model:gpt-125m\n",
            "(defaults: override /model:gpt-125m): is one text, a pick written without a space after its "
            "colon, "
            "which Hydra reads as the name of a config file (Could not load 'sweep/override "
            "/model:gpt-125m'). "
            "Fix: - override /model: gpt-125m.",
        ),
        (  # #372: a job folder and an invalid record, exit 0, the file unnamed
            "search: {model: largest, min_n_layer: 0}\n",
            ": search.min_n_layer=0: the search starts at a model of at least one block. Fix: set "
            "search: {min_n_layer: 1} in conf/sweep/mine.yaml.",  # session 41 (#883): the file's form
        ),
        (  # #373: Hydra's ChoiceSweep(tags=set(), list=[0, 1], ...) in the line
            POOL + '    slots: "0,1"\n',
            ": hydra.launcher.slots='0,1': is one text, not a count or a list of device ids. Fix: write it "
            "as a "
            "list in the file: hydra: {launcher: {slots: [0, 1]}}.",
        ),
        (  # #374: a job ran with CUDA_VISIBLE_DEVICES=٠
            POOL + "    slots: [٠]\n",
            ": hydra.launcher.slots=['٠']: names '٠', in another script's digits ('٠' (U+0660 ARABIC-INDIC "
            "DIGIT "
            "ZERO)); an id takes digits 0-9. Fix: write slots: [0] under hydra: launcher: in the file, or "
            "set hydra.launcher.slots=[0] (the command line's value replaces the file's).",
        ),
    ],
    ids=["pick-without-space", "search-at-zero", "slots-text", "slots-arabic-indic"],
)
def test_a_sweep_file_of_bad_input_is_one_line_and_makes_nothing(
    copy: tuple[Path, Path], tmp_path: Path, text: str, line: str
) -> None:
    src, work = copy
    (src / "conf" / "sweep" / "mine.yaml").write_text(HEAD + text, encoding="utf-8")
    swept = tmp_path / "x"
    proc = run_copy(src, work, "-m", "+sweep=mine", "plan=true", f"hydra.sweep.dir={swept}")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stderr == f"{SHOWN}{' ' if line.startswith('(') else ''}{line}\n"
    assert "Traceback" not in proc.stdout + proc.stderr and not proc.stdout
    assert not swept.exists() and list(work.iterdir()) == []
