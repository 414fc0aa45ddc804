"""An Optuna study that drew one set-up twice: its two unpooled rows are never judged a tie with each other
(docs/reliability-13.md row 1012)."""

from __future__ import annotations

import pandas as pd

from analysis.significance import verdict
from analysis.spread import setup_text


def _runs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setup_id": ["mbs4", "mbs4", "mbs2"],
            "world_size": [1, 1, 1],
            "repeat_group": [None, None, None],  # repeats=1: no group joins the study's trials
            "tokens_per_s": [1000.0, 990.0, 700.0],
            "tokens_per_s_ci_low": [950.0, 940.0, 600.0],
            "tokens_per_s_ci_high": [1050.0, 1040.0, 800.0],
        }
    )


def test_the_same_set_up_is_one_text_and_others_differ():
    text = setup_text(_runs())
    assert text[0] == text[1] != text[2] and text[0] != ""
    assert setup_text(_runs().assign(setup_id=None)).eq("").all()  # unknown: never the same


def test_the_verdict_compares_the_best_with_another_set_up_not_itself():
    runs = _runs()
    tied, line = verdict(runs, "tokens_per_s", pd.Series(True, index=runs.index))
    assert tied == []  # was [0, 1]: "Not significant ... (tie?)" of one set-up against itself
    assert line is not None and line.startswith(
        "Significant: the best by tokens_per_s, 1000 [950, 1050] and 700"
    )
    assert "ranked rows 2 measure a set-up ranked above them again" in line
    apart = runs.assign(setup_id=["mbs4", "mbs8", "mbs2"])  # two set-ups: a tie as before
    tied, line = verdict(apart, "tokens_per_s", pd.Series(True, index=runs.index))
    assert (
        tied == [0, 1]
        and line is not None
        and line.startswith("Not significant")
        and "ranked rows" not in line
    )
