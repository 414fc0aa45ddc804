"""How close ``plan=true``'s memory estimate (flopsweep.memory) comes to the measured peaks.

For every ok GPU record under a results folder: the estimate for its config next to its
``peak_cuda_allocated_bytes``, the relative error, and the median and worst errors per
backend. CPU only; reads the records, runs nothing.

    python benchmarks/memory_estimate.py benchmarks/results/h200 [--folder backends]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flopsweep import config as fconfig  # noqa: E402
from flopsweep.layout import Layout  # noqa: E402
from flopsweep.memory import estimate  # noqa: E402
from flopsweep.plan import option_schemas  # noqa: E402

GIB = 2**30


def _node(cls: type, values: dict) -> object:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def run_config(config: dict) -> fconfig.RunConfig:
    """A ``RunConfig`` from a record's ``config`` (v1 or v2; keys another option owns are dropped)."""
    schemas = option_schemas()
    groups = {}
    for group in schemas:
        value = config.get(group, {})
        if isinstance(value, bool):  # activation_checkpointing before the policy registry
            value = {"name": "full" if value else "none"}
        values = dict(value)
        key = values.get("arch", "gpt2") if group == "model" else values["name"]
        groups[group] = _node(schemas[group][key], values)
    top = {
        k: v
        for k, v in config.items()
        if k not in schemas and k not in ("steps", "optim", "fault", "parallel")
    }
    return dataclasses.replace(_node(fconfig.RunConfig, top), **groups)


def rows(root: Path, folder: str | None) -> list[tuple[str, str, float, float]]:
    out = []
    for path in sorted(root.rglob("metrics.json")):
        if folder and folder not in path.relative_to(root).parts[:1]:
            continue
        record = json.loads(path.read_text())
        measured = (record.get("metrics") or {}).get("peak_cuda_allocated_bytes")
        if record["status"] != "ok" or not measured:
            continue
        cfg = run_config(record["config"])
        degrees = record["system"].get("parallel") or {"dp_shard": record["system"]["world_size"]}
        est = estimate(cfg, Layout(**degrees))
        out.append((str(path.relative_to(root).parent), cfg.backend.name, est.total / GIB, measured / GIB))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--folder", help="only this top-level folder (e.g. backends)")
    args = parser.parse_args(argv)
    found = rows(args.root, args.folder)
    print("| record | backend | estimate GiB | measured GiB | error |\n|---|---|---:|---:|---:|")
    for where, backend, est, measured in found:
        print(f"| {where} | {backend} | {est:.1f} | {measured:.1f} | {est / measured - 1:+.1%} |")
    errors = [abs(e / m - 1) for _, _, e, m in found]
    if errors:
        median, worst = statistics.median(errors), max(errors)
        print(f"\n{len(errors)} records: median |error| {median:.1%}, worst {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
