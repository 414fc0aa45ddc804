"""Session 40 (docs/reliability-11.md #703): the tuner's report (terminal, ``tune.md``, ``tune.json``) named
neither the set-ups the rules kept but it never measured nor why a ``held-out`` cell is blank. Now one line
each (:func:`flopsweep.tune.unmeasured_reason`, :func:`flopsweep.tune.stopped_before_reason`,
:func:`flopsweep.tune.held_out_reason`, :func:`flopsweep.tunereport.unmeasured`,
:func:`flopsweep.tunereport.held_out_lines`). No process: the report's functions on real candidates."""

from __future__ import annotations

import json

from flopsweep import tunereport
from flopsweep.tune import (
    Budget,
    Candidate,
    held_out_reason,
    stopped_before_reason,
    unmeasured_reason,
)


def _ran(i: int, label: str, *values: float) -> Candidate:
    c = Candidate(i, (label, "device=cpu"), label, objective="tokens_per_s")
    c.values, c.steps, c.gpu_s = list(values), [1 / v for v in values], [10.0] * len(values)
    return c


def test_each_set_up_never_measured_and_each_blank_held_out_cell_is_said_with_why():
    win = _ran(0, "batch.micro_batch_size=2", 10.0, 10.2, 9.8)
    win.held_out = 9.0
    other = _ran(1, "batch.micro_batch_size=1", 6.0)
    other.held_out_blank = held_out_reason(
        "no prediction", "no calibration record of this model", "tokens_per_s"
    )
    late = Candidate(2, ("batch.micro_batch_size=4",), "batch.micro_batch_size=4", prior=7.0, predicted=5.0)
    late.unmeasured = unmeasured_reason(late, [win, other], initial=2, direction="maximize")
    joined = Candidate(3, ("batch.micro_batch_size=8",), "batch.micro_batch_size=8", predicted=12.0)
    joined.unmeasured = stopped_before_reason("the GPU-time budget is spent")
    gone = Candidate(4, ("backend=ddp",), "backend=ddp", pruned="refused: no")
    gone.unmeasured = "not said: a pruned set-up's line is its pruning"
    s = tunereport.summary(
        [win, other, late, joined, gone], [win], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0, spent_s=40.0), rounds=[], stopped="the GPU-time budget is spent",
    )  # fmt: skip
    json.dumps(s, allow_nan=False)
    text = tunereport.lines(s)
    assert text[text.index("never measured (kept by the rules, not run): 2") + 1 :][:2] == [
        "  batch.micro_batch_size=4: not among the 2 best predicted that round 0 measured (prior prediction "
        "7); the refit after it predicts 5, short of the worst survivor (6)",
        "  batch.micro_batch_size=8: joined after round 0 as a challenger, but the tuner stopped before its "
        "round: the GPU-time budget is spent",
    ]
    blank = (
        "  held-out blank for batch.micro_batch_size=1: no prediction from the other set-ups' runs alone: "
    )
    assert blank + "no calibration record of this model" in text
    assert not any("held-out blank for batch.micro_batch_size=2" in line for line in text)  # its cell holds 9
    md = tunereport.markdown(s)
    assert (
        "## Never measured" in md
        and "| batch.micro_batch_size=8 | joined after round 0 as a challenger" in md
    )
    assert "- held-out blank for batch.micro_batch_size=1: no prediction from the other set-ups' runs" in md
    by = {u["label"]: u for u in s["setups"]}
    assert (
        by["backend=ddp"]["unmeasured"] is None and by["batch.micro_batch_size=2"]["held_out_blank"] is None
    )


def test_the_reasons_follow_the_tuners_rules():
    worst = _ran(0, "a", 6.0)
    none_before = Candidate(1, ("b",), "b")
    assert unmeasured_reason(none_before, [worst], initial=3, direction="maximize") == (
        "not among the 3 best predicted that round 0 measured (no prior prediction: the space's order); the "
        "refit after it predicts none, so it cannot beat the worst survivor (6)"
    )
    past = Candidate(2, ("c",), "c", prior=1.0, predicted=8.0)  # beats 6, but challengers took the places
    assert unmeasured_reason(past, [worst], initial=1, direction="maximize").endswith(
        "predicts 8, past the worst survivor (6), but 1 challengers predicted better took the places"
    )
    assert unmeasured_reason(past, [worst], initial=1, direction="minimize").endswith(
        "predicts 8, short of the worst survivor (6)"
    )
    assert unmeasured_reason(past, [], initial=1, direction="maximize").endswith(
        "no set-up survived round 0 to be beaten"
    )
    assert held_out_reason("ok", "", "hfu") == "the prediction from the other set-ups' runs gives no hfu"


def test_the_held_out_refit_says_why_it_is_blank_and_keeps_the_predictions_source():
    """``Tuning.hold_out`` (#705): the refit from the other set-ups' records set the set-up's ``source`` to
    its own (``tune.json``'s ``source`` then named the held-out's, not the prediction it was picked by)."""
    from types import SimpleNamespace

    from hydra_plugins.flopsweep_tune.tuning import Tuning

    c = _ran(0, "batch.micro_batch_size=2", 10.0)
    c.runs, c.source = ["/nowhere/0"], "calibrated (shipped records): h200/backends-v2/0/metrics.json"
    row = SimpleNamespace(status="ok", reason="")

    def predict(cand: Candidate, records: list) -> None:  # the plan's judge with no record of this model
        row.status, row.reason = "no prediction", "no calibration record of gpt-tiny"
        cand.source = row.reason
        return None

    tuning = SimpleNamespace(
        candidates=[c], plans={0: (None, None, row)}, objective="tokens_per_s", records=list, predict=predict
    )
    Tuning.hold_out(tuning)
    assert c.held_out is None and c.source.startswith("calibrated (shipped records)")
    assert (
        c.held_out_blank
        == "no prediction from the other set-ups' runs alone: no calibration record of gpt-tiny"
    )
