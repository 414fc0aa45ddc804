"""The same command run twice, into two folders, is one row of two rounds where one known code measured
both; a before and an after of an edit stay two rows (docs/reliability-14.md row 1035).

Was: ``python run.py model=llama-tiny device=cpu steps.measure=2 hydra.run.dir=/tmp/l43/a`` and ``.../b``,
then ``python -m analysis /tmp/l43``: two rows of one set-up (``reps`` 1 each), as runs of no
``run.repeat_group`` were never pooled. Hand-built records (the committed ``v2-ok`` rescaled,
``tests/helpers.round_records``) through the real loader.
"""

from __future__ import annotations

import pandas as pd
from helpers import round_records, write_rounds

import analysis
from flopsweep.identity import code_key

SHA = "8d88b6b9b941a8af830cf08dbbabda132ad3866e"


def _single_runs(tmp_path, codes: list[tuple[str | None, bool | None]]):
    """One ``repeats=1`` run of one set-up per ``(git_sha, git_dirty)``, each in a folder of its own."""
    recs = round_records([1000.0, 1250.0, 2000.0][: len(codes)])
    for rec, (sha, dirty) in zip(recs, codes, strict=True):
        rec["run"].update(repeat=0, repeats=1, repeat_group=None)
        rec["system"].update(git_sha=sha, git_dirty=dirty)
    for n, rec in enumerate(recs):
        write_rounds(tmp_path / f"run{n}", [rec])
    return analysis.load(tmp_path)


def test_the_same_set_up_run_twice_by_one_clean_commit_is_one_row_of_two_rounds(tmp_path) -> None:
    df = _single_runs(tmp_path, [(SHA, False), (SHA, False)])
    assert len(df) == 1
    row = df.iloc[0]
    assert row["repeats"] == 2 and row["ci_over"] == "repeats"
    assert row["run_dir"] == f"{tmp_path / 'run0' / '0'}, {tmp_path / 'run1' / '0'}"
    steps = [16.384, 13.1072]  # 16,384 tokens a step at 1,000 and 1,250 tokens/s
    assert abs(row["iteration_time_s_mean"] - sum(steps) / 2) < 1e-6
    assert pd.notna(row["tokens_per_s_ci_low"]) and row["tokens_per_s_ci_low"] < row["tokens_per_s"]


def test_runs_of_other_or_edited_or_unknown_code_stay_apart(tmp_path) -> None:
    other = "0" * 40
    df = _single_runs(tmp_path, [(SHA, False), (other, False), (SHA, True)])
    assert len(df) == 3 and df["repeats"].eq(1).all()  # a before and an after of an edit: compared
    assert df["code_id"].isna().sum() == 1  # the edited checkout's code is not known


def test_the_code_key_names_a_clean_commit_and_its_versions() -> None:
    system = {"git_sha": SHA, "git_dirty": False, "torch": "2.13.0", "cuda": None, "python": "3.11.9"}
    key = code_key({"system": system})
    assert key is not None and len(key) == 10
    assert code_key({"system": {**system, "torch": "2.14.0"}}) != key
    assert code_key({"system": {**system, "git_dirty": True}}) is None
    assert code_key({"system": {**system, "git_dirty": None}}) is None
    assert code_key({"system": {**system, "git_sha": None}}) is None
    assert code_key({}) is None
