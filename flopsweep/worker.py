"""One rank of a run: process group, model, warm-up, measured steps, gather.

The worker never writes ``metrics.json``. Rank 0 writes the gathered per-rank
figures to ``rank_result.json`` in the run's scratch directory, and any rank that
fails writes ``rank{N}_error.json`` there (and its traceback to the job
directory) before it exits non-zero (:mod:`flopsweep.rank_faults`: those files, the phase file and the
injected test faults). The job process turns these into the record.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.config import RunConfig
from flopsweep.cpu_probe import runs as runs_cpu_probe
from flopsweep.expert_parallel import reset_routed, routed_tokens
from flopsweep.files import atomic_write_json
from flopsweep.gc_policy import GarbageCollection
from flopsweep.layout import Layout
from flopsweep.quiet import silence_known_warnings
from flopsweep.rank_exit import end_process
from flopsweep.rank_faults import Phase, is_oom, poisoned, stack_on_fatal_signal, write_error
from flopsweep.signals import end_with_parent, rank_ignores_interrupt
from flopsweep.text import plural
from flopsweep.window import MeasuredWindow, WindowFigures
from flopsweep.wire import RankFigures

COLLECTIVE_GRACE_S = 60.0
"""Seconds the process group's collective timeout adds to the job's ``timeout_s``."""


@dataclass(frozen=True, kw_only=True)
class RankSpec:
    """Where a rank stands and where it reports; picklable for the spawn context."""

    cfg: RunConfig
    job_dir: str
    scratch_dir: str
    master_addr: str
    master_port: int
    nproc_per_node: int
    layout: Layout
    """The plan's parallel degrees (:attr:`flopsweep.plan.Plan.layout`); ``layout.world_size``
    ranks in all."""
    node_rank: int = 0
    verbose: bool = False  # the job logs at debug level (hydra.verbose): so does the rank
    agent_store: bool = False
    """The launcher serves the rendezvous store at ``master_port`` (:func:`flopsweep.launch.agent_store`):
    rank 0 joins it as a client (``TORCHELASTIC_USE_AGENT_STORE``) instead of binding the port."""
    parent_pid: int = 0
    """The process that starts the ranks (``os.getpid()`` in :func:`flopsweep.launch.spawn_ranks`): the
    rank gets SIGTERM when it dies (:func:`flopsweep.signals.end_with_parent`); 0: its parent at start."""
    model_file: bytes | None = None
    """The ``config.json`` bytes validation read for ``model=hf``
    (:func:`flopsweep.models.hf_files.validated_bytes`): the rank builds from them, never from the
    path again (a file swapped after validation is not what runs). None for other families."""

    @property
    def world_size(self) -> int:
        """Ranks in the run: the layout's product of degrees."""
        return self.layout.world_size


def spawned_main(local_rank: int, spec: RankSpec) -> None:
    """Entry point of a locally spawned rank (``torch.multiprocessing.start_processes``). The rank ignores
    SIGINT from its first line (:func:`flopsweep.signals.children_ignore_interrupt`) to its end
    (:func:`flopsweep.signals.rank_ignores_interrupt`): its launcher stops it and records the run. It
    also ends (SIGTERM) when its launcher dies, even by SIGKILL (:func:`flopsweep.signals.end_with_parent`),
    rather than run on as an orphan."""
    end_with_parent(spec.parent_pid or os.getppid())
    rank_ignores_interrupt()
    rank = spec.node_rank * spec.nproc_per_node + local_rank
    os.environ.update(
        MASTER_ADDR=spec.master_addr,
        MASTER_PORT=str(spec.master_port),
        RANK=str(rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(spec.world_size),
        LOCAL_WORLD_SIZE=str(spec.nproc_per_node),
        TORCHELASTIC_USE_AGENT_STORE=str(spec.agent_store),
    )
    if spec.verbose:  # a spawned process starts with no logging set up
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(f"[flopsweep rank {rank}] %(message)s"))
        logging.getLogger("flopsweep").addHandler(handler)
        logging.getLogger("flopsweep").setLevel(logging.DEBUG)
    # The job process logs the run's error once; each rank's own line only at debug level.
    stack_on_fatal_signal(Path(spec.scratch_dir) / f"rank{rank}_stack.txt")
    run_rank(spec, rank=rank, local_rank=local_rank, report=spec.verbose)
    # The rank's work is done and its process group destroyed: end without interpreter finalization
    # (issue 30, class 14), after multiprocessing's finalizers (a named semaphore left registered was the
    # resource tracker's "leaked semaphore objects" warning at the job's exit: flopsweep.rank_exit).
    end_process(0)


def run_rank(spec: RankSpec, *, rank: int, local_rank: int, report: bool = True) -> None:
    """Run one rank; the rendezvous comes from ``MASTER_ADDR``/``MASTER_PORT`` in the environment.

    A failure is written to ``rank{N}_error.json`` before the process group is
    destroyed: the peers fail in their collectives only after that, so the error
    file of the rank that failed first carries the earliest time. With ``report`` (a Slurm
    task, whose log is its own) the failure is also printed on stderr.

    Raises:
        SystemExit(1): after writing this rank's error file, on any failure.
    """
    phase = Phase(Path(spec.scratch_dir) / f"rank{rank}_phase.txt", fault=spec.cfg.fault, rank=rank)
    try:
        phase.enter("init")
        with GarbageCollection(spec.cfg.steps.gc_freq) as collector:  # probes and steps alike
            _run(spec, rank, local_rank, phase, collector.step_done)
    except BaseException as exc:  # noqa: BLE001 - every outcome must be recorded
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            raise
        write_error(spec.job_dir, spec.scratch_dir, rank, phase.name, exc, report=report)
        sys.exit(1)
    finally:
        _destroy_process_group()


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``os.sched_getaffinity``: what a
    cgroup cpuset, ``taskset`` or Slurm's binding leaves it), ``os.cpu_count()`` where the OS has
    no affinity call. Workers inherit it from the job process."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def cpu_threads(nproc_per_node: int) -> int:
    """Intra-op threads for each CPU rank when ``OMP_NUM_THREADS`` is not set: the usable cores
    (:func:`usable_cores`) shared among the node's ``nproc_per_node`` ranks, at least 1 (torchrun sets
    ``OMP_NUM_THREADS=1`` for several ranks per node; torch's own default, every core of the machine,
    oversubscribes a process confined to fewer). The record keeps what rank 0 used
    (``system.cpu_threads``)."""
    return max(1, usable_cores() // max(1, nproc_per_node))


def _run(spec: RankSpec, rank: int, local_rank: int, phase: Phase, after_step: Callable[[], None]) -> None:
    cfg = spec.cfg
    if spec.model_file is not None:  # the file its job validated, kept for hf_files.source
        from flopsweep.models.hf_files import pin

        pin(spec.model_file, cfg.model.config, Path(cfg.model.config))  # the path is not read
    # DeepSpeed picks its accelerator at import; make it match the run's device.
    os.environ.setdefault("DS_ACCELERATOR", cfg.device)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    silence_known_warnings(rank)  # torchao's import lines; inductor's note on rank 0 only (flopsweep.quiet)
    import torch
    import torch.distributed as dist

    from flopsweep.attention_kernels import check_kernel
    from flopsweep.backends import build_trainer
    from flopsweep.metrics import unsteady_steps
    from flopsweep.precision import DTYPES
    from flopsweep.trainers import optimizer_facts

    if cfg.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        if not os.environ.get("OMP_NUM_THREADS"):  # a user's setting wins (torch read it at import)
            torch.set_num_threads(cpu_threads(spec.nproc_per_node))
        device = torch.device("cpu")
    # The collective timeout outlasts the job's: the launcher's timeout_s must fire
    # first and stop every rank, rather than one rank's watchdog aborting it alone.
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        rank=rank,
        world_size=spec.world_size,
        device_id=device if device.type == "cuda" else None,
        timeout=datetime.timedelta(seconds=cfg.timeout_s + COLLECTIVE_GRACE_S),
    )
    _check_distinct_devices(device, dist)
    check_kernel(
        cfg.attention,
        head_dim=cfg.model.n_embd // cfg.model.n_head,
        dtype=DTYPES[cfg.precision.name],
        device=device,
    )  # KernelUnavailable: status invalid
    gemm = _matmul_rate(cfg, device)
    links = _interconnect(cfg, device)  # before warm-up: the links, not the steps
    pieces = _compute_probe(cfg, device) if cfg.predict.probe else None  # before the trainer's memory
    depths = _layer_probe(cfg, device, spec.layout, rank) if cfg.predict.layer_probe else None
    log = _logger(rank)
    if runs_cpu_probe(cfg, device.type):  # a CPU run with no probe asked (flopsweep.cpu_probe)
        log(cpu_probe_line(cfg))  # its steps at a long sequence take minutes: said, not silent (#1069)
        depths = _layer_probe(cfg, device, spec.layout, rank, cpu=True)
    trainer = build_trainer(cfg, device, spec.layout)
    batches = make_batches(cfg, spec.layout, rank, device)
    phase.enter("warmup")
    losses = warm_up(trainer, batches, cfg.steps.warmup, device, log, phase, after_step)
    phase.enter("measure")
    window = MeasuredWindow(device)
    figures, measured, extra = measure_steady(trainer, batches, cfg, window, log, phase, after_step)
    losses += measured
    result = _rank_figures(rank, device, figures, losses)  # the final measured window only
    breakdown, profile_problem = (
        _profile(trainer, batches, device, Path(spec.job_dir), rank, log) if cfg.profile else (None, None)
    )
    result = RankFigures(
        **result,
        matmul_tflops=gemm,
        interconnect=links if rank == 0 else None,
        compute_probe=pieces if rank == 0 else None,
        layer_probe=depths if rank == 0 else None,
        warmup_steps=cfg.steps.warmup + extra,
        fp8_layers=_fp8_layers(trainer),
        expert_tokens=routed_tokens(getattr(trainer, "model", None)),
        optimizer=optimizer_facts(trainer) if rank == 0 else None,  # the record keeps rank 0's
        unsteady_steps=unsteady_steps(figures.step_times_s),
        breakdown=breakdown,
        profile_problem=profile_problem,
    ).as_dict()
    gathered: list[Any] = [None] * spec.world_size if rank == 0 else None
    dist.gather_object(result, gathered, dst=0)
    if rank == 0:
        atomic_write_json(Path(spec.scratch_dir) / "rank_result.json", {"ranks": gathered})
    # This rank's figures are with rank 0: what follows (destroying the process group, the backend's
    # threads) cannot change them, and a signal there does not cost the run (outcome.collect).
    phase.enter("teardown")


def _profile(
    trainer: Any, batches: list[Any], device: Any, job_dir: Path, rank: int, log: Any
) -> tuple[dict | None, str | None]:
    """``profile=true``: one more step under torch.profiler, after the measured ones (which it
    does not change); its trace goes to ``profile/rank<R>.trace.json.gz`` in the run directory.

    Returns:
        ``(breakdown, None)``, or ``(None, why)`` when no breakdown came of it: the trace's
        directory cannot be written (a file named ``profile`` is in the way; checked on every
        rank first, and when any rank cannot write, no rank runs the step, whose collectives
        need them all), or the trace could not be written or read back. The job records ``why``
        as a warning and keeps the run ``ok``: the measured figures are never lost to the profile.
    """
    import torch
    import torch.distributed as dist

    from flopsweep.metrics import TRACE_DIR
    from flopsweep.profile import PARTS, TraceProblem, profile_step, trace_dir_problem

    path = job_dir / TRACE_DIR / f"rank{rank}.trace.json.gz"
    problem = trace_dir_problem(path.parent)
    verdict = torch.tensor([1.0 if problem else 0.0], device=device)
    dist.all_reduce(verdict, op=dist.ReduceOp.MAX)
    if verdict.item():
        return None, problem or "another rank could not write its trace, so no rank profiled"
    log(f"profiled step: tracing to {path}")
    try:  # Kineto's own console lines go to the debug log, as DeepSpeed's do
        breakdown = profile_step(trainer, batches, device, path, logging.getLogger("flopsweep").debug)
    except TraceProblem as exc:
        return None, str(exc)
    parts = ", ".join(f"{k} {getattr(breakdown, k):.4f}" for k in PARTS)
    log(f"profiled step {breakdown.step_s:.4f} s: {parts}")
    return breakdown.as_dict(), None


def _check_distinct_devices(device: Any, dist: Any) -> None:
    """Two ranks on one GPU would halve each other's throughput: refuse it."""
    if device.type != "cuda":
        return
    import torch

    ident = f"{os.uname().nodename}:{torch.cuda.get_device_properties(device).uuid}"
    idents: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(idents, ident)
    if len(set(idents)) != len(idents):
        raise RuntimeError(f"two ranks share a GPU: {idents}; give each rank its own GPU")


def make_batches(cfg: RunConfig, layout: Layout, rank: int, device: Any) -> list[Any]:
    """``grad_accum`` micro batches of random token ids, made on the device once.

    Returns:
        list of LongTensor ``[micro_batch_size, seq_len + 1]``; global rank ``r`` draws from
        seed ``(cfg.seed, d)``, ``d = layout.dp_rank(r)`` its data-parallel rank, so that
        data-parallel ranks see different data, the tensor/pipeline/context peers of one
        data-parallel rank the same data, and every backend the same data.
    """
    import torch

    gen = torch.Generator(device=device).manual_seed(cfg.seed * 1_000_003 + layout.dp_rank(rank))
    shape = (cfg.batch.micro_batch_size, cfg.model.seq_len + 1)
    return [
        torch.randint(0, cfg.model.vocab_size, shape, generator=gen, device=device)
        for _ in range(cfg.batch.grad_accum)
    ]


def _matmul_rate(cfg: RunConfig, device: Any) -> float:
    """This device's dense GEMM rate at the run's matmul precision (fp8 runs: float8), TFLOP/s."""
    import torch

    from flopsweep.matmul import measure_matmul_tflops
    from flopsweep.precision import DTYPES, PRECISIONS

    fp8 = PRECISIONS[cfg.precision.name].fp8_recipe is not None
    return measure_matmul_tflops(device, torch.float8_e4m3fn if fp8 else DTYPES[cfg.precision.name])


def _compute_probe(cfg: RunConfig, device: Any) -> dict[str, Any]:
    """``predict.probe=true``: the run's pieces timed on this rank's device, or read back from this
    machine's probes (:func:`flopsweep.compute_probe.cached_probe`); every rank runs it, at once,
    so that each measures beside the others as the steps will run, and rank 0's is recorded."""
    from flopsweep.compute_probe import cached_probe

    return cached_probe(cfg, device)


def _layer_probe(cfg: RunConfig, device: Any, layout: Any, rank: int, *, cpu: bool = False) -> dict[str, Any]:
    """``predict.layer_probe=true``: the run's step timed on its shallow copies, before the trainer
    is built (:func:`flopsweep.layer_probe.probe_layers`); every rank runs it, at once. ``cpu``: the
    CPU step probe instead (:func:`flopsweep.cpu_probe.probe_cpu_step`, its shorter schedule)."""
    from flopsweep.cpu_probe import probe_cpu_step
    from flopsweep.layer_probe import probe_layers

    def batches(shallow: RunConfig) -> list[Any]:
        return make_batches(shallow, layout, rank, device)

    probe = probe_cpu_step if cpu else probe_layers
    return probe(cfg, device, layout, batches=batches, is_oom=is_oom)


def _interconnect(cfg: RunConfig, device: Any) -> list[dict[str, Any]]:
    """``system.interconnect``: the bus bandwidth of all-gather, reduce-scatter and all-reduce over
    every rank at the run's message sizes (:mod:`flopsweep.collectives`); ``[]`` on one rank."""
    import torch

    from flopsweep.collectives import message_sizes, probe_interconnect
    from flopsweep.models import family
    from flopsweep.predict import PARAM_BYTES

    param_bytes = PARAM_BYTES.get(cfg.precision.name, 2)
    sizes = message_sizes(
        n_params=family(cfg.model).n_params(cfg.model),
        n_layer=cfg.model.n_layer,
        param_bytes=param_bytes,
        device_type=device.type,
    )
    # The sizes are bytes; the element type only has to be one the backend reduces (gloo: fp32).
    cuda_dtype = torch.float32 if param_bytes == 4 else torch.bfloat16
    dtype = cuda_dtype if device.type == "cuda" else torch.float32
    return probe_interconnect(device, dtype, sizes)


def _fp8_layers(trainer: Any) -> int | None:
    """How many nn.Linear layers were converted to float8 (None when the run is not fp8)."""
    model = getattr(trainer, "model", None) or getattr(getattr(trainer, "engine", None), "module", None)
    names = getattr(getattr(model, "module", model), "fp8_layers", None)
    return None if names is None else len(names)


def warm_up(
    trainer: Any,
    batches: list[Any],
    steps: int,
    device: Any,
    log: Any,
    phase: Phase,
    after_step: Callable[[], None] | None = None,
) -> list:
    """Run ``steps`` unmeasured optimizer steps, logging each one's time (rank 0), ``after_step`` after each.

    Returns:
        the loss tensors, one per step.
    """
    import torch

    losses = []
    for i in range(steps):
        start = time.perf_counter()
        losses.append(poisoned(trainer.step(batches), phase))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        log(f"warm-up step {i + 1}/{steps}: {time.perf_counter() - start:.3f} s")
        if after_step is not None:
            after_step()
    return losses


def measure_steady(
    trainer: Any,
    batches: list[Any],
    cfg: RunConfig,
    window: MeasuredWindow,
    log: Any,
    phase: Phase,
    after_step: Callable[[], None] | None = None,
) -> tuple[WindowFigures, list, int]:
    """Measure ``steps.measure`` steps in ``window``; while a step is over 3x the median of the
    others (compilation, autotuning), warm up more and measure again, up to
    ``steps.max_extra_warmup`` extra steps. Every rank takes the same decision (an all-reduce of
    the verdict). Measuring again restarts the window as a whole, so the figures returned are
    those of the final measured steps only.

    Returns:
        (the final window's figures, loss tensors of every step run here, extra warm-up steps).
    """
    import torch
    import torch.distributed as dist

    from flopsweep.metrics import unsteady_steps

    extra, losses = 0, []
    while True:
        figures, measured = measure(trainer, batches, cfg.steps.measure, window, log, phase, after_step)
        times = figures.step_times_s
        verdict = torch.tensor([1.0 if unsteady_steps(times) else 0.0], device=window.device)
        dist.all_reduce(verdict, op=dist.ReduceOp.MAX)
        more = min(cfg.steps.measure, cfg.steps.max_extra_warmup - extra)
        if not verdict.item() or more <= 0:
            return figures, losses + measured, extra
        shown = [round(t, 4) for t in times]
        log(f"unsteady steps {shown} s: {plural(more, 'more warm-up step')}, then measuring again")
        losses += measured + warm_up(trainer, batches, more, window.device, log, phase, after_step)
        extra += more


def measure(
    trainer: Any,
    batches: list[Any],
    steps: int,
    window: MeasuredWindow,
    log: Any,
    phase: Phase | None = None,
    after_step: Callable[[], None] | None = None,
) -> tuple[WindowFigures, list]:
    """Run ``steps`` optimizer steps inside ``window`` (started here, so a second call restarts it: step
    times, peak memory, retries, every reader count these steps only); ``after_step`` after each (gc_policy).

    Returns:
        (the window's figures, loss tensors per step).
    """
    losses = []
    reset_routed(getattr(trainer, "model", None))  # the experts' counts of these steps only
    window.start()
    for i in range(steps):
        loss = trainer.step(batches)
        losses.append(poisoned(loss, phase) if phase is not None else loss)
        if i == steps - 1 and hasattr(trainer, "drain"):  # optim.overlap_forward: its last step counted
            trainer.drain()
        window.step_done()
        log(f"measured step {i + 1}/{steps}")
        if after_step is not None:
            after_step()
    return window.stop(), losses


def _rank_figures(rank: int, device: Any, figures: WindowFigures, losses: list) -> dict[str, Any]:
    """This rank's figures: the window's (step times, memory, every reader's) and the losses."""
    import torch

    # Strict JSON: a NaN or infinite loss travels as None (the record flags it).
    values = torch.stack([x.float() for x in losses]).cpu().tolist()
    return {
        "rank": rank,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpu_threads": torch.get_num_threads(),
        "step_times_s": figures.step_times_s,
        "losses": [v if math.isfinite(v) else None for v in values],
        **figures.counters,
    }


def cpu_probe_line(cfg: RunConfig) -> str:
    """The line rank 0 prints before the CPU step probe (:mod:`flopsweep.cpu_probe`), part of the run's
    ``init`` phase: ``model.seq_len=100000 device=cpu`` was silent 2.5 min after ``launching 1 rank`` (its
    flash attention over 100,000 tokens a step, several steps), its record ``error.phase=init`` when stopped.
    Its fix, ``predict.cpu_probe=false``, is a key of the schema (torch-free)."""
    tokens = cfg.model.seq_len * cfg.batch.micro_batch_size
    return (
        f"timing the step before warm-up (the CPU step probe: a few steps of {tokens:,} tokens each; "
        "predict.cpu_probe=false skips it)"
    )


def _logger(rank: int) -> Any:
    from flopsweep.text import say

    def log(message: str) -> None:
        if rank == 0:
            say(f"[flopsweep rank 0] {message}")  # a closed pipe (| head) drops lines, never fails the run

    return log
