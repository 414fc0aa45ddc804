"""The launch's checks of the host, before any worker starts: the free host memory a run needs
(:func:`check_free_host_memory`) and the CUDA allocator's setting (:func:`use_expandable_segments`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from flopsweep.config import ConfigError, typed_form
from flopsweep.launcher_choice import job_launcher
from flopsweep.layout import Plan
from flopsweep.override_parsing import set_key
from flopsweep.plan import OFFLOAD_KEYS, Environment
from flopsweep.text import figure, plural


def check_free_host_memory(
    p: Plan,
    free: int | None = None,
    overrides: list[str] | None = None,
    cores: int | None = None,
    env: Environment | None = None,
) -> str | None:
    """Refuse, before any worker starts, a run that cannot fit the host memory free now
    (:func:`flopsweep.hostmem.available_bytes`), which would swap the machine or meet the kernel's OOM
    killer (a SIGKILL, not an ``oom`` status) and take other users' memory with it:

    - on the CPU, when the ranks of this machine need more than is free: each rank's
      :func:`flopsweep.memory.peak_bytes` (``plan=true``'s ``est_peak_gib_per_rank``: weights,
      gradients, AdamW states, activations and logits, offloaded states too) with the CPU's margin
      (:func:`flopsweep.hostmem.cpu_need_bytes`: x 1.10 + 0.6 GiB, what CPU ranks held over it),
      times ``nproc_per_node``;
    - on GPUs with offload, when the estimate of what the node's ranks hold in host memory
      (:func:`flopsweep.memory.offload_host_held_bytes`: the offloaded states,
      :func:`flopsweep.memory.offload_host_bytes`, times what such runs held over them) is more
      than is free: the estimate decides, not the lower bound.

    Not checked in a Slurm task (each task is one rank: one refusing alone would leave the others
    waiting) nor where a search sizes the run: ``search.model=largest``, and ``batch=auto`` on the
    CPU, whose probes are each held to the free memory before they launch
    (:func:`flopsweep.sizesearch.budget_problem`).

    Args:
        free: the free host memory, bytes; None (the launch): read now.
        overrides: the command line's overrides (Hydra's task overrides): on the CPU, the line names
            the key of :data:`flopsweep.key_needs.MEMORY_KEYS` they set (``model.seq_len=1048576``) and
            the largest value of it that fits the free memory and whose run is counted to end within its
            ``timeout_s`` (:func:`_fitting_value`); of several, the one whose fix keeps the most of its value.
        cores: the usable cores of this machine, which set the pace of that count; None (the launch): read
            now (:func:`flopsweep.worker.usable_cores`).
        env: this machine (:class:`flopsweep.plan.Environment`); None: detected when a refusal needs it.
            A CPU refusal offers ``device=cuda`` only where it sees a CUDA GPU
            (:mod:`flopsweep.job.device_fix`).

    Returns:
        The warning (``host_memory: ...``: the CPU's estimate failed, unchecked), or None.

    Raises:
        ConfigError: naming the memory key the command line set, else ``model`` (CPU), or the offload
            key, the need, the free memory and the fix.
    """
    cfg = p.cfg
    if job_launcher() != "local" or cfg.search.model == "largest":
        return None
    if free is None:
        from flopsweep import hostmem

        free = hostmem.available_bytes()
    if cfg.device == "cpu":
        if cfg.batch.name == "auto":
            return None
        return _refuse_cpu_host_memory(p, free, overrides or [], cores, lambda: env or Environment.detect())
    return _check_offload_free_memory(p, free)


def _given_memory_keys(overrides: list[str]) -> list[str]:
    """The :data:`flopsweep.key_needs.MEMORY_KEYS` keys that the overrides set, in that order."""
    from flopsweep.key_needs import MEMORY_KEYS

    given = {set_key(text) for text in overrides}
    return [k for k in MEMORY_KEYS if k in given]


def _with(cfg, key: str, value: int):
    """``cfg`` with the nested ``key`` (``model.seq_len``) set to ``value`` (a copy)."""
    import dataclasses

    section, _, leaf = key.partition(".")
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **{leaf: value})})


def _fitting_value(p: Plan, key: str, free: int, cores: int) -> int | None:
    """The largest power of two of ``key`` up to the run's own value whose estimated need on the CPU
    (:func:`flopsweep.hostmem.cpu_need_bytes` of :func:`flopsweep.memory.peak_bytes`) fits ``free``,
    whose run is counted to end within its ``timeout_s`` on ``cores`` cores
    (:func:`flopsweep.cpu_duration.run_seconds`) and that validation (:func:`flopsweep.checks.validate`)
    passes, else None: a fix that runs as written here, as free now, to its end
    (``model.seq_len=262144``, which fits 22 GiB, ran into ``timeout_s``: its attention's steps take
    hours on a CPU). A power of two, so that the divisibility rules (heads, context parallel, blocks)
    hold where the run's own value held them."""
    from flopsweep.checks import validate
    from flopsweep.cpu_duration import run_seconds
    from flopsweep.hostmem import cpu_need_bytes
    from flopsweep.memory import peak_bytes

    section, _, leaf = key.partition(".")
    value = 1 << (int(getattr(getattr(p.cfg, section), leaf)).bit_length() - 1)
    while value >= 1:
        cfg = _with(p.cfg, key, value)
        try:
            tokens = (
                p.layout.global_batch(cfg.batch.micro_batch_size, cfg.batch.grad_accum) * cfg.model.seq_len
            )
            if (
                cpu_need_bytes(peak_bytes(cfg, p.layout), p.nproc_per_node) <= free
                and run_seconds(cfg, tokens, cores, p.nnodes) <= cfg.timeout_s
            ):
                validate(cfg)
                return value
        except Exception:  # noqa: BLE001 - a value the rules or the estimate refuse: a smaller one
            pass
        value //= 2
    return None


def _choices(*fixes: str, env: Callable[[], Environment]) -> str:
    """The ``fixes`` given (empty ones left out) joined as ``a or b``, ``a, b, or c``, ending in ``set
    device=cuda for a GPU sweep`` where ``env()`` sees a CUDA GPU: typed back on a machine without one,
    ``device=cuda`` is refused, and that refusal had offered ``device=cpu`` again
    (:mod:`flopsweep.job.device_fix`)."""
    given = [f for f in fixes if f] + (["set device=cuda for a GPU sweep"] if env().cuda_available else [])
    if len(given) < 3:
        return " or ".join(given)
    return f"{', '.join(given[:-1])}, or {given[-1]}"


def _refuse_cpu_host_memory(
    p: Plan,
    free: int,
    overrides: list[str],
    cores: int | None = None,
    env: Callable[[], Environment] = Environment.detect,
) -> str | None:
    """On the CPU, refuse a run whose ranks' estimated peak exceeds the free host memory (see
    :func:`check_free_host_memory`); raises ConfigError naming the memory key the command line set
    (``model.seq_len=1048576``, with the largest value that fits; of several, the least change), else
    ``model``. Returns None, or the
    warning that the estimate failed and the memory went unchecked (an estimate's bug is no reason
    to lose the measurement)."""
    from flopsweep.hostmem import CPU_RSS_BASE_BYTES, CPU_RSS_FACTOR, cpu_need_bytes
    from flopsweep.memory import peak_bytes

    cfg, nproc = p.cfg, p.nproc_per_node
    try:
        per_rank = peak_bytes(cfg, p.layout)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return f"host_memory: the free host memory was not checked: the memory estimate failed: {exc}"
    need = cpu_need_bytes(per_rank, nproc)
    if need <= free:
        return None
    ranks = f"{plural(nproc, 'rank')} need{'s' if nproc == 1 else ''}"
    example = " (e.g. model=gpt-tiny)" if cfg.model.name != "gpt-tiny" else ""
    # fewer ranks only where one rank's need fits: sharded states grow per rank as ranks go (trial 12b)
    fewer = "fewer ranks (nproc_per_node=1)" if nproc > 1 and cpu_need_bytes(per_rank, 1) <= free else ""
    problem = (
        f"on the CPU {ranks} about {need / 2**30:.1f} GiB of host memory (plan=true's "
        f"est_peak_gib_per_rank {per_rank / 2**30:.1f} x {figure(CPU_RSS_FACTOR, 6)} + "
        f"{CPU_RSS_BASE_BYTES / 2**30:.1f} GiB per rank, what CPU ranks held over the estimate), and "
        f"{free / 2**30:.1f} GiB is free now; "
        "it would swap or be killed by the OOM killer"
    )
    if cores is None:
        from flopsweep.worker import usable_cores

        cores = usable_cores()
    # a smaller micro batch only where one fits: at 1 it was offered and could not help (session 40), nor
    # at 8 where 1 did not fit either (gpt-1.3b on 22 GiB, session 41): the value that fits is named
    fit = _fitting_value(p, "batch.micro_batch_size", free, cores) if cfg.batch.micro_batch_size > 1 else None
    batch = f"set batch.micro_batch_size={fit}" if fit else ""
    model_error = ConfigError(
        "model", cfg.model.name, problem, _choices(f"pick a smaller model{example}", batch, fewer, env=env)
    )
    given = _given_memory_keys(overrides)
    if not given:
        raise model_error
    fits = {key: _fitting_value(p, key, free, cores) for key in given}
    if not any(fits.values()):  # no value of the keys given fits: "lower batch.micro_batch_size=1" was said
        raise model_error

    def kept(key: str) -> float:  # the share of the given value the fix keeps: the least change first
        section, _, leaf = key.partition(".")
        return (fits[key] or 0) / max(1, getattr(getattr(cfg, section), leaf))

    key = max(given, key=kept)  # ties: MEMORY_KEYS' order
    section, _, leaf = key.partition(".")
    value = getattr(getattr(cfg, section), leaf)  # as given (a job of a sweep: its own value)
    fit = fits[key]
    smaller = (
        f"set {key}={fit} (the largest power of two that fits the memory free now and ends within "
        f"timeout_s={typed_form(cfg.timeout_s)} on {plural(cores, 'core')})"
    )
    raise ConfigError(
        key,
        value,
        f"{problem} (model={cfg.model.name})",
        _choices(smaller, fewer, f"pick a smaller model{example}", env=env),
    )


def _check_offload_free_memory(p: Plan, free: int) -> str | None:
    """On GPUs with offload, refuse a run whose node's ranks are expected to hold more host memory
    than is free (:func:`flopsweep.memory.offload_host_held_bytes`, the estimate: the offloaded
    states' lower bound times what such runs held over it), see :func:`check_free_host_memory`;
    None without offload or when it fits. (An FSDP2 offload of Llama 3.1 8B estimated at 131.6 GiB
    was only warned about at 124.9 GiB free, and the OOM killer ended it.)"""
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes

    lower = offload_host_bytes(p.cfg, p.layout) * p.nproc_per_node
    held = offload_host_held_bytes(p.cfg, p.layout) * p.nproc_per_node
    if not held or held <= free:
        return None
    key = next(k for k in OFFLOAD_KEYS if getattr(p.cfg.backend, k, False) in (True, "cpu"))
    raise ConfigError(
        f"backend.{key}",
        getattr(p.cfg.backend, key),
        f"offload of {plural(p.nproc_per_node, 'rank')} is expected to hold about {held / 2**30:.1f} GiB "
        f"of host memory ({lower / 2**30:.1f} GiB of model states, plus what the H200's runs held over "
        f"them), and {free / 2**30:.1f} GiB is free now; it would be killed by the OOM killer",
        "pick a smaller model, fewer nproc_per_node, offload to nvme (DeepSpeed ZeRO-3), turn offload "
        "off, or wait for the host's memory to be free",
    )


ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def use_expandable_segments(device: str) -> None:
    """On CUDA, run the ranks with ``PYTORCH_ALLOC_CONF=expandable_segments:True`` (as torchtitan
    does), unless the user set either allocator variable: near a full GPU, fixed-size segments
    fragment and the allocator frees and retries inside the measured steps. The record keeps
    the setting in ``system.cuda_alloc_conf``."""
    if device == "cuda" and not any(os.environ.get(v) for v in ALLOC_CONF_VARS):
        os.environ["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"
