"""Session 39 (docs/reliability-10.md #542): a model search that stopped at its own limit
(``search.max_n_layer``), nothing larger tried, showed its size as the set-up's frontier with a blank
``larger_failed``, as if memory bounded it (the run's log said "raise it to search further", the table
nothing). The fixture is a real CPU search (``+sweep=frontier-cpu backend=fsdp
activation_checkpointing=none nproc_per_node=1 search.max_n_layer=8``), its probes 1, 2 and 8 layers, ok."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from helpers import put

from analysis.__main__ import main
from analysis.fields import search_failed
from analysis.frontier import frontier_table
from analysis.load import load

AT_LIMIT = Path(__file__).resolve().parents[1] / "fixtures" / "search-at-limit"


def _record() -> dict:
    return json.loads((AT_LIMIT / "0" / "metrics.json").read_text())


def test_a_search_at_its_limit_says_so_in_larger_failed() -> None:
    """#542: the table's row says the limit was reached, in every format (the CSV's cell below)."""
    record = _record()
    assert record["run"]["model_search"]["limit"] == record["run"]["model_search"]["result"] == 8
    assert search_failed(record) == "none: search.max_n_layer=8 reached"
    (row,) = frontier_table(load(AT_LIMIT)).to_dict("records")
    assert row["model"] == "llama-tiny-L8" and row["larger_failed"] == "none: search.max_n_layer=8 reached"


def test_a_failed_probe_or_a_search_below_its_limit_is_unchanged(tmp_path: Path, capsys) -> None:
    """A probe that failed above the size found still names that probe; a size found below the limit
    with no failed probe (a search cut short) stays blank; a sequence search names its own key."""
    record = _record()
    failed = copy.deepcopy(record)
    failed["run"]["model_search"]["limit"] = 16
    failed["run"]["model_search"]["probes"].append({"n_layer": 9, "n_params": 1_837_440, "status": "oom"})
    assert search_failed(failed) == "n_layer=9 (1.84M): oom"
    below = copy.deepcopy(record)
    below["run"]["model_search"]["limit"] = 16
    assert search_failed(below) is None
    seq = {"run": {"model_search": {"grow": "seq_len", "limit": 4096, "result": 4096, "probes": []}}}
    assert search_failed(seq) == "none: search.max_seq_len=4096 reached"
    put(tmp_path / "runs" / "0", record)
    assert main([str(tmp_path / "runs"), "--frontier", "--format", "csv", "--output", "-"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].endswith(',1,"none: search.max_n_layer=8 reached"'), out
