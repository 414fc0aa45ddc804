"""Time ``analysis.load`` on 10,000 synthetic ``metrics.json`` records (issue 5: under 5 s on 2 cores).

    python benchmarks/analysis_load.py [--records 10000] [--repeat 3]

The records are copies of a committed H200 record (schema v1, full size: per-step times,
per-rank memory) laid out like Hydra multiruns (100 sweeps of 100 jobs) in a temporary
directory. Each copy gets its own run id, backend, attention and micro batch size; the
iteration time scales with the micro batch so that its TFLOPs stay consistent and the
loader's mismatch check passes. Not part of the test suite: a timing, not an assert.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis import load  # noqa: E402

TEMPLATE = ROOT / "benchmarks" / "results" / "h200" / "backends" / "2" / "metrics.json"
BACKENDS = ["single", "ddp", "fsdp", "deepspeed"]
ATTENTION = ["sdpa", "standard", "sdpa-flash", "sdpa-cudnn"]


def synthetic(template: dict, i: int) -> dict:
    """Record ``i``: the template with its own id, backend, attention and micro batch size."""
    rec = copy.deepcopy(template)
    mbs = 1 << (i % 5)  # 1..16
    scale = mbs / rec["config"]["batch"]["micro_batch_size"]
    rec["run"].update(id=f"bench-{i:05d}", job_num=i % 100)
    rec["config"]["backend"]["name"] = BACKENDS[i % len(BACKENDS)]
    rec["config"]["attention"]["name"] = ATTENTION[(i // 5) % len(ATTENTION)]
    rec["config"]["batch"]["micro_batch_size"] = mbs
    it = rec["metrics"]["iteration_time_s"]
    for key in ("mean", "median", "min", "max", "std"):
        it[key] *= scale
    it["values"] = [v * scale for v in it["values"]]
    if i % 50 == 49:  # some failed runs, as a real sweep has
        rec["status"], rec["metrics"] = "oom", dict.fromkeys(rec["metrics"])
    return rec


def write_records(root: Path, n: int) -> None:
    template = json.loads(TEMPLATE.read_text())
    for i in range(n):
        job = root / f"sweep-{i // 100:03d}" / str(i % 100)
        job.mkdir(parents=True)
        (job / "metrics.json").write_text(json.dumps(synthetic(template, i), indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        write_records(Path(tmp), args.records)
        print(f"wrote {args.records} records in {time.perf_counter() - t0:.1f} s")
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            df = load(tmp)
            times.append(time.perf_counter() - t0)
        flagged = int(df.tflops_mismatch.sum() + df.duplicate_run_id.sum()) + len(df.attrs["unreadable"])
        assert len(df) == args.records and flagged == 0, (len(df), flagged)
    print(
        f"load() of {args.records} records on {os.cpu_count()} CPU(s): "
        f"best {min(times):.2f} s, first {times[0]:.2f} s, all {', '.join(f'{t:.2f}' for t in times)} s "
        f"(target < 5 s)"
    )


if __name__ == "__main__":
    main()
