"""GPU time of one training step by kernel family, for two or more Chrome traces side by side.

Usage (standard library and ``flopsweep.profile``, which imports no torch)::

    python3 benchmarks/kernel_table.py LABEL=TRACE [LABEL=TRACE ...] [--top N] [--out FILE.md]

``TRACE`` is a torch.profiler / Kineto Chrome trace (``.json`` or ``.json.gz``) that holds
exactly one training step on one GPU: flopsweep's ``profile/rank0.trace.json.gz``
(``profile=true``) or torchtitan's ``profile_traces/iteration_N/rank0_trace.json``
(``--profiling.enable_profiling``, one active step). When the trace has a ``flopsweep.step``
or ``ProfilerStep#N`` annotation, only device work launched inside it is counted
(:func:`step_work`).

For each trace the table gives, in milliseconds: the span from the first to the last device
event of the step, the busy time (the union of device intervals), the idle time (span minus
busy: the GPU waits on the host), and the summed kernel time of each family
(:data:`FAMILIES`; the first pattern that matches a kernel's name wins). The families are
summed kernel durations; on one stream they do not overlap, so they add up to the busy time.
Then the ``--top`` kernels of each trace by summed time.

Used by ``benchmarks/peer_profile.sh`` to explain the gap between flopsweep and torchtitan.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # flopsweep.profile: no torch at import
from flopsweep.profile import DEVICE_CATEGORIES, launched_ids, read_trace  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("communication (NCCL)", re.compile(r"nccl", re.I)),
    ("memcpy / memset", re.compile(r"^Memcpy|^Memset|memcpy|memset", re.I)),
    # cuBLAS / CUTLASS GEMMs (nvjet, sm90_xmma, cutlass), and Inductor's mm templates.
    ("GEMM", re.compile(r"gemm|nvjet|xmma|cutlass|cublas|triton_tem_fused_(?:add)?mm|_mm_|bmm", re.I)),
    ("attention (flash / cuDNN / efficient)", re.compile(r"flash|fmha|attention|attn|sdpa|cudnn", re.I)),
    # torch's fused AdamW and foreach ops (gradient clipping, zeroing) run as multi-tensor kernels.
    ("optimizer and foreach (multi-tensor)", re.compile(r"multi_tensor|foreach|adam", re.I)),
    ("Inductor-fused (Triton)", re.compile(r"^triton_", re.I)),
    ("loss (cross entropy)", re.compile(r"nll|log_softmax|softmax|cross_entropy", re.I)),
    (
        "eager elementwise / reduce / copy",
        re.compile(r"elementwise|vectorized|reduce|copy|fill|index|cat|embedding|gather|scatter", re.I),
    ),
]
OTHER = "other"


def family(name: str) -> str:
    """The :data:`FAMILIES` label of a kernel name (``other`` when none matches)."""
    for label, pattern in FAMILIES:
        if pattern.search(name):
            return label
    return OTHER


def step_work(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The device events of the step: those launched (``cuda_runtime`` or ``cuda_driver`` call
    with the same ``correlation`` id) inside the longest host step annotation, or every device
    event when the trace has no annotation or no correlation ids.

    The host span is used, not Kineto's GPU-side ``gpu_user_annotation``: GPU-side spans do
    not nest, and a nested one (torch's ``Optimizer.step``) cuts the outer one short.
    """
    step = re.compile(r"^(flopsweep\.step|ProfilerStep#\d+)$")
    work = [e for e in events if e.get("cat") in DEVICE_CATEGORIES and float(e.get("dur", 0)) > 0]
    spans = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("cat") == "user_annotation" and step.match(str(e.get("name", "")))
    ]
    if not spans:
        return work
    launched = launched_ids(events, [max(spans, key=lambda s: s[1] - s[0])])
    inside = [e for e in work if isinstance(e.get("args"), dict) and e["args"].get("correlation") in launched]
    return inside or work


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Span, busy and idle time (ms) of the step's device work, time per family and per kernel."""
    work = step_work(events)
    if not work:
        raise ValueError("no GPU kernels in the trace (was it recorded with the CUDA activity?)")
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in work)
    busy, cur_start, cur_end = 0.0, spans[0][0], spans[0][1]
    for start, end in spans[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    span = max(e for _, e in spans) - spans[0][0]
    families: dict[str, float] = defaultdict(float)
    kernels: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in work:
        name = str(e.get("name", ""))
        families[family(name)] += float(e["dur"])
        kernels[name][0] += float(e["dur"])
        kernels[name][1] += 1
    ms = 1e-3
    return {
        "span_ms": span * ms,
        "busy_ms": busy * ms,
        "idle_ms": (span - busy) * ms,
        "kernels": len(work),
        "families": {k: v * ms for k, v in families.items()},
        "top": sorted(((n, t * ms, c) for n, (t, c) in kernels.items()), key=lambda x: -x[1]),
    }


def table(summaries: dict[str, dict[str, Any]], top: int) -> str:
    """A markdown report: one column per trace, a delta column when there are two."""
    labels = list(summaries)
    delta = len(labels) == 2
    head = ["ms per step", *labels] + ([f"{labels[0]} - {labels[1]}"] if delta else [])
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def row(name: str, values: list[float]) -> None:
        cells = [f"{v:.2f}" for v in values] + ([f"{values[0] - values[1]:+.2f}"] if delta else [])
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    for key, name in (
        ("span_ms", "span (first to last device event)"),
        ("busy_ms", "GPU busy"),
        ("idle_ms", "GPU idle (span - busy)"),
    ):
        row(name, [summaries[label][key] for label in labels])
    names = [label for label, _ in FAMILIES] + [OTHER]
    for name in names:
        values = [summaries[label]["families"].get(name, 0.0) for label in labels]
        if any(values):
            row(name, values)
    lines.append(
        "| kernel launches (device events) | "
        + " | ".join(str(summaries[label]["kernels"]) for label in labels)
        + (" | |" if delta else " |")
    )
    for label in labels:
        lines += [
            "",
            f"Top {top} kernels of {label} (ms summed over the step, calls, family):",
            "",
            "| kernel | ms | calls | family |",
            "|---|---:|---:|---|",
        ]
        for name, t, calls in summaries[label]["top"][:top]:
            short = name if len(name) <= 90 else name[:87] + "..."
            lines.append(f"| `{short.replace('|', '/')}` | {t:.2f} | {calls} | {family(name)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+", metavar="LABEL=TRACE")
    parser.add_argument("--top", type=int, default=12, help="kernels listed per trace (12)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error(f"--top {args.top}: give 0 or more kernels per trace")
    if args.out and (args.out.is_dir() or not args.out.parent.is_dir()):
        parser.error(
            f"--out {args.out}: not a file in an existing folder; name a file, e.g. --out kernel_table.md"
        )
    summaries = {}
    for spec in args.traces:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            parser.error(f"{spec!r}: write LABEL=TRACE, e.g. flopsweep=run/profile/rank0.trace.json.gz")
        if label in summaries:
            parser.error(f"{label}: the label is given twice; give each trace its own LABEL")
        if not Path(path).is_file():
            parser.error(f"{label}: no trace file at {path}")
        try:
            summaries[label] = summarize(read_trace(Path(path)))
        except KeyError as e:
            print(f"kernel_table: {label}: {path}: not a Chrome trace (no {e} key)", file=sys.stderr)
            return 1
        except (ValueError, json.JSONDecodeError, OSError) as e:
            print(f"kernel_table: {label}: {path}: {e}", file=sys.stderr)
            return 1
    report = table(summaries, args.top)
    print(report, end="")
    if args.out:
        try:
            args.out.write_text(report, encoding="utf-8")
        except OSError as e:
            print(f"kernel_table: --out {args.out}: {e.strerror or e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
