"""The CPU step probe (``predict.cpu_probe``, on by default): a CPU run's own step, timed before warm-up.

On a CPU a small model's step is mostly the host's work around its FLOPs: the eager dispatch of
every operator, the optimizer's loop over the parameters, FSDP2's hooks, DeepSpeed's engine and
gloo's collectives. The FLOPs estimate (``compute_source: flops``) counts none of it and missed the
README's CPU commands by -50% to -85% (gpt-tiny and llama-tiny, single, DDP, FSDP2 and ZeRO-1/2/3 on 2
gloo ranks, ``benchmarks/cpu_predict.py``, docs/prediction.md "On the CPU"). So a CPU run that asked
for no probe times its own step first, with the layer probe's machinery
(:func:`flopsweep.layer_probe.probe_layers`: the run as configured, built apart, at the depths
:func:`flopsweep.layer_probe.run_depths` gives, released before the run is built), on a short
schedule (:data:`SETTLE`, :data:`STEPS`: after the first step, until the last 3 agree within 25%, else 2
untimed and 6 timed, and none after 0.5 s of steps past the first; the slowest rank's median). A model of at
most twice its least depth (gpt-tiny and llama-tiny: 2 blocks) is timed whole, and its median is
kept however unsteady its steps (nothing is extrapolated from it); a deeper one is extrapolated
from two copies as ``predict.layer_probe`` does, under its spread guard
(``predict.layer_probe_max_spread``). Under DeepSpeed too, since what its run does once a process before
its first engine is done before the probe's clock (``deepspeed_backend.prepare``): the job's wall time with
the probe against without, 6 ZeRO-1/2/3 pairs on the loaded 2-core machine, +1.5 s mean (-2.4 to +4.3 s, of
29-59 s jobs; 2026-12-07), where it was 3.7-7.4 s a job before. Under expert parallel each copy is first
stepped untimed and a fresh build timed (:func:`flopsweep.layer_probe.replays`: the first build paid oneDNN's
kernel for every new shape the routing made, the run none; EP 2 +27.6%, FSDP 2 x EP 2 +45.2% before).
The prediction names it (``source`` starts
``cpu probe:``; ``compute_source: layers``) and keeps its times under ``metrics.predicted.layer_probe`` with
``cpu_probe: true`` (:data:`MARK`); one that falls back says so in one record warning
(``predict.cpu_probe: the CPU step probe fell back (WHY); predicted from: SOURCE``).

It runs (:func:`runs`) only on a CPU, with ``predict.cpu_probe`` true, neither ``predict.probe`` nor
``predict.layer_probe`` asked (they are the probe then), no ``predict.calibration`` (a record of the
set-up predicts it better), ``compile=false`` (a copy would compile its graphs:
tens of seconds on a CPU) and not ``model=hf`` under a pipeline (:func:`flopsweep.rules.layer_probe`).
A GPU run never runs it: its prediction is unchanged. The top of this module is torch-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flopsweep.probe_schedule import Steps

STEPS = Steps(warmup=2, measured=6, most=6, budget_s=0.5)
"""Each copy's steps when it does not settle (:data:`SETTLE`): 2 untimed, then 6 timed, no more (the layer
probe's 5 to 15 timed cost more than a CPU smoke run's own steps); and none once its steps after the first
took 0.5 s on some rank (2 of them at least, then timed from the second): a single rank's two threads on a
loaded 2-core machine stepped 0.1-1.3 s where a quiet one stepped 25 ms, and the probe is to cost a small
share of the run."""

SETTLE = 0.25
"""A copy stops once its last 3 steps after the first agree within this share and are not still falling
(:func:`flopsweep.probe_schedule.settled`): on a CPU the first steps after the process starts run 10-15x the
steady step (gpt-tiny bf16, one rank: 0.33, 0.49, 0.38, then 0.026 s), so a fixed count of untimed steps
either times them or wastes steps; a loaded CPU's steady steps vary by 10-20%, rarely within the layer
probe's 5%."""

MARK = "cpu_probe"
"""The key, true, that marks ``metrics.predicted.layer_probe`` as this probe's (:func:`ran`)."""

SOURCE = "cpu probe: "
"""How a prediction's ``source`` starts when this probe predicted it."""


def runs(cfg: Any, device_type: str) -> bool:
    """Whether a run of ``cfg`` on a ``device_type`` device (``cpu``, ``cuda``) runs the CPU step probe
    (module docstring: a CPU, ``predict.cpu_probe``, no other probe, no calibration, eager, not an
    ``hf`` pipeline; any backend)."""
    p = cfg.predict
    return (
        device_type == "cpu"
        and bool(getattr(p, "cpu_probe", False))
        and not p.probe
        and not p.layer_probe
        and not p.calibration
        and not cfg.compile
        and not (cfg.model.arch == "hf" and cfg.parallel.pp > 1)
    )


def ran(probe: dict[str, Any] | None) -> bool:
    """Whether ``probe`` (a rank's ``layer_probe`` facts, ``metrics.predicted.layer_probe``) is this
    probe's (:data:`MARK`)."""
    return bool(probe) and bool(probe.get(MARK))


def said(how: str) -> str:
    """The ``source`` of a step this probe timed, from the layer probe's own ``how``
    (:func:`flopsweep.layer_probe.extrapolate`): ``cpu probe: the full 2 blocks timed, 41.2 ms``."""
    return SOURCE + how.removeprefix("layer probe: ")


def probe_cpu_step(cfg: Any, device: Any, layout: Any, *, batches: Any, is_oom: Any) -> dict[str, Any]:
    """Time ``cfg``'s step on this rank's CPU (module docstring); every rank calls it, at once, with
    :func:`flopsweep.layer_probe.probe_layers`'s ``batches`` and ``is_oom``.

    Returns:
        :func:`flopsweep.layer_probe.probe_layers`'s dict with ``cpu_probe: True``.
    """
    from flopsweep.layer_probe import probe_layers, run_depths

    keys = {"layer_probe_settle": SETTLE}
    if run_depths(cfg) == [cfg.model.n_layer]:  # timed whole: the median stands, however unsteady
        keys["layer_probe_max_spread"] = float("inf")
    cfg = dataclasses.replace(cfg, predict=dataclasses.replace(cfg.predict, **keys))
    out = probe_layers(cfg, device, layout, batches=batches, is_oom=is_oom, steps=STEPS)
    return {**out, MARK: True}
