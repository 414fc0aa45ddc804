"""Session 40: an interrupt after every rank's figures were gathered keeps the measurement
(docs/reliability-11.md #742; the signals themselves: tests/integration/test_teardown_signals_40.py)."""

from __future__ import annotations

from pathlib import Path

from flopsweep.launch import SCRATCH
from flopsweep.outcome import gathered_before


def test_an_interrupt_after_the_gather_keeps_the_measurement(tmp_path: Path) -> None:
    """Was: a Ctrl-C while the ranks tore down (every figure with rank 0, one rank stuck in
    ``destroy_process_group``) recorded ``error in measure``: a whole measurement lost. Now ``ok`` with a
    ``teardown_signal`` warning; before the gather (no ``rank_result.json``), or a file that is not a
    regular one, it is the interrupt's error as before."""
    scratch = tmp_path / SCRATCH
    scratch.mkdir()
    assert gathered_before(scratch, "Ctrl-C (SIGINT)") is None  # not gathered: the error record
    ranks = [{"rank": 0, "step_times_s": [0.05]}, {"rank": 1, "step_times_s": [0.05]}]
    (tmp_path / "elsewhere.json").write_text('{"ranks": [{"rank": 0}]}')
    (scratch / "rank_result.json").symlink_to(tmp_path / "elsewhere.json")
    assert gathered_before(scratch, "Ctrl-C (SIGINT)") is None  # never through a link
    (scratch / "rank_result.json").unlink()
    (scratch / "rank_result.json").write_text(f'{{"ranks": {ranks!r}}}'.replace("'", '"'))
    kept = gathered_before(scratch, "SIGTERM")
    assert kept.status == "ok" and kept.ranks == ranks
    assert kept.warnings == [
        "teardown_signal: interrupted by SIGTERM while the ranks tore down, after their figures were "
        "gathered; the measurement is whole"
    ]
    (scratch / "rank_result.json").write_text('{"ranks": []}')
    assert gathered_before(scratch, "SIGTERM") is None
