"""``resume=true`` takes over the probes of the searches of the record it runs again
(:mod:`flopsweep.reuse`): on the same set-up and kind of machine a size probed already is not run
again; on another machine nothing is reused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_py, run_py_signalled
from unit.test_search_resume import TINY  # shared with the unit tier


def probe_lines(log: str) -> list[tuple[int, bool]]:
    """``(n_layer, reused)`` of every ``search.model=largest: probe K: n_layer=N ...`` line, in order."""
    found = re.finditer(r"search\.model=largest: probe \d+: n_layer=(\d+) [^\n]*", log)
    return [(int(m.group(1)), "(reused: resume=true)" in m.group(0)) for m in found]


@pytest.mark.slow
def test_a_resumed_search_does_not_probe_again_what_the_interrupted_one_probed(tmp_path: Path) -> None:
    """SIGTERM after the first probe (its error record keeps it); ``resume=true`` takes it over (its
    ``L1/`` is not run again: the new ``model_search/`` lacks it) and probes the rest; the size found,
    the probes and their statuses are the uninterrupted search's (without a budget the CPU search
    doubles: 1, 2, 4, all fit). On the old code the rerun probed 1 again."""
    args = [*TINY, "search.model=largest", "search.max_n_layer=4", "steps.warmup=1", "steps.measure=1"]
    whole = tmp_path / "whole"
    proc = run_py(*args, f"hydra.run.dir={whole}", timeout=900)
    uninterrupted = json.loads((whole / "metrics.json").read_text())
    assert uninterrupted["status"] == "ok", proc.stderr[-3000:]
    cut = tmp_path / "cut"
    code, _ = run_py_signalled(*args, f"hydra.run.dir={cut}", when="search.model=largest: probe 1: ")
    assert code == 143
    first = json.loads((cut / "metrics.json").read_text())
    assert first["status"] == "error" and [p["n_layer"] for p in first["run"]["model_search"]["probes"]] == [
        1
    ]
    proc = run_py(*args, f"hydra.run.dir={cut}", "resume=true", timeout=900)
    log = proc.stdout + proc.stderr
    record = json.loads((cut / "metrics.json").read_text())
    assert record["status"] == "ok", log[-3000:]
    run_id = first["run"]["id"]
    line = f"1 probe of run {run_id} (metrics.error-{run_id}.json; n_layer 1) can stand in for the sizes"
    assert f"search.model=largest: resume=true: {line} this search reaches" in log, log[-3000:]
    assert "search.model=largest: resume=true: reused 1 probe (n_layer 1)" in log, log[-3000:]
    search, whole_search = record["run"]["model_search"], uninterrupted["run"]["model_search"]
    assert probe_lines(log) == [(1, True), (2, False), (4, False)]
    assert sorted(p.name for p in (cut / "model_search").iterdir()) == ["L2", "L4"]  # 1 was not run again
    # L1, and L2 when the signal landed after probe 2 had started (a loaded machine): set aside
    assert "L1" in {p.name for p in (cut / f"model_search.error-{run_id}").iterdir()}
    assert [p.get("reused", False) for p in search["probes"]] == [True, False, False]
    assert search["probes"][0] == {**first["run"]["model_search"]["probes"][0], "reused": True}
    assert search["result"] == whole_search["result"] == record["model"]["n_layer"] == 4
    assert [(p["n_layer"], p["status"]) for p in search["probes"]] == [
        (p["n_layer"], p["status"]) for p in whole_search["probes"]
    ]
    assert search["n_params"] == whole_search["n_params"] and record["model"]["name"] == "llama-tiny-L4"
