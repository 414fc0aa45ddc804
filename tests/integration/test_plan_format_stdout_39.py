"""A sweep of plans with ``plan_format=csv|json`` prints the file's text alone on stdout
(docs/reliability-9.md #533): ``-m plan=true ... plan_format=json > plan.json`` held Hydra's ``[HYDRA]
Launching 2 jobs locally`` and ``#0 : ...`` lines and flopsweep's ``1 of 2 jobs done`` before the JSON,
which no JSON reader took. The subprocess is the point: what reaches each stream."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from helpers import run_py

SMALL = [
    "space.backends=[fsdp]",
    "space.micro_batches=[2]",
    "space.checkpointing=[none]",
    "space.layouts=[dp]",
]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_sweeps_machine_format_is_alone_on_stdout(tmp_path: Path, fmt: str) -> None:
    proc = run_py(
        "-m", "plan=true", "model=llama3.2-1b,llama3.2-3b", "plan_clusters=[H100:8]", *SMALL,
        f"plan_format={fmt}", f"hydra.sweep.dir={tmp_path / 'S'}", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    if fmt == "json":
        said = json.loads(proc.stdout)
        assert set(said["jobs"]) == {"0", "1"} and len(said["rows"]) == 2
    else:
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        assert sorted(r["job"] for r in rows) == ["0", "1"]
    assert "Launching 2 jobs locally" in proc.stderr and "2 of 2 jobs done" in proc.stderr
