"""A frontier of one depth search and one sequence search, both of the defaults, names the set-up of both
rows alike (docs/reliability-13.md row 1011)."""

from __future__ import annotations

import json
from pathlib import Path

from analysis import load
from analysis.frontier import frontier_table
from unit.test_modelsearch import FIXTURES, variant, write
from unit.test_seqsearch import seq_variant


def test_the_depth_and_the_sequence_rows_both_name_backend_and_checkpointing(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    records = [
        variant(base, ckpt="none", n_params=3 * 10**9, tokens=5000.0, search=True),
        seq_variant(base, ckpt="none", seq_len=16384, tokens=4000.0, search=True),
    ]
    table = frontier_table(load(write(tmp_path, records)))
    assert table["grew"].tolist() == ["n_layer", "seq_len"]
    assert table["backend"].notna().all() and table["backend"].nunique() == 1
    assert table["activation_checkpointing"].tolist() == ["none", "none"]
