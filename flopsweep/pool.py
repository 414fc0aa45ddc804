"""Packing a sweep's jobs onto one machine's devices (``hydra/launcher=pool``). Torch-free.

The launcher (``hydra_plugins.flopsweep_pool``) runs each job as a process of its own, pinned to
``need`` devices of the pool through ``CUDA_VISIBLE_DEVICES`` (:data:`VISIBLE`). This module holds
what needs no process: the pool's device list (:func:`pool_devices`), a job's need (:func:`job_need`),
the one-line refusals (:func:`too_big_problem`), the packing (:class:`Packer`, :func:`next_fit`) and
the progress lines. ``need`` is the job's ``nproc_per_node`` (one device per rank): on ``device=cpu``
there is no GPU to pin, but the jobs still take slots of the given list, so that the whole path runs
on a CPU machine.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from flopsweep.config import ConfigError
from flopsweep.local_gpus import DEVICE_ID
from flopsweep.lookalike import ascii_digits, named

VISIBLE = "CUDA_VISIBLE_DEVICES"
"""The variable that pins a job to its devices (CUDA's; set on ``device=cpu`` too, and recorded as
``system.visible_devices``)."""

SLOTS_KEY = "hydra.launcher.slots"
MAX_CPU_SLOTS = 1024
"""The largest count of slots on ``device=cpu`` (no GPU to count them against): a count above it
is refused rather than a list of that many slots built (``hydra.launcher.slots=99999999999``)."""


def _as_ids(value: Any, key: str, fix: str | None = None) -> list[str]:
    """``[0, 1]``, ``"0,1"`` or ``("GPU-ab12", ...)`` as a list of non-empty device ids (text).

    Raises:
        ConfigError: not a list or text, an empty list, or an id that is not an index or a
            ``GPU-``/``MIG-`` UUID (``abc``, ``1.5``, ``-1``: CUDA would see no device at all).
    """
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(key, value, "is not a count or a list of device ids", f"set {key}=2 or {key}=[0,1]")
    ids = [str(item).strip() for item in items]
    if not ids or any(not i or "," in i for i in ids):
        raise ConfigError(key, value, "is not a list of device ids", f"set {key}=[0,1,2,3]")
    if bad := [i for i in ids if not DEVICE_ID.fullmatch(i)]:
        if ascii_digits(bad[0]) is not None:
            meant = [ascii_digits(i) or i for i in ids]
            first = next(c for c in bad[0] if not c.isascii() and c.isdigit())
            count = isinstance(value, str) and len(ids) == 1 and meant[0].isdigit() and int(meant[0]) > 0
            fixed = ",".join(meant) if key == VISIBLE or count else "[" + ",".join(meant) + "]"
            raise ConfigError(
                key,
                value,
                f"names {bad[0]!r}, in another script's digits ({named(first)}); an id takes digits 0-9",
                f"set {key}={fixed}",
            )
        raise ConfigError(
            key,
            value,
            f"names {bad[0]!r}, not a device index or a GPU-/MIG- UUID",
            fix or f"set {key}=[0,1] (indexes, or UUIDs as nvidia-smi -L lists them)",
        )
    if len(set(ids)) != len(ids):
        raise ConfigError(key, value, "names a device twice", f"list each device once, e.g. {key}=[0,1]")
    return ids


def pool_devices(
    slots: Any,
    *,
    device: str,
    visible: str | None = None,
    detected: int | None = None,
    devices: Any = None,
) -> list[str]:
    """The pool's device ids, in order: what each job's ``CUDA_VISIBLE_DEVICES`` is made of.

    Args:
        slots: ``hydra.launcher.slots``: null (detect the GPUs), a count N (the first N devices) or
            a list of device ids (``[0,1,2,3]``; UUIDs allowed).
        device: the sweep's ``device`` (``cpu``, ``cuda``, ``auto``).
        visible: the sweep process's own ``CUDA_VISIBLE_DEVICES`` (None: unset). When set, the pool
            is made of its entries only: a given id must be one of them.
        detected: the GPUs this process sees (NVML or torch; None: not asked).
        devices: ``hydra.launcher.devices``, another name for a list of ``slots``.

    Raises:
        ConfigError: one line naming ``hydra.launcher.slots``, the value and the fix: both keys
            set, a bad list or count, an id outside the sweep's ``CUDA_VISIBLE_DEVICES``, more
            devices than there are, or no GPU found and no list given (``device=cpu`` needs one).
    """
    key = SLOTS_KEY
    if devices is not None:
        if slots is not None:
            raise ConfigError(
                "hydra.launcher.devices", devices, "is set with hydra.launcher.slots", "set only one of them"
            )
        slots, key = devices, "hydra.launcher.devices"
    visible_fix = f"unset {VISIBLE}, or list the GPUs the pool may use, e.g. {VISIBLE}=0,1"
    allowed = _as_ids(visible, VISIBLE, visible_fix) if visible not in (None, "") else None
    if isinstance(slots, bool):
        raise ConfigError(key, slots, "is not a count or a list of device ids", f"set {key}=[0,1]")
    if isinstance(slots, int) or (
        isinstance(slots, str) and slots.strip().isascii() and slots.strip().isdigit()
    ):
        count = int(slots)
        have = allowed if allowed is not None else [str(i) for i in range(detected or 0)]
        if count < 1:
            raise ConfigError(key, slots, "is not a positive count", f"set {key}=1 or a list such as [0,1]")
        if allowed is None and device == "cpu" and count > MAX_CPU_SLOTS:
            raise ConfigError(
                key,
                slots,
                f"is more than {MAX_CPU_SLOTS} slots on device=cpu",
                f"set {key}=2 or a list such as [0,1]",
            )
        if len(have) >= count:
            return have[:count]
        if allowed is None and device == "cpu":  # no GPU to count: slots 0..N-1
            return [str(i) for i in range(count)]
        raise ConfigError(
            key, slots, f"{len(have)} devices are visible here", f"set {key}={len(have)} or fewer"
        )
    if slots is not None:
        ids = _as_ids(slots, key)
        if allowed is not None and (outside := [i for i in ids if i not in allowed]):
            raise ConfigError(
                key,
                ",".join(ids),
                f"names {','.join(outside)}, outside this sweep's {VISIBLE}={visible}",
                f"list devices among {','.join(allowed)}, or drop {key} to use them all",
            )
        return ids
    if allowed is not None:
        return allowed
    if device != "cpu" and detected:
        return [str(i) for i in range(detected)]
    raise ConfigError(
        SLOTS_KEY,
        None,
        f"no GPU was found to pool (device={device})",
        f"give the pool's devices, e.g. {SLOTS_KEY}=[0,1] (device=cpu: each job gets slots of its own)",
    )


def text_list_problem(key: str, value: Any, *, in_file: bool = False) -> ConfigError | None:
    """A text of several device ids for the pool's list (``"0,1"``, ``"[0,1]"``: quoted on the command line,
    or ``slots: "0,1"`` in a sweep file), refused before Hydra, else None: the pool takes a count or a list.
    The file's text was read back as the override ``slots=0,1``, a sweep, and refused with Hydra's
    ``ChoiceSweep(...)`` repr; a quoted ``'[0,1]'`` passed the check and the launcher refused it (exit 1).
    The fix lists the ids (``in_file``: as YAML, ``hydra: {launcher: {slots: [0, 1]}}``)."""
    if not isinstance(value, str) or not any(c in value for c in ",[]"):
        return None
    parts = [p.strip().strip("'\"") for p in value.strip().strip("[]").split(",")]
    meant = [ascii_digits(p) or p for p in parts]
    ids = meant if meant and all(DEVICE_ID.fullmatch(m) for m in meant) else ["0", "1"]
    name = key.rpartition(".")[2]
    fix = (
        f"write it as a list in the file: hydra: {{launcher: {{{name}: [{', '.join(ids)}]}}}}"
        if in_file
        else f"set {key}=[{','.join(ids)}] (a list, unquoted)"
    )
    return ConfigError(key, value, "is one text, not a count or a list of device ids", fix)


def settings_problem(timeout_min: Any, grace_s: Any) -> ConfigError | None:
    """The launcher's ``hydra.launcher.timeout_min`` (each job's deadline, minutes: positive) and
    ``hydra.launcher.grace_s`` (SIGTERM to SIGKILL, seconds: zero or more, finite) checked, or None.
    A boolean (``is a boolean, not a number of minutes``), text (``abc``), NaN or a negative value is the
    error, naming its key and the fix."""
    for key, value, ok, what, fix, unit in (
        (
            "hydra.launcher.timeout_min",
            timeout_min,
            lambda x: x > 0,
            "each job's deadline must be positive",
            "60",
            "minutes",
        ),
        (
            "hydra.launcher.grace_s",
            grace_s,
            lambda x: 0 <= x < math.inf,
            "must be zero or more seconds",
            "30",
            "seconds",
        ),
    ):
        if isinstance(value, str) and (digits := ascii_digits(value)) is not None:  # float("٣") == 3.0
            first = next(c for c in value if not c.isascii() and c.isdigit())
            return ConfigError(
                key, value, f"is written in another script's digits ({named(first)})", f"set {key}={digits}"
            )
        if isinstance(value, bool):  # true: "must be positive" read as a number's fault
            return ConfigError(key, value, f"is a boolean, not a number of {unit}", f"set {key}={fix}")
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            # a text no float reads: '1,2' (a sweep in the file's text: Hydra sweeps no hydra.* key), abc
            return ConfigError(
                key,
                value,
                f"is one text, not a number of {unit} (one value for every job)",
                f"set {key}={fix}",
            )
        if math.isnan(number) or not ok(number):
            return ConfigError(key, value, what, f"set {key}={fix}")
    return None


def job_need(nproc_per_node: Any, *, device: str, backend: str, nnodes: Any, pool_size: int) -> int:
    """Devices one job takes from the pool: its ``nproc_per_node`` (one device per rank). ``auto``
    takes the whole pool on ``cuda`` (every GPU the job sees), one slot on ``cpu`` or for a backend
    that runs one rank (:func:`flopsweep.plan.resolve_nproc`). A value that is not a positive whole
    number counts 1 here: the job's own validation refuses it, as a record.

    Raises:
        ConfigError: ``nnodes`` over 1 (the pool is one machine).
    """
    if str(nnodes) not in ("1", "None"):
        raise ConfigError(
            "nnodes",
            nnodes,
            "hydra/launcher=pool runs jobs on this machine only",
            "set nnodes=1, or use hydra/launcher=slurm for jobs over several nodes",
        )
    text = str(nproc_per_node).strip()
    if text == "auto":
        from flopsweep.backend_specs import BACKEND_SPECS

        spec = BACKEND_SPECS.get(backend)
        one_rank = spec is not None and spec.max_ranks == 1
        return pool_size if device != "cpu" and not one_rank else 1
    return int(text) if text.isdigit() and int(text) >= 1 else 1


def too_big_problem(needs: Sequence[tuple[int, int]], pool: Sequence[str]) -> str | None:
    """The one-line refusal of a sweep one of whose jobs needs more devices than the pool has
    (``needs``: ``(job number, devices)`` pairs), else None. Said before any job runs."""
    big = [(num, need) for num, need in needs if need > len(pool)]
    if not big:
        return None
    num, need = big[0]
    more = f" (and {len(big) - 1} more)" if len(big) > 1 else ""
    return (
        f"flopsweep: hydra/launcher=pool: job {num}{more} needs {need} devices (nproc_per_node={need}); the "
        f"pool has {len(pool)} ({','.join(pool)}). Fix: give the pool more devices ({SLOTS_KEY}), or "
        f"set nproc_per_node={len(pool)} or fewer"
    )


def next_fit(needs: Sequence[int], free: int) -> int | None:
    """Index of the first waiting job (in sweep order) whose need fits in ``free`` devices, or None.

    First fit: a job that does not fit yet lets a smaller one after it start (the devices would
    idle otherwise); it starts as soon as enough devices are free, and no later job can take its
    place for ever, since the queue only shrinks."""
    return next((i for i, need in enumerate(needs) if need <= free), None)


class Packer:
    """The pool's free devices. :meth:`take` gives a job the lowest free ids (sorted as the pool
    lists them); :meth:`give` returns them. A device is never given to two jobs at once."""

    def __init__(self, devices: Sequence[str]) -> None:
        self.devices = list(devices)
        self.busy: set[str] = set()

    @property
    def free(self) -> int:
        return len(self.devices) - len(self.busy)

    def take(self, need: int) -> list[str] | None:
        """``need`` free devices, now marked busy; None when fewer are free."""
        free = [d for d in self.devices if d not in self.busy]
        if need < 1 or need > len(free):
            return None
        taken = free[:need]
        self.busy.update(taken)
        return taken

    def give(self, devices: Sequence[str]) -> None:
        """Free ``devices`` (each must be busy: a double return is a bug)."""
        for d in devices:
            if d not in self.busy:
                raise ValueError(f"device {d} was not taken")
            self.busy.discard(d)


def simulate(needs: Sequence[int], devices: Sequence[str], ends: Sequence[int]) -> list[list[str]]:
    """The devices each job gets when the jobs end in the order ``ends`` (job indexes): the
    launcher's schedule without processes. Returns each job's devices, by job index."""
    packer, waiting, got = Packer(devices), list(range(len(needs))), [[] for _ in needs]
    running: list[int] = []
    order = list(ends)
    while waiting or running:
        while (i := next_fit([needs[j] for j in waiting], packer.free)) is not None:
            job = waiting.pop(i)
            got[job] = packer.take(needs[job]) or []
            running.append(job)
        done = next(j for j in order if j in running)
        order.remove(done)
        running.remove(done)
        packer.give(got[done])
    return got


def start_line(num: int, devices: Sequence[str], *, running: int, waiting: int) -> str:
    """``flopsweep: pool: job 3 started on device 0 (2 running, 5 waiting)``."""
    word = "device" if len(devices) == 1 else "devices"
    shown = ",".join(devices)
    return f"flopsweep: pool: job {num} started on {word} {shown} ({running} running, {waiting} waiting)"


def end_line(num: int, devices: Sequence[str], how: str, *, running: int, waiting: int) -> str:
    """``flopsweep: pool: job 3 ended (exit 0), device 0 free (1 running, 5 waiting)``."""
    word = "device" if len(devices) == 1 else "devices"
    return (
        f"flopsweep: pool: job {num} ended ({how}), {word} {','.join(devices)} free "
        f"({running} running, {waiting} waiting)"
    )


def visible_devices(environ: Any = None) -> list[str] | None:
    """This job's ``CUDA_VISIBLE_DEVICES`` as a list of ids (``["0", "1"]``), None when unset:
    the record's ``system.visible_devices``."""
    value = (os.environ if environ is None else environ).get(VISIBLE)
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def cpu_pool_problem(
    overrides: Sequence[str], environ: Any = None, detected: Callable[[], int] | None = None
) -> str | None:
    """The line of :func:`pool_devices` for a command line that picks ``hydra/launcher=pool`` with
    neither ``hydra.launcher.slots`` nor ``hydra.launcher.devices`` (and no ``CUDA_VISIBLE_DEVICES``) where
    there is no GPU to pool, before Hydra starts (exit 2, nothing made), else None: ``device=cpu`` always;
    ``device=auto`` (or unset) and ``device=cuda`` when ``detected`` (the GPUs seen:
    ``hydra_plugins.flopsweep_pool.detect_gpus``) counts none and no ``--config-name`` may set them. With a
    ``+sweep`` file, whose slots count, :func:`flopsweep.sweep_file_defaults.pool_problem` says it. Was: the
    same line from the launcher, exit 1 (session 35: still so for ``device=auto``), an empty
    ``multirun/<date>/<time>/`` left."""
    given, raw = {}, {}
    for text in overrides:
        key, eq, value = text.lstrip("+").partition("=")
        if eq and not text.startswith("-"):
            given[key], raw[key] = value.strip().strip("'\""), value
    device = given.get("device", "auto")
    if given.get("hydra/launcher") != "pool" or device not in ("cpu", "auto", "cuda"):
        return None
    visible = (os.environ if environ is None else environ).get(VISIBLE)
    if problem := _given_values_problem(raw, device, visible):
        return problem
    if "hydra.launcher.slots" in given or "hydra.launcher.devices" in given or "sweep" in given:
        return None  # a +sweep file may give the slots: sweep_file_defaults.pool_problem reads it
    if device != "cpu":  # a sweep file or another config may set the device or the slots: the launcher's
        others = "sweep" in given or any(
            a.startswith(("--config-name", "-cn", "--config-dir", "-cd")) for a in overrides
        )
        if detected is None or others or visible not in (None, "") or detected() > 0:
            return None
    try:
        pool_devices(None, device=device, visible=visible, detected=0)
    except ConfigError as exc:
        return str(exc)
    return None


def _given_values_problem(given: dict[str, str], device: str, visible: str | None) -> str | None:
    """The launcher's line for ``hydra.launcher.slots``/``devices`` (read by Hydra's override grammar),
    ``timeout_min`` and ``grace_s`` given on the command line, before Hydra (exit 2; was exit 1 from the
    launcher: a re-trial, session 35); a positive count on a GPU is the launcher's to check."""
    from flopsweep.override_parsing import parsed_or_none

    def read(key: str) -> Any:
        text = given.get(key)  # as typed: a quoted '"0,1"' is text to the grammar, never a sweep
        parsed = parsed_or_none(f"{key}={text}") if text is not None else None
        return parsed.value() if parsed is not None else text

    slots, devices = read("hydra.launcher.slots"), read("hydra.launcher.devices")
    try:
        for key, value in (("hydra.launcher.slots", slots), ("hydra.launcher.devices", devices)):
            if error := text_list_problem(key, value):
                raise error
        if (slots is not None or devices is not None) and not (
            isinstance(slots, int) and slots > 0 and device != "cpu"
        ):
            pool_devices(slots, device=device, visible=visible, detected=None, devices=devices)
        timeout, grace = read("hydra.launcher.timeout_min"), read("hydra.launcher.grace_s")
        if (timeout is not None or grace is not None) and (
            error := settings_problem(60 if timeout is None else timeout, 0 if grace is None else grace)
        ):
            raise error
    except ConfigError as exc:
        return str(exc)
    return None
