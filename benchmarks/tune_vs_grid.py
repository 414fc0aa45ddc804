"""Issue 42's acceptance, read off the records: the tuner's winner against the grid's best.

    python benchmarks/tune_vs_grid.py GRID_DIR TUNE_DIR [--objective model_tflops_per_device]

``GRID_DIR`` holds the grid (``sweep/grid-1gpu.yaml``, every set-up run once or more); ``TUNE_DIR``
the tuning sweep over the same space (``hydra/sweeper=tune``, its ``tune.json``). Prints, as text
and a last JSON line: the grid's best set-up and its mean objective; the tuner's winner (from
``tune.json``), its mean objective as the tuner measured it and as the grid measured the same set-up
(the set-up matched by ``setup_id``, :func:`flopsweep.identity.setup_key`); the winner against the
grid's best (``gap``: 1 - winner / best on the grid's own figures, 0 when the tuner found the best;
the acceptance is ``gap <= 0.02``); and the GPU-seconds of each (every record's
:func:`flopsweep.tune.run_gpu_seconds`, as the tuner counts its budget; the acceptance is
``tune / grid <= 0.25``). Objectives to minimise (``flopsweep.objective``) are compared the other
way round. Exit 1 when either folder holds no ok record, or the tuner named no winner.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from analysis.load import load
from flopsweep.conf_files import read_bounded
from flopsweep.identity import defining_overrides, same_overrides
from flopsweep.objective import direction
from flopsweep.safe_read import read_json
from flopsweep.tune import run_gpu_seconds


def gpu_seconds(df) -> float:
    """The sum of every record's GPU-seconds (``df.attrs["records"]``: the files read)."""
    return sum(run_gpu_seconds(read_json(Path(p))) for p in df.attrs.get("records", []))


def means(df, objective: str):
    """Each set-up's mean ``objective`` over its ok runs: a Series by ``setup_id``."""
    ok = df[df["status"].eq("ok") & df[objective].notna() & df["setup_id"].notna()]
    return ok.groupby("setup_id")[objective].mean()


def job_overrides(run_dir: str) -> list[str]:
    """The defining overrides of the job in ``run_dir``: its ``.hydra/overrides.yaml``, else its
    record's ``run.overrides`` (a folder packed with its ``metrics.json`` alone); [] if neither.
    A row that pools the rounds of ``repeats=`` names its folders joined by ``", "``: the first is read."""
    try:
        data = yaml.safe_load(read_bounded(str(Path(run_dir) / ".hydra" / "overrides.yaml")))
    except (OSError, yaml.YAMLError):
        try:
            data = (read_json(Path(run_dir) / "metrics.json").get("run") or {}).get("overrides")
        except (OSError, ValueError, AttributeError):
            return []
    return defining_overrides([str(o) for o in data]) if isinstance(data, list) else []


def holds(job: list[str], wanted: list[str]) -> bool:
    """Whether the job's overrides set every override of ``wanted`` (the tuner's set-up) as it does:
    each of ``wanted`` equal (:func:`flopsweep.identity.same_overrides`) to the job's of its key."""
    by_key = {o.split("=", 1)[0]: o for o in job}
    return all(
        (mine := by_key.get(o.split("=", 1)[0])) is not None and same_overrides([mine], [o]) for o in wanted
    )


def compare(grid_dir: Path, tune_dir: Path, objective: str) -> dict:
    """The comparison as a dict (see the module docstring). Raises SystemExit(1) with a line."""
    grid, tune = load(grid_dir), load(tune_dir)
    sign = 1.0 if direction(objective) == "maximize" else -1.0
    on_grid, on_tune = means(grid, objective), means(tune, objective)
    if on_grid.empty or on_tune.empty:
        raise SystemExit(
            f"tune_vs_grid: no ok record with {objective} in {grid_dir if on_grid.empty else tune_dir}"
        )
    report = json.loads(read_bounded(str(tune_dir / "tune.json")))
    winner = report.get("winner") or {}
    if not winner.get("overrides"):
        raise SystemExit(f"tune_vs_grid: {tune_dir / 'tune.json'} names no winner")
    wanted = defining_overrides(winner["overrides"])
    ids = {
        row.setup_id
        for row in tune.itertuples()
        if row.status == "ok" and holds(job_overrides(str(row.run_dir).split(", ")[0]), wanted)
    }
    best_id = (on_grid * sign).idxmax()
    winner_id = next(iter(ids)) if len(ids) == 1 else None
    on_grid_winner = on_grid.get(winner_id) if winner_id else None
    grid_s, tune_s = gpu_seconds(grid), gpu_seconds(tune)
    gap = None if on_grid_winner is None else 1.0 - (on_grid_winner / on_grid[best_id]) ** sign
    return {
        "objective": objective,
        "grid_setups": int(on_grid.size),
        "grid_best_setup_id": best_id,
        "grid_best": float(on_grid[best_id]),
        "winner": winner.get("label"),
        "winner_setup_id": winner_id,
        "winner_tuned": None if winner_id is None else float(on_tune[winner_id]),
        "winner_on_grid": None if on_grid_winner is None else float(on_grid_winner),
        "gap": gap,
        "grid_gpu_s": grid_s,
        "tune_gpu_s": tune_s,
        "gpu_s_share": tune_s / grid_s if grid_s else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grid", type=Path)
    parser.add_argument("tune", type=Path)
    parser.add_argument("--objective", default="model_tflops_per_device")
    args = parser.parse_args(argv)
    try:
        out = compare(args.grid, args.tune, args.objective)
    except SystemExit as stop:
        print(stop, file=sys.stderr)
        return 1
    share = out["gpu_s_share"]
    print(
        f"grid: {out['grid_setups']} set-ups, best {out['grid_best']:.4g} {args.objective},"
        f" {out['grid_gpu_s']:.0f} GPU-s"
    )
    gap = (
        "the winner's set-up is not in the grid"
        if out["gap"] is None
        else f"gap to the grid's best {out['gap']:.1%}"
    )
    print(
        f"tuner: winner {out['winner']}: {gap}; {out['tune_gpu_s']:.0f} GPU-s"
        + (f" ({share:.0%} of the grid's)" if share else "")
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
