"""How close the memory estimate (flopsweep.memory, ``plan=true`` and ``metrics.predicted_peak_gib``)
comes to the measured peaks.

For every ok GPU record under a results folder: the estimate for its config next to its
``peak_cuda_allocated_bytes``, the relative error ((estimate - measured) / measured), and the median
and worst absolute errors, over all records (``blocksparse impl=gather`` among them since issue 41:
its tensors are counted, :mod:`flopsweep.kernel_memory`). Every record is re-estimated from its
config with the current code; a record that carries ``metrics.predicted_peak_gib`` (made before its
run, by the code of its day) shows that prediction in its own column, and ``--recorded`` compares
with it instead. A record whose run held more than the run (:func:`probe_copies_of_its_day`) has
that added to the estimate, named in its note. The summary gives the median, 95th percentile and
worst per backend too. CPU only; reads the records, runs nothing.

    python benchmarks/memory_estimate.py benchmarks/results/h200 [--folder backends] [--summary] [--recorded]
        [--policies]
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flopsweep import config as fconfig  # noqa: E402
from flopsweep.layout import Layout  # noqa: E402
from flopsweep.memory import estimate  # noqa: E402
from flopsweep.plan import option_schemas  # noqa: E402
from flopsweep.safe_read import read_json  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed logs its accelerator choice to stdout
    with contextlib.suppress(ImportError):
        import deepspeed.runtime.zero.stage3  # noqa: F401, E402 - ZeRO-3's estimator, imported quietly

GIB = 2**30
OUTSIDE_PCT = 10.0
"""Records whose |error| exceeds this many percent are listed with their reason."""


def _node(cls: type, values: dict) -> object:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def run_config(config: dict) -> fconfig.RunConfig:
    """A ``RunConfig`` from a record's ``config`` (v1 or v2; keys another option owns are dropped;
    an old boolean ``activation_checkpointing`` is the policy ``full`` or ``none``)."""
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
        if k not in schemas and k not in ("steps", "optim", "fault", "parallel", "cost", "budget", "loss")
    }
    loss = _node(fconfig.LossConfig, dict(config.get("loss") or {}))  # absent before loss.chunk_tokens
    return dataclasses.replace(_node(fconfig.RunConfig, top), loss=loss, **groups)


CUDA_BUCKET_SINCE = "2026-11-30T19:51:25+00:00"
"""When ZeRO-3's unset buckets became 5e8 elements on CUDA (commit 5cb0efe,
``flopsweep.backends.CUDA_BUCKET``); a record started before it ran with the sizes of its day."""


def buckets_of_its_day(cfg: fconfig.RunConfig, started_at: str) -> fconfig.RunConfig:
    """``cfg`` with the ZeRO-3 bucket sizes its run got: a record started before
    :data:`CUDA_BUCKET_SINCE` with ``reduce_bucket_size`` or ``stage3_prefetch_bucket_size`` unset
    ran with ``h^2`` and ``int(0.9 h^2)`` elements (``backends.deepspeed_config`` of that day), not
    today's 5e8; the record keeps ``null``, so the re-estimate fills them in."""
    b = cfg.backend
    if b.name != "deepspeed" or b.zero_stage != 3 or not started_at or started_at >= CUDA_BUCKET_SINCE:
        return cfg
    h = cfg.model.n_embd
    reduce = h * h if b.reduce_bucket_size is None else b.reduce_bucket_size
    prefetch = int(0.9 * h * h) if b.stage3_prefetch_bucket_size is None else b.stage3_prefetch_bucket_size
    backend = dataclasses.replace(b, reduce_bucket_size=reduce, stage3_prefetch_bucket_size=prefetch)
    return dataclasses.replace(cfg, backend=backend)


PROBE_FREED_SINCE = "2026-12-04T22:45:00+00:00"
"""Since when the layer probe frees its DeepSpeed ZeRO-3 copies before the run is built
(``flopsweep.trainers.release_engine``, branch s21-memory); a record started before it with
``predict.layer_probe=true`` under ZeRO-3 ran beside its probe's copies. Only for a record without
``metrics.predicted.layer_probe.released`` (:func:`probe_copies_of_its_day`)."""
RECOMPUTED_FREED_SINCE = "2026-12-05T04:50:00+00:00"
"""Since when it frees them under a checkpointing policy too: a block recomputed in backward left its
submodules in DeepSpeed's ``FWD_MODULE_STACK``, which ``release_engine`` then cleared only of the
root module (gpt-1.3b ZeRO-3 ``full`` on one H200 peaked 31.7 GiB after the probe, 27.0 without). Only
for a record without ``metrics.predicted.layer_probe.released`` (:func:`probe_copies_of_its_day`)."""


def probe_copies_of_its_day(
    config: dict,
    cfg: fconfig.RunConfig,
    layout: Layout,
    started_at: str,
    layers: list[int] | None = None,
    released: str | None = None,
) -> int:
    """Bytes a run's layer probe left on its GPU: before the release of every module
    (``released``, the record's ``metrics.predicted.layer_probe.released``:
    :data:`flopsweep.layer_probe.RELEASED`, or without that key before :data:`PROBE_FREED_SINCE`, and under
    a checkpointing policy before :data:`RECOMPUTED_FREED_SINCE`), DeepSpeed 0.19.8 kept
    every ZeRO-3 copy alive after ``engine.destroy()`` (the root module in
    ``parameter_offload.FWD_MODULE_STACK``, the coordinator in an ``lru_cache``), and with it each
    copy's partitioned states: ``16 B`` per parameter of every depth the probe built
    (``layer_probe.depths``: the fp32 master partition, AdamW's two moments, the bf16 parameter and
    gradient partitions), over ``dp``. Llama 3.2 1B on one H200 (copies of 1 and 2 blocks, 0.708 B
    parameters): 10.55 GiB, measured 53.03 against 42.48 GiB without the probe. 0 for another backend
    or stage (ZeRO-1 and -2 are freed by ``gc``), without the probe, or for a later record. ``layers``:
    the depths it built (``metrics.predicted.layer_probe.layers``), else ``[L, 2 L]``.

    Raises:
        ValueError: a ``released`` this script does not know (a later release: say what it frees here).
    """
    from flopsweep.layer_probe import RELEASED

    b = cfg.backend
    if not (config.get("predict") or {}).get("layer_probe") or b.name != "deepspeed" or b.zero_stage != 3:
        return 0
    if released is not None:  # the record says how its copies went: no date needed
        if released != RELEASED:
            raise ValueError(f"metrics.predicted.layer_probe.released={released!r}: not {RELEASED!r}")
        return 0
    freed = PROBE_FREED_SINCE if cfg.activation_checkpointing.name == "none" else RECOMPUTED_FREED_SINCE
    if not started_at or started_at >= freed:
        return 0
    from flopsweep.layer_probe import depths
    from flopsweep.models import family

    if not layers:  # not recorded: the depths of its day, L and 2 L (layer_probe.SPAN came later)
        layers = depths(cfg)
        layers = [layers[0], 2 * layers[0]] if len(layers) == 2 else layers
    fam = family(cfg.model)
    copies = sum(fam.n_params(dataclasses.replace(cfg.model, n_layer=n)) for n in layers)
    return 16 * -(-copies // layout.dp)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One record's comparison; sizes in GiB."""

    where: str
    backend: str
    estimate: float
    measured: float
    source: str
    """``recorded`` (``metrics.predicted_peak_gib``) or ``estimate`` (computed now)."""
    recorded: float | None = None
    """``metrics.predicted_peak_gib``, the prediction made before the run (None before the key)."""
    beside: str = ""
    """What the run held beside the run, added to :attr:`estimate` (:func:`probe_copies_of_its_day`)."""
    policy: str = ""
    """The checkpointing policy and ``eager`` or ``compiled`` (``selective compiled``), for ``--policies``."""

    @property
    def error(self) -> float:
        return self.estimate / self.measured - 1


def rows(root: Path, folder: str | None, use_recorded: bool = False) -> list[Row]:
    """One :class:`Row` per ok record with a measured peak under ``root`` (only the top-level
    ``folder`` when given): the estimate computed now from its config and layout, or with
    ``use_recorded`` its ``metrics.predicted_peak_gib`` where it has one."""
    out = []
    for path in sorted(root.rglob("metrics.json")):
        if folder and folder not in path.relative_to(root).parts[:1]:
            continue
        record = read_json(path)
        metrics = record.get("metrics") or {}
        measured = metrics.get("peak_cuda_allocated_bytes")
        if record["status"] != "ok" or not measured:
            continue
        started = (record.get("run") or {}).get("started_at", "")
        cfg = buckets_of_its_day(run_config(record["config"]), started)
        recorded = metrics.get("predicted_peak_gib")
        degrees = record["system"].get("parallel") or {"dp_shard": record["system"]["world_size"]}
        layout = Layout(**degrees)
        if recorded is None or not use_recorded:
            predicted, source = estimate(cfg, layout).total_gib, "estimate"
        else:
            predicted, source = float(recorded), "recorded"
        probe = (metrics.get("predicted") or {}).get("layer_probe") or {}
        copies = probe_copies_of_its_day(
            record["config"], cfg, layout, started, probe.get("layers"), probe.get("released")
        )
        beside = copies / GIB
        where = str(path.relative_to(root).parent)
        out.append(
            Row(
                where=where,
                backend=cfg.backend.name,
                policy=f"{cfg.activation_checkpointing.name} {'compiled' if cfg.compile else 'eager'}",
                estimate=predicted + beside,
                measured=measured / GIB,
                source=source,
                recorded=None if recorded is None else float(recorded),
                beside=f"+{beside:.2f} GiB: its layer probe's ZeRO-3 copies, alive in its run"
                if beside
                else "",
            )
        )
    return out


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values``, linear between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def summary(found: list[Row], by_policy: bool = False) -> list[str]:
    """The median, 95th percentile and worst |error| over every record and over each backend's; with
    ``by_policy`` also over each checkpointing policy's, eager and compiled apart (:attr:`Row.policy`)."""
    lines = []
    groups = [("all", found)]
    groups += [(b, [r for r in found if r.backend == b]) for b in sorted({r.backend for r in found})]
    if by_policy:
        groups += [(p, [r for r in found if r.policy == p]) for p in sorted({r.policy for r in found})]
    for label, subset in groups:
        errors = [abs(r.error) for r in subset]
        if errors:
            worst = max(subset, key=lambda r: abs(r.error))
            lines.append(
                f"{label}: {len(errors)} records, median |error| {statistics.median(errors):.1%}, "
                f"95th percentile {percentile(errors, 95):.1%}, worst {abs(worst.error):.1%} ({worst.where})"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument(
        "--folder",
        help="only this top-level folder (e.g. backends); a path (../h100/session25): that folder as root",
    )
    parser.add_argument(
        "--summary", action="store_true", help=f"only the summary and the records over {OUTSIDE_PCT:g}%%"
    )
    parser.add_argument(
        "--recorded",
        action="store_true",
        help="compare with metrics.predicted_peak_gib where a record has it (predicted before the run)",
    )
    parser.add_argument(
        "--policies",
        action="store_true",
        help="the summary also per checkpointing policy, eager and compiled apart",
    )
    args = parser.parse_args(argv)
    if args.folder and "/" in args.folder:  # a path from root: that folder is the root (another machine's)
        args.root, args.folder = args.root / args.folder, None
    found = rows(args.root, args.folder, use_recorded=args.recorded)
    shown = [r for r in found if abs(r.error) * 100 > OUTSIDE_PCT] if args.summary else found
    print(
        "| record | backend | estimate GiB | measured GiB | error | recorded GiB | note |\n"
        "|---|---|---:|---:|---:|---:|---|"
    )
    for r in shown:
        note = "" if r.source == "estimate" else "predicted before the run"
        note = "; ".join(n for n in (note, r.beside) if n)
        before = "" if r.recorded is None else f"{r.recorded:.1f}"
        print(
            f"| {r.where} | {r.backend} | {r.estimate:.1f} | {r.measured:.1f} | {r.error:+.1%} "
            f"| {before} | {note} |"
        )
    print()
    for line in summary(found, by_policy=args.policies):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
