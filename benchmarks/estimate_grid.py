"""Every estimator output over a grid of configs, one JSON line each: a digest to compare two checkouts.

Run it under two checkouts and compare the files; a refactor of the estimators must leave them equal::

    PYTHONPATH=/work/main python benchmarks/estimate_grid.py > /tmp/before.jsonl
    PYTHONPATH=. python benchmarks/estimate_grid.py > /tmp/after.jsonl
    cmp /tmp/before.jsonl /tmp/after.jsonl

(DeepSpeed's import may print a warning line to stdout; ``grep '^{'`` keeps the rows.)

The grid: models (GPT-2 1.3B, Llama 3.1 8B untied, Llama 3.2 1B tied) x backends (``single``,
``ddp``, ``fsdp`` with and without ``reshard_after_forward`` and ``cpu_offload``, ZeRO-1/2/3 with
each optimizer and parameter offload) x layouts (one rank, data parallel, HSDP, TP, PP) x
precision (bf16, fp32) x checkpointing (none, full) x ``grad_accum`` (1, 2) x ``optim.in_backward``
where it is allowed. Per config: :func:`flopsweep.memory.estimate` by part, ``peak_bytes`` on CUDA
and on the CPU, the offload and floor figures, the data-parallel transfers at 4 and 8 GPUs per
node, :func:`flopsweep.predict.predict` at a fixed compute and link, and
:func:`flopsweep.predict_record.predict_record` of a synthetic record calibrated by a one-rank one. Then
per GPU row of the peak table: ``planned_gpu_bytes``, ``assumed_link`` and the peaks. An exception
is written as its type and text (the same exception is the same output).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from typing import Any


def _safe(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - the digest records what each call does
        return f"{type(exc).__name__}: {exc}"


def _models() -> list[Any]:
    from flopsweep.models.gpt2 import GPT2Config
    from flopsweep.models.llama import LlamaConfig

    return [
        GPT2Config(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304),
        LlamaConfig(
            name="llama-8b",
            n_layer=32,
            n_embd=4096,
            n_head=32,
            n_kv_head=8,
            ffn_dim=14336,
            seq_len=4096,
            vocab_size=128256,
            tie_embeddings=False,
        ),  # fmt: skip
        LlamaConfig(
            name="llama-1b",
            n_layer=16,
            n_embd=2048,
            n_head=32,
            n_kv_head=8,
            ffn_dim=8192,
            seq_len=2048,
            vocab_size=128256,
            tie_embeddings=True,
        ),  # fmt: skip
    ]


def _backends() -> list[Any]:
    from flopsweep.config import BackendConfig
    from flopsweep.options import DeepSpeedConfig, FSDPConfig

    out: list[Any] = [BackendConfig(name="single"), BackendConfig(name="ddp")]
    for reshard, offload in itertools.product((True, False), (False, True)):
        out.append(FSDPConfig(reshard_after_forward=reshard, cpu_offload=offload))
    for stage, opt, param in itertools.product((1, 2, 3), ("none", "cpu", "nvme"), ("none", "cpu")):
        if param != "none" and stage != 3:
            continue
        out.append(DeepSpeedConfig(zero_stage=stage, offload_optimizer=opt, offload_param=param))
    return out


LAYOUTS = [
    {},
    {"dp_shard": 2},
    {"dp_shard": 8},
    {"dp_replicate": 2, "dp_shard": 4},
    {"dp_replicate": 4},
    {"dp_shard": 4, "tp": 2},
    {"dp_shard": 2, "pp": 2},
]


def _digest(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {k: _digest(v) for k, v in dataclasses.asdict(x).items()}
    if isinstance(x, list | tuple):
        return [_digest(v) for v in x]
    if isinstance(x, float):
        return repr(x)
    return x


def _record(cfg: Any, layout: Any, w: Any, step: float) -> dict[str, Any]:
    from flopsweep.predict import COLLECTIVES

    return {
        "status": "ok",
        "config": json.loads(json.dumps(dataclasses.asdict(cfg), default=str)),
        "model": {"n_params": w.n_params, "n_layer": w.n_layer, "n_embd": w.n_embd, "seq_len": w.seq_len},
        "metrics": {
            "model_flops_per_iteration": w.model_flops,
            "hardware_flops_per_iteration": w.hardware_flops,
            "iteration_time_s": {"mean": step},
            "breakdown": {
                "step_s": step,
                "optimizer_s": step / 10,
                "comm_s": step / 5,
                "exposed_comm_s": step / 20,
            },
        },
        "system": {
            "world_size": layout.world_size,
            "parallel": layout.as_dict(),
            "nproc_per_node": 8,
            "interconnect": [{"collective": c, "bytes": 1 << 24, "busbw_gbps": 120.0} for c in COLLECTIVES],
        },
    }


def config_rows() -> Any:
    from flopsweep import forecast, memory
    from flopsweep import predict as pr
    from flopsweep.config import CheckpointingConfig, PrecisionConfig, RunConfig
    from flopsweep.layout import Layout
    from flopsweep.predict_record import predict_record

    link = pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, 150.0), inter=dict.fromkeys(pr.COLLECTIVES, 20.0))
    compute = pr.Compute(compute_s=0.5, optimizer_s=0.05, source="fixed")
    grid = itertools.product(
        _models(), _backends(), LAYOUTS, ("bf16", "fp32"), ("none", "full"), (1, 2), (False, True)
    )
    for model, backend, degrees, precision, ac, accum, in_backward in grid:
        refused = backend.name not in ("single", "fsdp") or accum > 1 or "tp" in degrees or "pp" in degrees
        if in_backward and refused:  # flopsweep.rules refuses optim.in_backward there
            continue
        layout = Layout(**degrees)
        cfg = dataclasses.replace(
            RunConfig(),
            model=model,
            backend=backend,
            precision=PrecisionConfig(name=precision),
            activation_checkpointing=CheckpointingConfig(name=ac),
        )
        cfg.batch.micro_batch_size, cfg.batch.grad_accum = 2, accum
        cfg.optim.in_backward = in_backward
        if in_backward:
            cfg.optim.grad_clip = 0.0
        row: dict[str, Any] = {"cfg": [model.name, repr(backend), degrees, precision, ac, accum, in_backward]}
        est = _safe(memory.estimate, cfg, layout)
        row["estimate"] = _digest(est)
        row["peak_cuda"] = _safe(memory.peak_bytes, cfg, layout)
        row["peak_cpu"] = _safe(memory.peak_bytes, dataclasses.replace(cfg, device="cpu"), layout)
        row["offload_host"] = _safe(memory.offload_host_bytes, cfg, layout)
        row["offload_held"] = _safe(memory.offload_host_held_bytes, cfg, layout)
        row["floor"] = _safe(memory.model_states_floor, cfg, layout)
        w = forecast.workload(cfg, layout)
        row["transfers"] = [_digest(_safe(pr.transfers, w, gpus_per_node=n)) for n in (4, 8)]
        row["predict"] = _digest(_safe(pr.predict, w, compute, link, gpus_per_node=4))
        cal_layout = Layout()
        cal_w = forecast.workload(cfg, cal_layout)
        records = [("cal", _record(cfg, cal_layout, cal_w, 1.0)), ("self", _record(cfg, layout, w, 0.7))]
        row["predict_record"] = _digest(_safe(predict_record, "self", records[1][1], records))
        made = _safe(forecast.prediction, cfg, layout, [], gpus_per_node=8, device_name="H100")
        row["forecast"] = _digest(made)
        yield row


def gpu_rows() -> Any:
    from flopsweep import memory
    from flopsweep import predict as pr
    from flopsweep.peaks import PEAK_TABLE, lookup, peak_tflops

    names = [r.name for r in PEAK_TABLE] + [a for r in PEAK_TABLE for a in r.aliases]
    names += ["H100-80GB", "H100-94GB", "A100-40GB", "A100-80GB", "A100-48GB", "GH200-480GB", "B200-192GB"]
    names += ["cpu"]
    for name in names:
        row = lookup(name)
        yield {
            "gpu": name,
            "row": None if row is None else [row.name, list(row.capability), row.vendor, row.bf16],
            "planned": _safe(memory.planned_gpu_bytes, name, None),
            "planned_80": _safe(memory.planned_gpu_bytes, name, 80.0),
            "link": _digest(_safe(pr.assumed_link, name)),
            "peaks": [peak_tflops(name, p) for p in ("bf16", "fp16", "fp32", "fp8", "fp8-rowwise")],
        }


def main() -> None:
    n = 0
    for row in itertools.chain(config_rows(), gpu_rows()):
        sys.stdout.write(json.dumps(row, sort_keys=True, default=str) + "\n")
        n += 1
    print(f"{n} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
