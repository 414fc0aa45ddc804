"""The compute probe's prediction against the measured step, one row per ok record under DIR
(standard library only): ``python benchmarks/probe_table.py DIR``."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(root: Path) -> list[dict]:
    out = []
    for path in sorted(root.rglob("metrics.json")):
        r = json.loads(path.read_text())
        if r.get("status") != "ok":
            out.append({"run": path.parent.name, "status": r.get("status")})
            continue
        cfg, m = r["config"], r["metrics"]
        p, step = m.get("predicted") or {}, m["iteration_time_s"]["mean"]
        probe = p.get("probe") or {}
        pred = p.get("iteration_time_s")
        out.append(
            {
                "run": path.parent.name,
                "model": cfg["model"]["name"],
                "backend": cfg["backend"]["name"],
                "compile": cfg["compile"],
                "ac": cfg["activation_checkpointing"]["name"],
                "mb": cfg["batch"]["micro_batch_size"],
                "measured_s": round(step, 4),
                "predicted_s": None if pred is None else round(pred, 4),
                "error": None if pred is None else round((pred - step) / step, 4),
                "compute_source": p.get("compute_source"),
                "block_ms": None if "block_s" not in probe else round(probe["block_s"] * 1e3, 3),
                "head_ms": None if "head_s" not in probe else round(probe["head_s"] * 1e3, 3),
                "opt_s": None if p.get("optimizer_s") is None else round(p["optimizer_s"], 4),
                "probe_wall_s": None if "wall_s" not in probe else round(probe["wall_s"], 1),
                "fallback": probe.get("fallback"),
            }
        )
    return out


def main(root: str) -> None:
    found = rows(Path(root))
    for row in found:
        print(json.dumps(row))
    errors = [abs(r["error"]) for r in found if r.get("error") is not None]
    if errors:
        print(f"median |error| {statistics.median(errors):.1%}, worst {max(errors):.1%} over {len(errors)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
