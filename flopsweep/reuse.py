"""A resumed search takes over the probes of the record it resumes (``resume=true``).

A job that ``resume=true`` runs again (its record is not ``ok``: an interrupted search, a failed
probe, a measured run that broke) may hold in that record the probes its searches finished
(``run.model_search`` and ``run.batch_search`` hold themselves after every probe). On a GPU each
probe costs minutes, so the searches of the new run start from them
(:func:`flopsweep.modelsearch.find_largest_model`, :func:`flopsweep.autobatch.find_micro_batch`
``reuse=``): a size probed already is not run again; its outcome stands (an ``ok`` probe's memory
guides the next size, one too large bounds the search) and the new record lists it with
``"reused": true``.

Only a record of the same set-up is read (:func:`flopsweep.identity.same_job`, as ``resume``
decides which records to skip), and only when its probes ran on this kind of machine
(:class:`Machine`: the device name, the first GPU's memory, the world size, and on the CPU the host,
whose available memory is the budget there): a probe's fit is the machine's, not the config's.
Probes ending in ``error``, ``invalid`` or ``refused`` (validation, which costs nothing) run again.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
from typing import Any

from flopsweep import identity
from flopsweep.sizesearch import cuda_capacity
from flopsweep.text import plural

log = logging.getLogger("flopsweep")

REUSED_STATUSES = ("ok", "oom", "over_budget", "killed")
"""Probe statuses a resumed search takes over: the fit (``ok``) and the "too large" of
:data:`flopsweep.sizesearch.DOES_NOT_FIT` that cost a launch; ``refused`` is validation's, free to
decide again, and an ``error`` may not happen twice."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resumed:
    """The record that a ``resume=true`` job found in its directory: not ``ok``, of the same set-up."""

    record: dict[str, Any]
    """The record as read (``metrics.json``, schema v1)."""
    name: str
    """The file name it was set aside under (``metrics.<status>-<run id>.json``), for the log."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Machine:
    """What decides whether a probe fits besides the config."""

    device_name: str
    """``system.device_name``: the GPU's name (``torch.cuda.get_device_name(0)``), ``cpu`` off CUDA."""
    gpu_memory_bytes: int | None
    """The first visible GPU's memory, bytes (:func:`flopsweep.sizesearch.cuda_capacity`); None off CUDA.
    A search's record keeps it as ``gpu_memory_bytes`` (older records lack it: not reused on CUDA)."""
    world_size: int
    """The ranks the probes run on (``nproc_per_node=auto`` may differ between machines)."""
    hostname: str | None
    """``system.hostname``, compared on the CPU only (where the host's available memory is the budget);
    None on CUDA, whose lent copies of one machine have other names."""

    @classmethod
    def here(cls, device: str, world_size: int) -> Machine:
        """This machine, for a run on ``device`` (``cuda`` | ``cpu``) with ``world_size`` ranks."""
        memory = cuda_capacity(device)
        if memory is None:
            return cls(
                device_name="cpu", gpu_memory_bytes=None, world_size=world_size, hostname=socket.gethostname()
            )
        import torch

        name = torch.cuda.get_device_name(0)
        return cls(device_name=name, gpu_memory_bytes=memory, world_size=world_size, hostname=None)


def machine_difference(record: dict[str, Any], search: dict[str, Any], here: Machine) -> str:
    """How the machine of ``record`` (its ``system``, and its ``search``'s ``gpu_memory_bytes``)
    differs from ``here``, as ``"NAME THEIRS, this run's OURS"`` texts joined by ``"; "``; ``""``
    when it is the same kind of machine (:func:`flopsweep.identity.machine_difference`)."""
    return identity.machine_difference(record, search, dataclasses.asdict(here))


def reusable_probes(
    resumed: Resumed | None,
    key: str,
    size_key: str,
    *,
    here: Machine | None,
    same: dict[str, Any],
    what: str,
) -> dict[int, dict[str, Any]]:
    """The probes of ``resumed.record["run"][key]`` a resumed search takes over, by size
    (``size_key``: ``n_layer``, ``micro_batch_size``), and one log line (``what`` its prefix,
    ``search.model=largest``) saying how many, from which record, or why none.

    Args:
        same: the keys of the old search record that must equal this search's (the micro batch
            the model search probed at, the model size the micro-batch search probed); a record
            without the key counts as another set-up.

    Returns:
        ``{size: probe entry}`` of the statuses in :data:`REUSED_STATUSES`; empty without a
        resumed record (``here`` None then) or search, on another machine
        (:func:`machine_difference`) or set-up, or when the old run injected a fault
        (``fault.kind``: its probes failed by design, not by size).
    """
    if resumed is None or here is None:
        return {}
    old = resumed.record
    search = (old.get("run") or {}).get(key)
    if not isinstance(search, dict) or not isinstance(search.get("probes"), list):
        return {}
    run_id = (old.get("run") or {}).get("id")
    if differs := machine_difference(old, search, here):
        log.info(
            "%s: resume=true: the probes of run %s (%s) are not reused: another machine (%s)",
            what,
            run_id,
            resumed.name,
            differs,
        )
        return {}
    fault = ((old.get("config") or {}).get("fault") or {}).get("kind", "none")
    if fault != "none":  # an injected fault decided its probes, not the size
        log.info(
            "%s: resume=true: the probes of run %s (%s) are not reused: it injected fault.kind=%s",
            what,
            run_id,
            resumed.name,
            fault,
        )
        return {}
    if changed := [k for k, v in same.items() if search.get(k, ...) != v]:
        shown = ", ".join(f"{k} {search.get(k)}, this run's {same[k]}" for k in changed)
        log.info(
            "%s: resume=true: the probes of run %s (%s) are not reused: another set-up (%s)",
            what,
            run_id,
            resumed.name,
            shown,
        )
        return {}
    taken, dropped = {}, []
    for p in search["probes"]:
        size = p.get(size_key) if isinstance(p, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            dropped.append(
                f"{size_key} {size!r} (not a whole number above 0)" if isinstance(p, dict) else repr(p)
            )
        elif p.get("status") not in REUSED_STATUSES:
            dropped.append(
                f"{size_key} {size} (status {p.get('status')}: runs again if the search reaches it)"
            )
        else:
            taken[size] = p
    sizes = ", ".join(str(n) for n in sorted(taken)) or "none"
    log.info(
        "%s: resume=true: %s of run %s (%s; %s %s) can stand in for the sizes this search reaches",
        what,
        plural(len(taken), "probe"),
        run_id,
        resumed.name,
        size_key,
        sizes,
    )  # session 37: said "reusing ..., not run again" of sizes the search then never reached
    if dropped:
        log.info("%s: resume=true: not reused from run %s: %s", what, run_id, "; ".join(dropped))
    return taken


def reused_line(what: str, reuse: dict[int, dict[str, Any]], record: Any, size_key: str) -> str | None:
    """After a search that was offered ``reuse`` (:func:`reusable_probes`), the log line saying which of
    them its record (``metrics.json["run"][key]``) took over and which it never reached; None when none
    was offered. The search visits only the sizes on its path, so an offered probe may go unused."""
    if not reuse:
        return None
    probes = record.get("probes") if isinstance(record, dict) else None
    used = sorted(
        {p.get(size_key) for p in probes or [] if isinstance(p, dict) and p.get("reused")} & set(reuse)
    )
    unused = sorted(set(reuse) - set(used))
    shown = ", ".join(map(str, used)) or "none"
    return f"{what}: resume=true: reused {plural(len(used), 'probe')} ({size_key} {shown})" + (
        f"; not on this search's path, so unused: {size_key} {', '.join(map(str, unused))}" if unused else ""
    )
