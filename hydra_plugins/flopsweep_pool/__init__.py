"""``hydra/launcher=pool``: a sweep's jobs packed onto this machine's devices.

Hydra's basic launcher runs one job at a time; a sweep of one-GPU jobs on an eight-GPU machine left
seven idle. :class:`PoolLauncher` runs as many jobs at once as the pool's devices allow, each pinned
to devices of its own (``CUDA_VISIBLE_DEVICES``), and starts the next job as soon as one ends (first
fit in sweep order, :func:`flopsweep.pool.next_fit`), not in waves. A job of ``nproc_per_node=k``
takes k devices; one that needs more than the pool has refuses the sweep in one line before any job
runs.

Each job runs in a process of its own (:data:`BOOT`, then ``task.main``: Hydra's
``run_job`` is not thread-safe), exactly as Hydra's basic launcher would run it in the sweep process:
the same composed config (``load_sweep_config``, ``hydra.job.num``/``id``), job directory, ``.hydra/``
files, job log and record, so ``resume=true``, ``repeats=``, the sweep summary and the analysis see
a pool sweep as any other. The sweep process keeps what belongs to the sweep: the progress lines,
:class:`flopsweep.callbacks.SweepSummary`'s ``on_job_end`` (run here with the job's result, so that
``fail_fast=true``, a refused record and an unwritable sweep directory stop the sweep as they do under
the basic launcher), and the record of a job whose process ended without a result (killed, or past
``hydra.launcher.timeout_min``), written as the Slurm launchers write a lost job's.

Ctrl-C or SIGTERM stops every running job (each job gets the same signal and records itself as
interrupted by it, then SIGKILL to its process group after ``hydra.launcher.grace_s``) and leaves no
process behind; the jobs' processes also get SIGTERM when the sweep process dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, OmegaConf, open_dict

from flopsweep import pool
from flopsweep.config import ConfigError, typed_form
from flopsweep.shown_overrides import shown
from flopsweep.signals import jobs_starting

log = logging.getLogger("flopsweep")

TASK_MODULE = "hydra_plugins.flopsweep_pool.task"
BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    f"from {TASK_MODULE} import main; sys.exit(main())"
)
"""The job process's first line: the sweep process's own ``sys.path`` (so that it imports the very
code the sweep imported: run.py's folder, not the current one), then :func:`task.main`."""
RESULT_FILE = "result.pkl"
JOB_FILE = "job.pkl"
MAX_RESULT_BYTES = 256 * 2**20
POLL_S = 0.2


def refuse(message: str) -> None:
    """One line on stderr and exit status 2 (a value refused, as the command line's checks refuse: the pool's
    devices, settings and a job too big for it), before any job runs. Was exit 1 for a job too big for the
    pool (session 37), unlike the same launcher's other value refusals (#329)."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


def detect_gpus() -> int:
    """GPUs this process sees: NVML's count (``pynvml``) where installed, else torch's
    (``torch.cuda.device_count()``, which asks NVML first too), else 0. Asked only when
    ``hydra.launcher.slots`` is null and ``CUDA_VISIBLE_DEVICES`` is unset."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML here: ask torch
        pass
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:  # noqa: BLE001 - no torch, no driver: no GPU
        return 0


class PoolJob:
    """One job of the batch: its number, overrides, composed config, need and, once started, its
    devices, process, private folder and deadline. (A plain class: Hydra's plugin scan executes this
    module outside ``sys.modules``, where ``dataclass`` cannot read postponed annotations.)"""

    def __init__(self, num: int, overrides: list[str], config: DictConfig, need: int) -> None:
        self.num, self.overrides, self.config, self.need = num, overrides, config, need
        self.devices: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.folder: Path | None = None
        self.deadline = 0.0
        self.started_at = 0.0
        self.killed: str | None = None


class PoolLauncher(Launcher):
    """See the module docstring. Settings (``conf/hydra/launcher/pool.yaml``): ``slots`` (the pool's
    devices: null to detect the GPUs, a count, or a list of ids), ``devices`` (another name for a
    list of slots), ``timeout_min`` (each job's deadline) and ``grace_s`` (from SIGTERM to SIGKILL)."""

    def __init__(
        self,
        slots: Any = None,
        devices: Any = None,
        timeout_min: float = 60,
        grace_s: float = 30,
        **_: Any,
    ) -> None:
        self.slots = slots
        self.devices = devices
        self.settings = {"timeout_min": timeout_min, "grace_s": grace_s}  # checked in setup, one line each
        self.timeout_min = _number(timeout_min, default=60.0)
        self.grace_s = _number(grace_s, default=30.0)
        self.config: DictConfig | None = None
        self.hydra_context: Any = None
        self.task_function: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        if problem := pool.settings_problem(**self.settings):
            refuse(f"flopsweep: {problem}")
        devices = self.pool_devices()  # a bad pool, and a job too big for it, before the sweep starts
        if problem := pool.too_big_problem([(-1, n) for n in swept_nproc(config)], devices):
            refuse(problem.replace("job -1 ", "a job of this sweep ", 1))

    # -- the pool

    def pool_devices(self) -> list[str]:
        """The pool (:func:`flopsweep.pool.pool_devices`), or the one-line refusal."""
        assert self.config is not None
        device = str(OmegaConf.select(self.config, "device", default="auto"))
        slots = OmegaConf.to_container(self.slots) if OmegaConf.is_config(self.slots) else self.slots
        devices = OmegaConf.to_container(self.devices) if OmegaConf.is_config(self.devices) else self.devices
        visible = os.environ.get(pool.VISIBLE)
        ask = slots is None and devices is None and visible is None and device != "cpu"
        asked_count = (
            isinstance(slots, int) and not isinstance(slots, bool) and visible is None and device != "cpu"
        )
        detected = detect_gpus() if ask or asked_count else None
        try:
            return pool.pool_devices(
                slots, device=device, visible=visible, detected=detected, devices=devices
            )
        except ConfigError as exc:
            refuse(f"flopsweep: {exc}")
            raise  # unreachable: refuse exits

    def _compose(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, size: int
    ) -> list[PoolJob]:
        """Each job's config as Hydra's basic launcher composes it, and its need. Its ``hydra.sweep.dir`` is
        the sweep's, resolved here: the default ``multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}`` read again in
        the job's own process (Hydra's ``now`` resolver caches per process) named a later second, a folder
        that did not exist, and the sweep stopped after its first job."""
        jobs = []
        sweep_dir = str(self.config.hydra.sweep.dir)
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {shown(filter_overrides(overrides))}")  # as typed: tag=${seed}
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(config):
                config.hydra.job.id = idx
                config.hydra.job.num = idx
                config.hydra.sweep.dir = sweep_dir
            try:
                need = pool.job_need(
                    OmegaConf.select(config, "nproc_per_node", default="auto"),
                    device=str(OmegaConf.select(config, "device", default="auto")),
                    backend=str(OmegaConf.select(config, "backend.name", default="")),
                    nnodes=OmegaConf.select(config, "nnodes", default=1),
                    pool_size=size,
                )
            except ConfigError as exc:
                refuse(f"flopsweep: hydra/launcher=pool: job {idx}: {exc}")
            jobs.append(PoolJob(num=idx, overrides=list(overrides), config=config, need=need))
        return jobs

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Run the batch on the pool; returns each job's ``JobReturn`` in sweep order."""
        from flopsweep.job.records import run_ids

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        devices = self.pool_devices()
        log.info(
            f"Launching {len(job_overrides)} jobs on a pool of {len(devices)} devices ({','.join(devices)})"
        )
        jobs = self._compose(job_overrides, initial_job_idx, len(devices))
        if problem := pool.too_big_problem([(j.num, j.need) for j in jobs], devices):
            refuse(problem)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        before = run_ids(Path(os.path.abspath(sweep_dir)))
        jobs_starting()  # a signal from here on stops the tasks and records their jobs
        scratch = Path(tempfile.mkdtemp(prefix="flopsweep-pool-"))  # 0700, this user's
        results: dict[int, JobReturn] = {}
        try:
            self._run(jobs, pool.Packer(devices), scratch, results, before)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return [results[j.num] for j in jobs]

    def _run(
        self,
        jobs: list[PoolJob],
        packer: pool.Packer,
        scratch: Path,
        results: dict[int, JobReturn],
        before: dict[str, str | None],
    ) -> None:
        waiting, running = list(jobs), []
        try:
            while waiting or running:
                while (i := pool.next_fit([j.need for j in waiting], packer.free)) is not None:
                    job = waiting.pop(i)
                    job.devices = packer.take(job.need) or []
                    self._start(job, scratch)
                    running.append(job)
                    print(
                        pool.start_line(job.num, job.devices, running=len(running), waiting=len(waiting)),
                        flush=True,
                    )
                ended = [j for j in running if j.proc is not None and j.proc.poll() is not None]
                for job in running:
                    if job not in ended and time.monotonic() > job.deadline and job.killed is None:
                        job.killed = (
                            f"past its deadline, hydra.launcher.timeout_min={typed_form(self.timeout_min)}"
                        )
                        _signal_group(job.proc, signal.SIGTERM)
                        job.deadline = time.monotonic() + self.grace_s  # then SIGKILL
                    elif job not in ended and job.killed is not None and time.monotonic() > job.deadline:
                        _signal_group(job.proc, signal.SIGKILL)
                if not ended:
                    time.sleep(POLL_S)
                    continue
                for job in ended:
                    running.remove(job)
                    _signal_group(job.proc, signal.SIGKILL)  # anything the job left behind
                    packer.give(job.devices)
                    code = job.proc.returncode if job.proc is not None else None
                    how = f"exit {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
                    how = f"{job.killed}: {how}" if job.killed else how
                    print(
                        pool.end_line(job.num, job.devices, how, running=len(running), waiting=len(waiting)),
                        flush=True,
                    )
                    results[job.num] = self._finish(job, before)
        except BaseException as exc:  # Ctrl-C, SIGTERM (run.py: Terminated), fail_fast's SystemExit
            # Ctrl-C reaches the jobs as Ctrl-C (each records "interrupted by Ctrl-C (SIGINT)", not a
            # scheduler's SIGTERM); anything else as SIGTERM.
            self._stop(
                running, before, signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
            )
            raise

    def _start(self, job: PoolJob, scratch: Path) -> None:
        """Start the job's process, pinned to ``job.devices``, in a session of its own (so a signal
        reaches its whole process group, ranks included)."""
        import cloudpickle

        job.folder = Path(tempfile.mkdtemp(prefix=f"job{job.num}-", dir=scratch))
        payload = cloudpickle.dumps(
            {
                "singleton_state": Singleton.get_state(),
                "hydra_context": self.hydra_context,
                "task_function": self.task_function,
                "config": job.config,
                "result": str(job.folder / RESULT_FILE),
            }
        )
        job_file = job.folder / JOB_FILE  # a new file in this user's 0700 folder, never through a link
        fd = os.open(job_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        # PYTHONSAFEPATH: the current folder is never on the job's path (BOOT sets the sweep's)
        env = {**os.environ, pool.VISIBLE: ",".join(job.devices), "PYTHONSAFEPATH": "1"}
        env["FLOPSWEEP_PARENT_PID"] = str(os.getpid())  # task.die_with_parent: the parent it checks
        job.proc = subprocess.Popen(  # noqa: S603 - this interpreter, a module of this package
            [sys.executable, "-c", BOOT, json.dumps(sys.path), str(job_file)],
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        job.started_at = time.time()
        job.deadline = time.monotonic() + self.timeout_min * 60

    def _finish(self, job: PoolJob, before: dict[str, str | None]) -> JobReturn:
        """The job's ``JobReturn`` (its process's, or a lost job's record written here), after the
        sweep's own ``on_job_end`` (:class:`flopsweep.callbacks.SweepSummary`)."""
        assert job.folder is not None
        result = _read_result(job.folder / RESULT_FILE)
        if result is None:
            code = job.proc.returncode if job.proc is not None else None
            why = job.killed or (
                f"its process ended without a result (exit status {code})"
                if code is not None and code >= 0
                else f"its process was killed by signal {-(code or 0)}"
            )
            return self._record_lost(
                job, f"hydra/launcher=pool: job {job.num} on devices {','.join(job.devices)}: {why}", before
            )
        for callback in _summaries(self.hydra_context):
            callback.on_job_end(config=result.hydra_cfg, job_return=result)
        return result

    def _record_lost(self, job: PoolJob, why: str, before: dict[str, str | None]) -> JobReturn:
        """Write (or find) the record of a job whose process gave no result, through Hydra's
        ``run_job`` in this process, as the Slurm launchers do (``lost_task``): same job directory,
        ``.hydra/`` files and callbacks."""
        from hydra_plugins.flopsweep_slurm import lost_task

        task = functools.partial(lost_task, message=why, submitted_at=job.started_at, before=before)
        with _visible(job.devices):
            return run_job(
                hydra_context=self.hydra_context,
                task_function=task,
                config=job.config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
                configure_logging=False,
            )

    def _stop(
        self, running: list[PoolJob], before: dict[str, str | None] | None = None, sig: int = signal.SIGTERM
    ) -> None:
        """Stop every running job: ``sig`` (SIGTERM, or SIGINT for the sweep's Ctrl-C) to each process group
        (the job records itself as interrupted by it and stops its ranks), SIGKILL after ``grace_s`` to
        what is left; then wait, and
        name the last record a stopped job wrote (``flopsweep.job.records.LAST_RECORD``: run.py's
        ``interrupted`` line names it, as it does for a job of the basic launcher)."""
        if not running:
            return
        print(f"flopsweep: pool: stopping {len(running)} running job(s)", file=sys.stderr, flush=True)
        for job in running:
            _signal_group(job.proc, sig)
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline and any(
            j.proc is not None and j.proc.poll() is None for j in running
        ):
            time.sleep(POLL_S)
        for job in running:
            _signal_group(job.proc, signal.SIGKILL)
            if job.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    job.proc.wait(timeout=10)
        _note_records(running, before or {})


def _note_records(stopped: list[PoolJob], before: dict[str, str | None]) -> None:
    """Set ``flopsweep.job.records.LAST_RECORD`` to the newest record that a stopped job's process wrote in
    its job directory (one whose run id differs from the one there before the batch), so that the
    sweep's last line says a record was kept instead of ``no run had been recorded yet``."""
    from flopsweep.job.records import LAST_RECORD
    from flopsweep.safe_read import RecordError, read_json

    for job in stopped:
        try:
            folder = Path(os.path.abspath(str(job.config.hydra.sweep.dir))) / str(
                job.config.hydra.sweep.subdir
            )
        except Exception:  # noqa: BLE001 - an unresolvable folder: no record to name
            continue
        path = folder / "metrics.json"
        try:
            record = read_json(path)
            status, run_id = record["status"], record["run"]["id"]
        except (RecordError, OSError, ValueError, KeyError, TypeError):
            continue
        if run_id != before.get(str(path)):
            LAST_RECORD.update(path=str(path), status=status)


def _number(value: Any, *, default: float) -> float:
    """``value`` as a float, or ``default`` when it is none (:func:`flopsweep.pool.settings_problem`
    refuses it in ``setup``, in one line, before any job runs)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return default


def swept_nproc(config: DictConfig) -> list[int]:
    """The whole-number values that the sweep gives ``nproc_per_node`` (its command line and
    ``hydra.sweeper.params``, the command line last, as :func:`flopsweep.callbacks.sweep_size` reads
    them), so that a job too big for the pool is refused before the first batch runs (a sweep under
    ``fail_fast`` comes one job per batch). Empty when it cannot be told; each batch checks its own
    jobs again (:func:`flopsweep.pool.too_big_problem`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        params = dict(config.hydra.sweeper.get("params") or {})
        lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
        by_key = {o.key_or_group: o for o in OverridesParser.create().parse_overrides(lines)}
        found = by_key.get("nproc_per_node")
        if found is None:
            return []
        values = list(found.sweep_string_iterator()) if found.is_sweep_override() else [found.value()]
    except Exception:  # noqa: BLE001 - only an early check; the batch's own check follows
        return []
    return [int(v) for v in map(str, values) if v.strip().isdigit()]


def _signal_group(proc: subprocess.Popen | None, sig: int) -> None:
    """Send ``sig`` to the process group of ``proc`` (its session: the job and its ranks)."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextlib.contextmanager
def _visible(devices: list[str]) -> Any:
    """``CUDA_VISIBLE_DEVICES`` of the job set in this process while its lost record is written
    (``system.visible_devices``)."""
    old = os.environ.get(pool.VISIBLE)
    os.environ[pool.VISIBLE] = ",".join(devices)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(pool.VISIBLE, None)
        else:
            os.environ[pool.VISIBLE] = old


def _summaries(hydra_context: Any) -> list[Any]:
    from flopsweep.callbacks import SweepSummary

    return [c for c in getattr(hydra_context.callbacks, "callbacks", []) if isinstance(c, SweepSummary)]


def _read_result(path: Path) -> JobReturn | None:
    """The pickled ``JobReturn`` the job's process wrote into the private folder, or None."""
    from flopsweep.safe_read import RecordError, read_regular

    try:
        result = pickle.loads(read_regular(path, MAX_RESULT_BYTES))  # noqa: S301 - our own 0700 folder
    except (RecordError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return result if isinstance(result, JobReturn) else None
