"""Allocator retries near the memory edge (issue 41): what predicts them, and what they cost.

Reads every ok CUDA record under the results folders that counts ``metrics.cuda_alloc_retries`` and
re-estimates its peak with today's memory estimate (:func:`flopsweep.memory.estimate`, the figure a
prediction made now flags by; ``benchmarks/memory_estimate.py``'s reading of old configs), beside the
estimate its run recorded (``metrics.predicted_peak_gib``). The predicted headroom is
:func:`flopsweep.memory_edge.headroom` against the GPU's memory of the peak table
(:func:`flopsweep.memory_edge.device_capacity_bytes`: H200 140.4, H100 79.6 GiB; torch reports 139.8 and
79.2). Prints:

1. retries by headroom band and backend, and the largest headroom of a record that retried;
2. :data:`flopsweep.memory_edge.EDGE_HEADROOM` as a classifier: flagged records that retried, records
   not flagged that retried (each named, with its estimate against its measured peak);
3. the cost: for each flagged record with a recorded prediction, retries per step and the measured step
   over the predicted; and a step-time penalty's leave-one-out error: the median ratio of the other
   flagged records (retried or not: before the run nobody knows which) applied to the one left out,
   against no penalty, over the flagged records and over those that retried.

``--check`` exits 1 when a record that retried with an estimate within 5% of its measured peak is
not flagged (the rule no longer holds for the records). CPU only; reads the records, runs nothing.

    python benchmarks/memory_edge.py [benchmarks/results] [--check]
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_estimate import buckets_of_its_day, probe_copies_of_its_day, run_config  # noqa: E402

from flopsweep.layout import Layout  # noqa: E402
from flopsweep.memory import estimate  # noqa: E402
from flopsweep.memory_edge import EDGE_HEADROOM, RETRIED, at_edge, device_capacity_bytes, headroom  # noqa: E402
from flopsweep.safe_read import read_json  # noqa: E402

GIB = 2**30
BANDS = (0.0, 0.10, EDGE_HEADROOM, 0.20, 1.0)
"""Headroom bands (shares of the GPU's memory) of the first table; a negative headroom falls in the first."""
TRUSTED = 0.05
"""An estimate within this share of its measured peak is trusted in the rule (``--check``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Edge:
    """One record: its path, backend, retries, estimates, peaks and steps (GiB, seconds)."""

    where: str
    backend: str
    retries: int
    steps: int
    estimate: float
    recorded: float | None
    capacity: float
    allocated: float
    reserved: float
    measured_s: float | None
    predicted_s: float | None

    @property
    def headroom(self) -> float:
        return headroom(self.estimate, self.capacity)

    @property
    def flagged(self) -> bool:
        return at_edge(self.estimate * GIB, self.capacity * GIB)

    @property
    def trusted(self) -> bool:
        return abs(self.estimate / self.allocated - 1) <= TRUSTED

    @property
    def ratio(self) -> float | None:
        """Measured over predicted step; None without both."""
        return self.measured_s / self.predicted_s if self.measured_s and self.predicted_s else None


def edges(roots: list[Path]) -> list[Edge]:
    """An :class:`Edge` per ok record under ``roots`` on a GPU the peak table knows, with
    ``cuda_alloc_retries`` and a measured peak."""
    out = []
    for root in roots:
        for path in sorted(root.rglob("metrics.json")):
            record = read_json(path)
            metrics, system = record.get("metrics") or {}, record.get("system") or {}
            capacity = device_capacity_bytes(system.get("device_name"))
            retries, allocated = metrics.get("cuda_alloc_retries"), metrics.get("peak_cuda_allocated_bytes")
            if record.get("status") != "ok" or capacity is None or retries is None or not allocated:
                continue
            started = (record.get("run") or {}).get("started_at", "")
            cfg = buckets_of_its_day(run_config(record["config"]), started)
            layout = Layout(**(system.get("parallel") or {"dp_shard": system["world_size"]}))
            with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed's accelerator line
                est = estimate(cfg, layout).total
            probe = (metrics.get("predicted") or {}).get("layer_probe") or {}
            est += probe_copies_of_its_day(
                record["config"], cfg, layout, started, probe.get("layers"), probe.get("released")
            )
            step = metrics.get("iteration_time_s") or {}
            out.append(
                Edge(
                    where=str(path.parent.relative_to(root.parent)),
                    backend=cfg.backend.name,
                    retries=int(retries),
                    steps=int((record["config"].get("steps") or {}).get("measure") or 1),
                    estimate=est / GIB,
                    recorded=metrics.get("predicted_peak_gib"),
                    capacity=capacity / GIB,
                    allocated=allocated / GIB,
                    reserved=(metrics.get("peak_cuda_reserved_bytes") or 0) / GIB,
                    measured_s=step.get("mean") if isinstance(step, dict) else None,
                    predicted_s=(metrics.get("predicted") or {}).get("iteration_time_s"),
                )
            )
    return out


def bands(rows: list[Edge]) -> list[str]:
    """Retried / records per headroom band and backend."""
    backends = sorted({r.backend for r in rows})
    lines = [f"{'headroom':>12} " + " ".join(f"{b:>12}" for b in backends) + f" {'all':>12}"]
    for lo, hi in zip(BANDS, BANDS[1:], strict=False):
        inside = [r for r in rows if (r.headroom < hi) and (r.headroom >= lo or lo == 0.0)]
        cells = []
        for b in [*backends, None]:
            some = [r for r in inside if b is None or r.backend == b]
            cells.append(f"{sum(r.retries > 0 for r in some)}/{len(some)}")
        lines.append(f"{f'{lo:.0%}-{hi:.0%}':>12} " + " ".join(f"{c:>12}" for c in cells))
    return lines


def loo(usable: list[Edge]) -> tuple[list[float], list[float], list[float]]:
    """Per record of ``usable`` (each with a ratio): |error| without a penalty, |error| with the median
    ratio of the others (leave-one-out), and that ratio."""
    plain, penalised, ratios = [], [], []
    for r in usable:
        others = statistics.median(o.ratio for o in usable if o is not r)
        plain.append(abs(r.predicted_s / r.measured_s - 1))
        penalised.append(abs(r.predicted_s * others / r.measured_s - 1))
        ratios.append(others)
    return plain, penalised, ratios


def report(rows: list[Edge]) -> tuple[list[str], list[Edge]]:
    """The printed lines, and the trusted records that retried without the flag (``--check``)."""
    retried = [r for r in rows if r.retries > 0]
    flagged = [r for r in rows if r.flagged]
    out = [
        f"{len(rows)} ok CUDA records with cuda_alloc_retries; {len(retried)} retried; "
        f"headroom = (GPU memory - today's estimate) / GPU memory",
        "",
        "Retried / records by headroom band and backend:",
        *bands(rows),
        "",
    ]
    trusted = [r for r in retried if r.trusted]
    top = max(trusted, key=lambda r: r.headroom)
    out.append(
        f"largest headroom that retried with an estimate within {TRUSTED:.0%} of its peak: "
        f"{top.headroom:.1%} ({top.where}, {top.estimate:.1f} of {top.capacity:.1f} GiB)"
    )
    safe = [r for r in rows if not r.flagged]
    out.append(
        f"rule: headroom < {EDGE_HEADROOM:.0%}: {len(flagged)} flagged, "
        f"{sum(r.retries > 0 for r in flagged)} of them retried; "
        f"{len(safe)} not flagged, {sum(r.retries > 0 for r in safe)} of them retried"
    )
    missed = [r for r in retried if not r.flagged]
    for r in missed:
        out.append(
            f"  retried unflagged: {r.where}: headroom {r.headroom:.1%}, estimate {r.estimate:.1f} GiB "
            f"against {r.allocated:.1f} measured ({r.estimate / r.allocated - 1:+.1%}), "
            f"reserved {r.reserved:.1f}"
        )
    out += ["", "Flagged records with a recorded prediction (measured / predicted step):"]
    out.append(
        f"{'record':58} {'backend':9} {'head':>6} {'retries/step':>12} "
        f"{'meas_s':>7} {'pred_s':>7} {'ratio':>6}"
    )
    for r in sorted(flagged, key=lambda r: (r.retries == 0, r.where)):
        if r.ratio is None:
            continue
        out.append(
            f"{r.where[:58]:58} {r.backend:9} {r.headroom:6.1%} {r.retries / r.steps:12.2f} "
            f"{r.measured_s:7.3f} {r.predicted_s:7.3f} {r.ratio:6.2f}"
        )
    fsdp = [r for r in flagged if r.backend == "fsdp"]
    for name, pool in (("all flagged", flagged), ("FSDP2 flagged", fsdp)):
        usable = [r for r in pool if r.ratio is not None]
        if len(usable) < 3:
            continue
        plain, penalised, ratios = loo(usable)  # the penalty is learnt from the pool, retried or not
        hit = [i for i, r in enumerate(usable) if r.retries]
        for what, keep in ((name, range(len(usable))), (f"{name} that retried", hit)):
            if keep:
                p = statistics.median(plain[i] for i in keep)
                q = statistics.median(penalised[i] for i in keep)
                out.append(
                    f"{what} ({len(keep)}): median |error| without a penalty {p:.1%}, with the leave-one-out "
                    f"median ratio of the others ({min(ratios):.2f}-{max(ratios):.2f}) {q:.1%}"
                )
    cost = [(r.measured_s - r.predicted_s, r.ratio) for r in flagged if r.retries and r.ratio and r.ratio > 1]
    if cost:
        out.append(
            f"retried and slower than predicted ({len(cost)}): "
            f"{min(c for c, _ in cost):.2f}-{max(c for c, _ in cost):.2f} s a step over the prediction"
        )
    return out, [r for r in missed if r.trusted]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    roots = [Path(a) for a in argv if not a.startswith("--")] or [Path(__file__).parent / "results"]
    rows = edges(roots)
    lines, missed = report(rows)
    print("\n".join(lines))
    counted = retried_by_backend(rows)
    print(f"flagged records that retried, of those flagged, per backend: {counted}")
    if check and missed:
        print(f"check failed: {len(missed)} retried with a trusted estimate and no flag", file=sys.stderr)
        return 1
    if check and counted != {k: RETRIED[k] for k in counted}:
        print(f"check failed: memory_edge.RETRIED says {RETRIED}; the records {counted}", file=sys.stderr)
        return 1
    return 0


def retried_by_backend(rows: list[Edge]) -> dict:
    """``(retried, flagged)`` per ``backend.name`` (and None: every backend) over the flagged ``rows``:
    what :data:`flopsweep.memory_edge.RETRIED` quotes in the flag."""
    out: dict = {None: (0, 0)}
    for r in rows:
        if r.flagged:
            for key in (r.backend, None):
                n, of = out.get(key, (0, 0))
                out[key] = (n + (r.retries > 0), of + 1)
    return out


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
