"""The job's side of the prediction: from a run's config, its calibration files and its probe to
:func:`flopsweep.predict.predict` (``metrics.predicted`` and ``plan=true``'s predicted columns).

The model itself is :mod:`flopsweep.predict` (torch-free, shared with the analysis); this module
adds what only the job has: the model family's counts for a config, and the calibration files
named by ``predict.calibration``. It imports no torch.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flopsweep import flops
from flopsweep import predict as pr
from flopsweep.config import ConfigError, RunConfig
from flopsweep.files import RecordError, read_json
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.record import METRICS_FILE

log = logging.getLogger(__name__)

MAX_CALIBRATION_FILES = 10_000
"""The most records read from a ``predict.calibration`` folder (a bound on every search)."""


def workload(cfg: RunConfig, layout: Layout) -> pr.Workload:
    """The :class:`~flopsweep.predict.Workload` of ``cfg`` on ``layout``, counted by its model
    family (parameters, model and hardware FLOPs of one step)."""
    from flopsweep.checkpointing import recompute_mode

    m, b = cfg.model, cfg.batch
    fam = family(m)
    tokens = layout.global_batch(b.micro_batch_size, b.grad_accum) * m.seq_len
    density = cfg.attention.density if cfg.attention.density is not None else 1.0
    return pr.Workload(
        backend=cfg.backend.name,
        zero_stage=getattr(cfg.backend, "zero_stage", None),
        precision=cfg.precision.name,
        n_params=fam.n_params(m),
        n_layer=m.n_layer,
        n_embd=m.n_embd,
        seq_len=m.seq_len,
        micro_batch_size=b.micro_batch_size,
        grad_accum=b.grad_accum,
        degrees=layout.as_dict(),
        pp_microbatches=cfg.parallel.pp_microbatches,
        reshard_after_forward=bool(getattr(cfg.backend, "reshard_after_forward", True)),
        model_flops=fam.model_flops(m, tokens, density),
        hardware_flops=fam.hardware_flops(m, tokens, density, recompute_mode(cfg)),
    )


def calibration_records(path: str | None) -> list[tuple[str, dict[str, Any]]]:
    """``(path, record)`` of every readable ``metrics.json`` at ``path`` (a file, or a folder walked
    without following links, at most :data:`MAX_CALIBRATION_FILES`); unreadable ones are logged
    and skipped (:func:`flopsweep.files.read_json`: regular files only, size-capped).

    Raises:
        ConfigError: ``path`` does not exist.
    """
    if not path:
        return []
    root = Path(path).expanduser()
    if not os.path.lexists(root):
        raise ConfigError(
            "predict.calibration", path, "does not exist", "give a metrics.json or a sweep folder, or null"
        )
    found = [root] if not root.is_dir() else []
    for folder, dirs, files in os.walk(root) if root.is_dir() else ():
        dirs.sort()
        if METRICS_FILE in files:
            found.append(Path(folder) / METRICS_FILE)
        if len(found) >= MAX_CALIBRATION_FILES:
            break
    out = []
    for file in found:
        try:
            out.append((str(file), read_json(file)))
        except (RecordError, OSError) as exc:
            log.warning("predict.calibration: skipping %s: %s", file, exc)
    return out


def link(
    cfg: RunConfig, probe: Sequence[dict[str, Any]] | None, calibration: dict[str, Any] | None
) -> pr.Link:
    """The bus bandwidths: ``predict.intra_node_gbps``/``inter_node_gbps`` when set, else the run's
    own probe (``system.interconnect``, across nodes too when ``nnodes`` > 1), else the calibration
    record's probe; an empty :class:`~flopsweep.predict.Link` when none is known."""
    p = cfg.predict
    if p.intra_node_gbps or p.inter_node_gbps:
        intra = p.intra_node_gbps or p.inter_node_gbps
        return pr.Link(
            intra=dict.fromkeys(pr.COLLECTIVES, intra),
            inter=dict.fromkeys(pr.COLLECTIVES, p.inter_node_gbps or intra),
            source="predict.intra_node_gbps/inter_node_gbps",
        )
    if probe:
        own = pr.link_from_probe(probe, source="this run's probe")
        return pr.Link(intra=own.intra, inter=own.intra if cfg.nnodes > 1 else {}, source=own.source)
    if calibration and calibration.get("system", {}).get("interconnect"):
        return pr.link_from_probe(calibration["system"]["interconnect"], source="the calibration's probe")
    return pr.Link()


def prediction(
    cfg: RunConfig,
    layout: Layout,
    records: Sequence[tuple[str, dict[str, Any]]],
    *,
    gpus_per_node: int,
    device_name: str | None,
    probe: Sequence[dict[str, Any]] | None = None,
    gemm_tflops: float | None = None,
) -> dict[str, Any]:
    """``metrics.predicted`` of ``cfg`` on ``layout``: calibrated from the best of ``records``
    (:func:`flopsweep.predict.pick_calibration`), else uncalibrated at the measured GEMM rate
    (``gemm_tflops``) or, without one, the datasheet peak of ``device_name``.

    Returns:
        :meth:`flopsweep.predict.Prediction.as_dict`, or ``{iteration_time_s: None,
        tokens_per_s: None, source: "no prediction: <why>"}`` when the inputs give none (or the
        model fails: a prediction never costs a run its record).
    """
    try:
        return _prediction(cfg, layout, records, gpus_per_node, device_name, probe, gemm_tflops)
    except Exception as exc:  # noqa: BLE001 - a prediction never costs a run its record
        log.warning("no prediction: %s: %s", type(exc).__name__, exc)
        why = f"no prediction: {type(exc).__name__}: {exc}"
        return {"iteration_time_s": None, "tokens_per_s": None, "source": why}


def _prediction(
    cfg: RunConfig,
    layout: Layout,
    records: Sequence[tuple[str, dict[str, Any]]],
    gpus_per_node: int,
    device_name: str | None,
    probe: Sequence[dict[str, Any]] | None,
    gemm_tflops: float | None,
) -> dict[str, Any]:
    target = workload(cfg, layout)
    key = pr.calibration_key({"config": _config_dict(cfg)})
    own = _config_dict(cfg)["backend"]
    picked = pr.pick_calibration(
        key, layout.world_size, cfg.backend.name, records, backend_config=own, hostname=socket.gethostname()
    )
    device_name = device_name or (picked[1].get("system") or {}).get("device_name") if picked else device_name
    matmul = "bf16" if cfg.precision.name.startswith("fp8") else cfg.precision.name  # as metrics._peaks
    peak = flops.peak_tflops(device_name, matmul)[0] if device_name else None
    try:
        if picked:
            compute = pr.calibration_compute(target, *picked, compute_scale=cfg.predict.compute_scale)
        elif gemm_tflops:
            compute = pr.compute_uncalibrated(target, gemm_tflops=gemm_tflops)
        else:
            compute = pr.compute_uncalibrated(target, gemm_tflops=peak, what="datasheet")
        overlap = (
            (cfg.predict.overlap, "predict.overlap")
            if cfg.predict.overlap is not None
            else pr.overlap_from_records(pr.backend_of({"config": {"backend": own}}), records)
        )
        result = pr.predict(
            target,
            compute,
            link(cfg, probe, picked[1] if picked else None),
            gpus_per_node=gpus_per_node,
            overlap=overlap,
            peak_tflops=peak,
            budget_tokens=cfg.budget.tokens,
        )
    except pr.PredictionError as exc:
        return {"iteration_time_s": None, "tokens_per_s": None, "source": f"no prediction: {exc}"}
    return result.as_dict()


def _config_dict(cfg: RunConfig) -> dict[str, Any]:
    import dataclasses
    import json

    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
