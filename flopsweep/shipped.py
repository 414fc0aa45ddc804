"""The measured set-ups flopsweep ships (``flopsweep/data/measured.json``): the committed ``ok`` CUDA
records of ``benchmarks/results/`` (one H100, one H200 and two H200s) that did not run at the memory edge
(:func:`build`), each as the prediction reads it.

With ``predict.calibration`` null and ``predict.measured`` true (the default), the job, ``plan=true`` and
the tuner predict from these records (:func:`flopsweep.forecast.prediction_records`): a calibration of
the same set-up on the same GPU kind, else the nearest measured set-up (:mod:`flopsweep.nearest`,
another GPU kind scaled by the datasheet peak ratio), the ``source`` saying ``(shipped records)``. A CPU
run never is (:func:`flopsweep.forecast.prediction`). ``python -m analysis --predict`` never reads
them: it keeps to the records it loaded.

Each entry is ``{"name": PATH, "record": VIEW}``: ``PATH`` the record's path relative to
``benchmarks/results`` (``h200/.../metrics.json``), ``VIEW`` its :func:`flopsweep.predict.calibration_view`
with only :data:`METRIC_KEYS` of its metrics. The file is read by a path relative to this module's own
file (never the working folder), as a regular file not followed through a link and at most
:data:`MAX_BYTES` (:func:`flopsweep.safe_read.read_regular`). Torch-free.

Usage (from a checkout)::

    python -m flopsweep.shipped --write    # regenerate flopsweep/data/measured.json
    python -m flopsweep.shipped --check    # exit 1 when it is not current
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "measured.json"
"""The shipped file, beside this module (package data, ``pyproject.toml``)."""

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
"""The committed records it is made from (a checkout's; an installed package has none)."""

FORMAT = 1
"""The file's layout (``format``)."""

MAX_BYTES = 4 * 2**20
"""The most bytes read of the shipped file (it holds about 1.04 MB)."""

METRIC_KEYS = (
    "iteration_time_s",
    "breakdown",
    "model_flops_per_iteration",
    "hardware_flops_per_iteration",
    "measured_matmul_tflops",
    "peak_tflops",
    "peak_cuda_allocated_bytes",
)
"""The ``metrics`` keys kept of each record: what a calibration (:func:`flopsweep.predict.measured_parts`,
:func:`flopsweep.predict.workload_from_record`, :func:`flopsweep.predict.optimizer_rate`) and the nearest
set-up (:mod:`flopsweep.nearest`) read; ``iteration_time_s`` without its per-step ``values``."""

SHIPPED = "shipped"
"""The key :func:`records` adds (``true``) to each view it returns, never stored in the file: how
:mod:`flopsweep.forecast` tells a shipped record from one the user named."""


class ShippedError(RuntimeError):
    """The shipped file is missing, unreadable or not of :data:`FORMAT` (a broken install)."""


def entry(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """The file's entry of one record (a parsed ``metrics.json`` or its view) named ``name``."""
    from flopsweep.predict import calibration_view

    view = calibration_view(record)
    view["metrics"] = {k: v for k, v in view["metrics"].items() if k in METRIC_KEYS}
    return {"name": name, "record": view}


def build(results: Path = RESULTS) -> dict[str, Any]:
    """The file's content made from ``results``: every record there that may calibrate
    (:func:`flopsweep.calibration_files.calibration_records`: the checks a ``predict.calibration`` folder
    passes), kept when ``ok``, on ``cuda``, with a mean step time and without allocator retries
    (``metrics.cuda_alloc_retries`` > 0: a run at the memory edge, whose slow rate the nearest set-up
    would carry over to a run that is not, docs/prediction-nearest.md "Assumptions"; 15 of the 305 on
    2026-12-04, among them the ``frontier`` runs) and with the counts a prediction reads
    (:func:`flopsweep.predict.workload_from_record`: ``model.n_params`` and
    ``metrics.model_flops_per_iteration``; a record made before them would calibrate a run into no
    prediction); sorted by name.

    Raises:
        flopsweep.config.ConfigError: ``results`` holds no such record (not a checkout).
    """
    from flopsweep.calibration_files import calibration_records
    from flopsweep.predict import PredictionError, workload_from_record

    entries = []
    for path, view in calibration_records(str(results)):
        mean = ((view.get("metrics") or {}).get("iteration_time_s") or {}).get("mean")
        retries = (view.get("metrics") or {}).get("cuda_alloc_retries")
        if (
            view.get("status") != "ok"
            or (view.get("config") or {}).get("device") != "cuda"
            or not isinstance(mean, int | float)
            or (isinstance(retries, int) and retries > 0)  # at the memory edge: its slow rate not carried
        ):
            continue
        try:  # without the counts a calibration needs, it would leave a run with no prediction
            workload_from_record(view)
        except PredictionError:
            continue
        entries.append(entry(Path(path).relative_to(results).as_posix(), view))
    entries.sort(key=lambda e: e["name"])
    return {
        "format": FORMAT,
        "source": "benchmarks/results",
        "made_by": "python -m flopsweep.shipped --write",
        "records": entries,
    }


def dumps(content: dict[str, Any]) -> str:
    """The file's text: compact JSON, one record a line (a regenerated file diffs by record)."""
    head = {k: v for k, v in content.items() if k != "records"}
    lines = [json.dumps(e, sort_keys=True, separators=(",", ":")) for e in content["records"]]
    return json.dumps(head, sort_keys=True)[:-1] + ', "records": [\n' + ",\n".join(lines) + "\n]}\n"


@functools.lru_cache(maxsize=1)
def _loaded() -> tuple[tuple[str, dict[str, Any]], ...]:
    from flopsweep.safe_read import RecordError, read_regular

    try:
        content = json.loads(read_regular(DATA, MAX_BYTES).decode("utf-8"))
    except (RecordError, UnicodeDecodeError, ValueError) as exc:
        raise ShippedError(f"{DATA}: {str(exc)[:200]} (reinstall flopsweep)") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ShippedError(f"{DATA}: not a shipped-records file of format {FORMAT} (reinstall flopsweep)")
    return tuple(
        (str(e["name"]), {**e["record"], SHIPPED: True})
        for e in content.get("records") or ()
        if isinstance(e, dict) and isinstance(e.get("record"), dict)
    )


def records() -> list[tuple[str, dict[str, Any]]]:
    """``(name, view)`` of every shipped record, each view marked :data:`SHIPPED` (read once a process;
    the views are shared: never change one).

    Raises:
        ShippedError: the file is missing, a link, over :data:`MAX_BYTES`, not JSON or not of
            :data:`FORMAT`.
    """
    return list(_loaded())


@functools.lru_cache(maxsize=1)
def pool() -> tuple[Any, ...]:
    """:func:`flopsweep.nearest_measured.pool_of` of :func:`records`, made once a process."""
    from flopsweep.nearest_measured import pool_of

    return tuple(pool_of(records()))


def is_shipped(record: dict[str, Any]) -> bool:
    """Whether ``record`` came from :func:`records`."""
    return record.get(SHIPPED) is True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flopsweep.shipped", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help=f"regenerate {DATA.name} from {RESULTS}")
    what.add_argument("--check", action="store_true", help="exit 1 when the shipped file is not current")
    args = parser.parse_args(argv)
    text = dumps(build())
    if args.write:
        from flopsweep.files import replace_text

        DATA.parent.mkdir(exist_ok=True)
        replace_text(DATA, text)
        print(f"wrote {DATA} ({len(text.encode())} bytes, {text.count(chr(10)) - 1} lines)")
        return 0
    from flopsweep.safe_read import RecordError, read_regular

    try:
        current = read_regular(DATA, MAX_BYTES) == text.encode()
    except RecordError:
        current = False
    print(f"{DATA}: {'current' if current else 'not current: run python -m flopsweep.shipped --write'}")
    return 0 if current else 1


if __name__ == "__main__":  # a reader that goes away (| head -1), on either stream: exit quietly
    from flopsweep.streams import standard_streams

    standard_streams()
    sys.exit(main())
