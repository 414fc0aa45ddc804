"""YAML's spellings of a number no float holds, in a refusal (session 38, docs/reliability-8.md #471-#472): a
sweep file's ``budget.tokens: .inf`` was refused as ``budget.tokens=inf`` (the value as Python holds it, a
spelling the file does not have), where ``1e400`` was shown as written (#400). Now the file's ``.inf``,
``-.inf``, ``.nan`` (any case) are shown as written; on the command line, where Hydra's grammar reads ``.inf``
as a text, the line shows the text as typed, and each fix is itself accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SWEEP_ARGV, defaults_text, sweep_conf

from flopsweep.sweep_file_keys import values_problem
from run import FILE_VALUE_CHECKS, refusal

GROUPS = {"model": ("gpt-tiny", "gpt-125m")}
SHOWN = "Invalid config: conf/sweep/mine.yaml"
FINITE = "must be a finite number. Fix: set e.g."
IN = " in conf/sweep/mine.yaml."


def _said(tmp_path: Path, text: str) -> str | None:
    return values_problem(SWEEP_ARGV, FILE_VALUE_CHECKS, sweep_conf(tmp_path, text, GROUPS))


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "budget: {tokens: .inf}\n",
            f"budget.tokens=.inf: {FINITE} budget: {{tokens: 15e12}}, or budget: {{tokens: null}}{IN}",
        ),
        (
            "budget: {tokens: -.Inf}\n",
            f"budget.tokens=-.Inf: {FINITE} budget: {{tokens: 15e12}}, or budget: {{tokens: null}}{IN}",
        ),
        (
            "timeout_s: .nan\n",
            f"timeout_s=.nan: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800{IN}",
        ),
        (
            "timeout_s: .INF\n",
            f"timeout_s=.INF: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800{IN}",
        ),
        (
            "cost: {usd_per_gpu_hour: .NaN}\n",
            f"cost.usd_per_gpu_hour=.NaN: {FINITE} cost: {{usd_per_gpu_hour: 2.5}}, or cost: "
            f"{{usd_per_gpu_hour: null}}{IN}",
        ),
        (
            "timeout_s: 1e400\n",
            f"timeout_s=1e400: must be a finite number of seconds > 0. Fix: set e.g. timeout_s: 1800{IN}",
        ),
    ],
)
def test_a_sweep_files_non_finite_number_is_shown_as_the_file_writes_it(
    tmp_path: Path, text: str, line: str
) -> None:
    """Was: ``budget.tokens=inf``, ``timeout_s=nan`` (``1e400`` already as written)."""
    assert _said(tmp_path, text) == f"{SHOWN}: {line}"
    # session 41 (#883): the fix in the file's form, written in the file: accepted
    fixed = line.partition(". Fix: set e.g. ")[2].split(", or ")[0].removesuffix(IN)
    assert _said(tmp_path / "fix", fixed + "\n") is None


def test_the_command_lines_value_stays_the_command_lines(tmp_path: Path) -> None:
    """A key the command line gives is refused with its own value, never the file's spelling."""
    conf = sweep_conf(tmp_path, defaults_text("_self_") + "budget: {tokens: .inf}\n", GROUPS)
    said = values_problem([*SWEEP_ARGV, "budget.tokens=-inf"], FILE_VALUE_CHECKS, conf)
    assert said is None or "budget.tokens=.inf" not in said


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            "budget.tokens=.inf",
            "budget.tokens='.inf': is not a number. Fix: set e.g. budget.tokens=15e12, or ",
        ),
        (
            "budget.tokens=-.inf",
            "budget.tokens='-.inf': is not a number. Fix: set e.g. budget.tokens=15e12, or ",
        ),
        ("timeout_s=.nan", "timeout_s='.nan': is not a number. Fix: set timeout_s to a number, e.g. "),
    ],
)
def test_on_the_command_line_yamls_spelling_is_a_text_shown_as_typed(typed: str, line: str) -> None:
    """Hydra's grammar reads ``.inf`` as a text (``inf`` is its number): the line quotes what was typed, and
    its fix passes."""
    said = refusal(["plan=true", "plan_gpu=H100", typed])
    assert said is not None and said.startswith(f"Invalid config: {line}"), said
    fix = said.partition("e.g. ")[2].partition(",")[0].partition(" ")[0].rstrip(".")
    assert refusal(["plan=true", "plan_gpu=H100", fix]) is None, fix
