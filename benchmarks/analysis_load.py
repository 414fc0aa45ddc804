"""Time ``analysis.load`` on 10,000 synthetic ``metrics.json`` records (issue 5: under 5 s on 2 cores),
and optionally the HTML report (``--report``: 1,000 records of 400 models in at most 10 s).

    python benchmarks/analysis_load.py [--records 10000] [--repeat 3]
    python benchmarks/analysis_load.py --records 1000 --models 400 --repeat 1 --report

The records are copies of a committed H200 record (schema v1, full size: per-step times,
per-rank memory), upgraded to schema v2 by :func:`analysis.schema.upgrade_v1_to_v2` and
laid out like Hydra multiruns (100 jobs per sweep directory) in a temporary directory.
Each copy gets its own run id, backend, attention, micro batch size and (with ``--models``)
model name; the iteration time and the FLOPs scale with the micro batch so that its
TFLOPs stay consistent and the loader's recomputation check passes. Not part of the test
suite: a timing, not an assert.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis import load  # noqa: E402
from analysis.__main__ import main as analysis_main  # noqa: E402
from analysis.schema import upgrade_v1_to_v2  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

TEMPLATE = ROOT / "benchmarks" / "results" / "h200" / "backends" / "2" / "metrics.json"
BACKENDS = ["single", "ddp", "fsdp", "deepspeed"]
ATTENTION = ["sdpa", "standard", "sdpa-flash", "sdpa-cudnn"]
SCALED = ("global_batch_size", "tokens_per_step", "model_flops_per_iteration", "hardware_flops_per_iteration")


def synthetic(template: dict, i: int, models: int = 0) -> dict:
    """Record ``i``: the v2 template with its own id, backend, attention, micro batch size and,
    when ``models`` > 0, one of that many model names."""
    rec = copy.deepcopy(template)
    mbs = 1 << (i % 5)  # 1..16
    scale = mbs / rec["config"]["batch"]["micro_batch_size"]
    rec["run"].update(id=f"bench-{i:05d}", job_num=i % 100)
    if models:
        rec["config"]["model"]["name"] = rec["model"]["name"] = f"gpt-m{i % models:04d}"
    rec["config"]["backend"] = {"name": BACKENDS[i % len(BACKENDS)]}
    rec["config"]["attention"]["name"] = ATTENTION[(i // 5) % len(ATTENTION)]
    rec["config"]["batch"]["micro_batch_size"] = mbs
    m = rec["metrics"]
    it = m["iteration_time_s"]
    for key in ("mean", "median", "min", "max", "std"):
        it[key] *= scale
    it["values"] = [v * scale for v in it["values"]]
    for key in SCALED:
        m[key] *= scale
    if i % 50 == 49:  # some failed runs, as a real sweep has
        rec["status"], rec["metrics"] = "oom", dict.fromkeys(m)
    return rec


def write_records(root: Path, n: int, models: int = 0) -> None:
    template = upgrade_v1_to_v2(json.loads(TEMPLATE.read_text()))
    for i in range(n):
        job = root / f"sweep-{i // 100:03d}" / str(i % 100)
        job.mkdir(parents=True)
        (job / "metrics.json").write_text(json.dumps(synthetic(template, i, models), indent=2))


def time_report(root: Path) -> float:
    """Seconds for ``python -m analysis ROOT --format html --output FILE`` (in this process)."""
    out = root.parent / "report.html"
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        code = analysis_main([str(root), "--format", "html", "--output", str(out), "--force"])  # each repeat
    elapsed = time.perf_counter() - t0
    assert code == 0 and out.stat().st_size > 0
    return elapsed


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=0, help="distinct model names (0: the template's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--report", action="store_true", help="also time the HTML report (target < 10 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        t0 = time.perf_counter()
        write_records(root, args.records, args.models)
        print(f"wrote {args.records} records in {time.perf_counter() - t0:.1f} s")
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            df = load(root)
            times.append(time.perf_counter() - t0)
        flagged = int(df.tflops_mismatch.sum() + df.duplicate_run_id.sum()) + len(df.attrs["unreadable"])
        assert len(df) == args.records and flagged == 0, (len(df), flagged)
        print(
            f"load() of {args.records} records on {os.cpu_count()} CPU(s): "
            f"best {min(times):.2f} s, first {times[0]:.2f} s, all {', '.join(f'{t:.2f}' for t in times)} s "
            f"(target < 5 s for 10,000)"
        )
        if args.report:
            seconds = time_report(root)
            print(
                f"HTML report of {args.records} records, {df.model.nunique()} models: {seconds:.2f} s "
                "(target < 10 s for 1,000 records of 400 models)"
            )


if __name__ == "__main__":
    main()
