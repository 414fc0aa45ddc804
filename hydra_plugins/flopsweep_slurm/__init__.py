"""Hydra launcher plugins for ``hydra/launcher=slurm`` and ``slurm_local``.

They are hydra-submitit-launcher's ``SlurmLauncher`` and ``LocalLauncher`` with two changes:

- ``setup`` checks the launcher settings against the run and, for Slurm, against the cluster
  (``sinfo``), before the sweep directory exists and before anything is submitted (a Hydra callback
  cannot stop a multirun: Hydra turns its exceptions into warnings). Each refusal is one line.
- ``launch`` submits through submitit as hydra-submitit-launcher does, but waits with
  :class:`flopsweep.cluster.JobWatch` instead of ``job.results()``: it shows each job's state as it
  changes, and a job that ends without a result (``scancel``, also while pending; a failed or timed
  out job) gets an ``error`` record written by the sweep process, and the sweep goes on. submitit's
  own wait asks ``sacct`` only, so without accounting it would wait for ever.

The resolvers that conf/hydra/launcher/slurm.yaml uses are registered here, at plugin discovery,
like hydra-submitit-launcher registers its configs. Hydra discovers plugins in the
``hydra_plugins`` namespace package; a submitit task finds this one again when it rebuilds the
Hydra state (it starts in the directory the sweep was submitted from).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, filter_overrides, run_job
from hydra.plugins.search_path_plugin import SearchPathPlugin
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
    BaseSubmititLauncher,
    LocalLauncher,
    SlurmLauncher,
)
from omegaconf import DictConfig, OmegaConf, open_dict

from flopsweep import cluster, slurm
from flopsweep.config import ConfigError
from flopsweep.files import RecordUnwritable
from flopsweep.hydrafiles import submitit_folder
from flopsweep.hydrafiles import sweep_dir as sweep_dir_of
from flopsweep.shown_overrides import shown
from flopsweep.signals import jobs_starting
from flopsweep.text import figure


def register_resolvers() -> None:
    """The resolvers of the launcher configs; again at every config search path set-up
    (:class:`FlopsweepSearchPath`), since a restored Hydra state (a test's, a task's) may drop them."""
    OmegaConf.register_new_resolver("flopsweep_tasks", slurm.tasks_per_node, replace=True)
    OmegaConf.register_new_resolver("flopsweep_gpus", slurm.gpus_per_node, replace=True)
    OmegaConf.register_new_resolver("flopsweep_mem_gb", slurm.mem_gb, replace=True)
    OmegaConf.register_new_resolver("flopsweep_cpus", slurm.cpus_per_task, replace=True)


register_resolvers()

log = logging.getLogger("flopsweep")


ConfigStore.instance().store(
    group="hydra/launcher", name="flopsweep_local_base", node=slurm.LocalConf, provider="flopsweep"
)


class FlopsweepSearchPath(SearchPathPlugin):
    """Puts the launchers' configs (``hydra/launcher/slurm.yaml``, ``slurm_local.yaml`` of the
    installed package) on every app's config search path, so that they work from any directory
    and in any Hydra app that has the launcher's keys (``LAUNCHER_KEYS``)."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        register_resolvers()
        search_path.append(provider="flopsweep", path="pkg://hydra_plugins.flopsweep_slurm.conf")


def refuse(message: str, code: int = 1) -> NoReturn:
    """Stop the sweep before anything is submitted, with one line on stderr, ``flopsweep: `` first, and exit
    status ``code`` (1; 2 where this machine has no Slurm client: :class:`flopsweep.cluster.ClusterError`'s
    ``code``): a launcher setting that contradicts the run or the cluster, or a cluster that cannot be
    asked. (A Hydra error would add a line about HYDRA_FULL_ERROR and a stack trace that says nothing
    more; the line lacked ``flopsweep: ``, as no other of the sweep's lines does.)"""
    print(f"flopsweep: {message.removeprefix('flopsweep: ')}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def swept_keys(config: DictConfig) -> set[str]:
    """Keys that the multirun varies: sweep overrides on the command line and ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.sweeper.get("params") or {}
    lines = list(config.hydra.overrides.task) + [f"{key}={value}" for key, value in params.items()]
    return {o.key_or_group for o in OverridesParser.create().parse_overrides(lines) if o.is_sweep_override()}


LAUNCHER_KEYS = ("nproc_per_node", "nnodes", "device")
"""The app config keys that the launchers shape each job by (flopsweep's conf/config.yaml has them)."""


def check_config(config: DictConfig, *, local: bool) -> None:
    """Check ``config.hydra.launcher`` against the run (:func:`flopsweep.slurm.check_sweep`,
    :func:`flopsweep.slurm.check_launcher`) and, unless ``local``, against the cluster's nodes
    (:func:`flopsweep.cluster.check_request` on ``sinfo``).

    On a problem it exits (:func:`refuse`) with the message of the ConfigError (key, value, fix),
    or of the ClusterError (no Slurm client, no controller reachable).
    """
    missing = [key for key in LAUNCHER_KEYS if OmegaConf.select(config, key, default=None) is None]
    if missing:
        refuse(
            f"hydra/launcher={'slurm_local' if local else 'slurm'}: the app config has no "
            f"{', '.join(missing)}: these launchers shape each job by nproc_per_node, nnodes and device. "
            "Fix: add them to the app config (flopsweep's conf/config.yaml has them), e.g. "
            "+nproc_per_node=1 +nnodes=1 +device=cpu, or use hydra/launcher=submitit_local"
        )
    try:
        slurm.check_sweep(nproc_per_node=str(config.nproc_per_node), swept=swept_keys(config))
        launcher = OmegaConf.to_container(config.hydra.launcher, resolve=True)
        slurm.check_launcher(
            launcher,
            nproc_per_node=int(config.nproc_per_node),
            nnodes=int(config.nnodes),
            device=str(config.device),
            local=local,
        )
        if local:
            check_parallel(launcher, device=str(config.device))
        else:
            cluster.check_request(launcher, cluster.read_sinfo())
    except (ConfigError, cluster.ClusterError) as exc:
        refuse(str(exc), getattr(exc, "code", 1))


def check_parallel(launcher: dict[str, Any], *, device: str, visible_gpus: int | None = None) -> None:
    """Refuse ``hydra.launcher.parallel_jobs`` other than 1 unless each running job can have GPUs of
    its own: ``device=cuda`` and ``parallel_jobs x gpus_per_node`` GPUs visible here.

    Raises:
        ConfigError: naming ``hydra.launcher.parallel_jobs``, its value and the fix.
    """
    parallel = launcher.get("parallel_jobs", 1)
    if not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1:
        raise ConfigError("hydra.launcher.parallel_jobs", parallel, "it is not a whole number >= 1", "set 1")
    if parallel == 1:
        return
    gpus = launcher.get("gpus_per_node") or 0
    if device != "cuda" or not gpus:
        raise ConfigError(
            "hydra.launcher.parallel_jobs",
            parallel,
            f"device={device} jobs that run at once share this machine's cores, and their timings "
            "contaminate each other",
            "set hydra.launcher.parallel_jobs=1 (the default), or device=cuda (each job on GPUs of its own)",
        )
    if visible_gpus is None:
        import torch

        visible_gpus = torch.cuda.device_count()
    if parallel * gpus > visible_gpus:
        raise ConfigError(
            "hydra.launcher.parallel_jobs",
            parallel,
            f"{parallel} jobs of {gpus} GPUs each need {parallel * gpus} GPUs; {visible_gpus} are visible",
            f"set hydra.launcher.parallel_jobs={max(1, visible_gpus // gpus)}",
        )


ENDED_WAIT_S = 30.0
"""How long the sweep asks Slurm again for the final state of a job whose task 0 gave its result while
the job was still ``RUNNING`` or ``COMPLETING`` (a node agent returns at once on SIGTERM; Slurm names
the end, e.g. ``NODE_FAIL``, a moment later)."""


def _still_ending(state: str | None) -> bool:
    """True for a state that is not yet the job's end (``RUNNING``, ``COMPLETING``)."""
    return (state or "").upper().split(" ")[0].rstrip("+") in ("RUNNING", "COMPLETING")


class WatchingLauncher(BaseSubmititLauncher):
    """``launch`` that waits with :class:`flopsweep.cluster.JobWatch` (see the module docstring)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs in waves of :meth:`_wave` jobs (Slurm: all at once, as one array) and
        wait for each wave before the next."""
        from flopsweep.job.records import run_ids

        sweep_dir = sweep_dir_of(self.config)
        before = run_ids(sweep_dir)  # none: not a folder yet
        submitted_at = time.time()
        returns: list[JobReturn] = []
        size = max(1, self._wave(len(job_overrides)))
        jobs_starting()  # a signal from here on cancels what was submitted and records the jobs
        for start in range(0, len(job_overrides), size):
            wave = job_overrides[start : start + size]
            returns += self._launch_wave(wave, initial_job_idx + start, submitted_at, before)
        return returns

    def _launch_wave(
        self,
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        submitted_at: float,
        before: dict[str, str | None],
    ) -> list[JobReturn]:
        jobs = self._submit(job_overrides, initial_job_idx)
        nums = range(initial_job_idx, initial_job_idx + len(jobs))
        watch = cluster.JobWatch(
            zip(nums, jobs, strict=True), self._states(jobs), finished=self._finished, cancel=self._cancel
        )
        returns = []
        watched_jobs = watch.wait()
        self._note_slurm_ends(watched_jobs)
        for watched, overrides in zip(watched_jobs, job_overrides, strict=True):
            if watched.outcome != "lost":
                returns.append(watched.job.task(0).result())
                continue
            why = f"{self._EXECUTOR} {cluster.lost_message(watched)}"
            returns.append(self._record_lost(overrides, watched, why, submitted_at, before))
        return returns

    def _wave(self, count: int) -> int:
        return count

    def _note_slurm_ends(self, watched_jobs: Sequence[cluster.Watched]) -> None:
        """Add to each ``error`` record a task wrote the end Slurm gave its job
        (:func:`flopsweep.cluster.ended_record`: ``NODE_FAIL`` becomes ``NodeFailed``): the ranks
        saw only SIGTERM. Slurm is asked once more for the jobs that gave a result (squeue keeps a
        finished job for ``MinJobAge``); a state it does not give leaves the record as it is."""
        from flopsweep.files import atomic_write_json
        from flopsweep.safe_read import read_json

        done = [w for w in watched_jobs if w.outcome in ("result", "partial")]
        if not done:
            return
        ask = self._states([w.job for w in done])
        states = ask([w.job.job_id for w in done]) or {}
        end = time.monotonic() + ENDED_WAIT_S
        while any(_still_ending(states.get(w.job.job_id)) for w in done) and time.monotonic() < end:
            time.sleep(1.0)  # a task gave its result while Slurm still ends the job (another node failed)
            states = ask([w.job.job_id for w in done]) or states
        for w in done:
            state = states.get(w.job.job_id) or w.state
            try:
                job_return = w.job.task(0).result()
                path = Path(str(job_return.hydra_cfg.hydra.runtime.output_dir)) / "metrics.json"
                record = read_json(path)
            except Exception:  # noqa: BLE001 - no result or no readable record: nothing to add to
                continue
            if (amended := cluster.ended_record(record, w.job.job_id, state)) is not None:
                try:
                    atomic_write_json(path, amended)
                except RecordUnwritable as exc:
                    log.warning("flopsweep: %s: the record keeps SIGTERM as its cause", exc)
                    continue
                print(f"flopsweep: {w.label}: {amended['error']['message']}", file=sys.stderr, flush=True)

    def _finished(self, watched: cluster.Watched) -> None:
        """The sweep's progress line for a job that gave its result, printed here in the sweep
        process as the job ends (:meth:`flopsweep.callbacks.SweepSummary.job_done`: the callback's
        own ``on_job_end`` ran in the task, out of sight). A lost job gets its line when its record
        is written (:meth:`_record_lost` runs the callbacks here)."""
        from flopsweep.callbacks import SweepSummary

        try:
            job_return = watched.job.task(0).result()
            job_dir = Path(str(job_return.hydra_cfg.hydra.runtime.output_dir))
        except Exception:  # noqa: BLE001 - the line without a status; the wait reports the failure
            job_dir = None
        for callback in getattr(self.hydra_context.callbacks, "callbacks", []):
            if isinstance(callback, SweepSummary):
                callback.job_done(job_dir, num=watched.num, elsewhere=True)

    def _states(self, jobs: Sequence[Any]) -> Any:
        return cluster.SlurmStates()

    @staticmethod
    def _cancel(job: Any) -> str | None:
        return cluster.scancel(job.job_id)

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        """Submit the jobs as hydra-submitit-launcher 1.2's ``BaseSubmititLauncher.launch`` does
        (one ``map_array``), and return submitit's jobs without waiting for them."""
        import submitit

        params = dict(self.params)
        parallel = params.pop("parallel_jobs", 1)
        if self._EXECUTOR == "slurm":  # a requeued job would measure again, over its record
            params["additional_parameters"] = cluster.no_requeue(params.get("additional_parameters"))
        try:  # private (0700), never a planted link: made only now, after the refusals
            submitit_folder(self.config.hydra.launcher)
        except RecordUnwritable as exc:
            refuse(f"{exc}. Fix: {exc.fix}")
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in params.items()}
        )
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {self.config.hydra.sweep.dir}")
        sweep_dir = sweep_dir_of(self.config)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        job_params = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {shown(filter_overrides(overrides))}")  # as typed: tag=${seed}
            job_params.append(
                (list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", _singleton_state())
            )
        if self._EXECUTOR == "local" and parallel > 1 and params.get("gpus_per_node"):
            return _submit_on_disjoint_gpus(executor, self, job_params, int(params["gpus_per_node"]))
        timeout_s = cluster.command_timeout(cluster.SUBMIT_TIMEOUT_S)
        try:
            with _sbatch_deadline(timeout_s):
                return executor.map_array(self, *zip(*job_params, strict=True))
        except submitit.core.utils.FailedJobError as exc:
            why = (str(exc).strip().splitlines() or ["no message"])[-1]
            code = getattr(exc.__cause__, "returncode", None)
            if code in (124, 137, -9):  # timeout(1)'s codes: SIGTERM sent, or SIGKILL after it
                why = (
                    f"sbatch did not answer within {figure(timeout_s, 6)} s and was stopped "
                    f"({cluster.TIMEOUT_ENV} sets the limit)"
                )
            refuse(
                f"{self._EXECUTOR}: submitting the sweep failed: {why}. Fix: check hydra.launcher.partition, "
                "account, qos and additional_parameters against the cluster, and that its controller answers"
            )

    def _record_lost(
        self,
        overrides: Sequence[str],
        watched: cluster.Watched,
        why: str,
        submitted_at: float,
        before: dict[str, str | None],
    ) -> JobReturn:
        """Write (or find) the record of a job that gave no result, in the sweep process, through
        Hydra's ``run_job`` as the task would: same job directory, ``.hydra/`` files (written by
        :func:`lost_task`) and callbacks."""
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config.hydra.job):
            config.hydra.job.id = watched.job.job_id
            config.hydra.job.num = watched.num
        task = functools.partial(lost_task, message=why, submitted_at=submitted_at, before=before)
        return run_job(
            hydra_context=self.hydra_context,
            task_function=task,
            config=config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
            configure_logging=False,
        )


@contextlib.contextmanager
def _sbatch_deadline(timeout_s: float) -> Any:
    """Give submitit's ``sbatch`` call a deadline while the sweep submits: submitit runs it without
    one, so a controller that never answers would hang the sweep for ever. The command becomes
    ``timeout --kill-after=5 T sbatch FILE`` (coreutils), which stops it and its process group."""
    from submitit.slurm.slurm import SlurmExecutor

    original = SlurmExecutor._make_submission_command
    if shutil.which("timeout") is None:
        log.warning("flopsweep: no timeout command on PATH: sbatch runs without a deadline")
        yield
        return

    def bounded(executor: Any, path: Path) -> list[str]:
        return ["timeout", "--kill-after=5", f"{timeout_s:g}", *original(executor, path)]

    SlurmExecutor._make_submission_command = bounded
    try:
        yield
    finally:
        SlurmExecutor._make_submission_command = original


def _submit_on_disjoint_gpus(executor: Any, task: Any, job_params: list[tuple], gpus: int) -> list[Any]:
    """Start each job of a wave of submitit_local jobs on GPUs of its own (``visible_gpus``)."""
    jobs = []
    for slot, params in enumerate(job_params):
        executor.update_parameters(visible_gpus=list(range(slot * gpus, (slot + 1) * gpus)))
        jobs += executor.map_array(task, *([value] for value in params))
    return jobs


def lost_task(cfg: DictConfig, *, message: str, submitted_at: float, before: dict[str, str | None]) -> float:
    """The task function for a lost job, run through Hydra's ``run_job`` in the sweep process by
    :meth:`WatchingLauncher._record_lost` and the pool launcher (bind the keywords with
    ``functools.partial``): the job's ``.hydra/`` files, its record
    (:func:`flopsweep.job.records.record_lost_job`: an ``error`` of type ``JobLost`` saying
    ``message``, or the record the job wrote itself, found by a run id other than ``before``'s, from
    :func:`flopsweep.job.records.run_ids`), its failure line on stderr, and, under
    ``fail_fast=true``, the stop of the sweep, as ``run.py``'s task would.

    Args:
        submitted_at: when the job was submitted, seconds since the epoch (``run.started_at``).

    Returns:
        The job's objective as ``run.py`` gives it (NaN unless a task's ``ok`` record was found).

    Raises:
        SweepStopped: the record is not ``ok`` and ``fail_fast`` is true.
    """
    from flopsweep import objective
    from flopsweep.callbacks import SweepStopped
    from flopsweep.files import RecordUnwritable
    from flopsweep.hydrafiles import hydra_files, write_hydra_files
    from flopsweep.job.records import failure_line, record_lost_job
    from flopsweep.job.result import JobInfo

    hc = HydraConfig.get()
    run_cfg = OmegaConf.to_object(cfg)
    info = JobInfo(
        job_dir=hc.runtime.output_dir,
        overrides=list(hc.overrides.task),
        job_num=hc.job.num,
        choices={k: str(v) for k, v in hc.runtime.choices.items() if v is not None},
    )
    try:  # the job's .hydra/ as a task writes it (hydra.output_subdir is null: Hydra writes none)
        write_hydra_files(Path(info.job_dir), hydra_files(cfg, HydraConfig.instance().cfg, hc.overrides.task))
    except RecordUnwritable as exc:
        print(f"flopsweep: {exc}. Fix: {exc.fix}", file=sys.stderr, flush=True)
    previous = before.get(str(Path(info.job_dir) / "metrics.json"))
    record = record_lost_job(run_cfg, info, message, submitted_at=submitted_at, previous_run_id=previous)
    status = record["status"]
    if status != "ok":  # the sweep's console names the cause, as a task's own log would
        print(
            f"flopsweep: {failure_line(record, Path(info.job_dir) / 'metrics.json')}",
            file=sys.stderr,
            flush=True,
        )
    if status != "ok" and run_cfg.fail_fast:
        raise SweepStopped(
            f"flopsweep: {status}: {message} [recorded in {info.job_dir}]; fail_fast=true stopped the sweep"
        )
    return objective.value(record, run_cfg.objective)


def _singleton_state() -> Any:
    from hydra.core.singleton import Singleton

    return Singleton.get_state()


class FlopsweepSlurmLauncher(WatchingLauncher, SlurmLauncher):
    """submitit_slurm that checks its settings against the run and the cluster before submitting,
    and never waits for ever on a job that ended without a result."""

    def setup(self, *, config: DictConfig, **kwargs: Any) -> None:
        check_config(config, local=False)
        super().setup(config=config, **kwargs)


class FlopsweepLocalLauncher(WatchingLauncher, LocalLauncher):
    """submitit_local that checks its settings against the run before starting any task."""

    def setup(self, *, config: DictConfig, **kwargs: Any) -> None:
        check_config(config, local=True)
        super().setup(config=config, **kwargs)

    def _states(self, jobs: Sequence[Any]) -> Any:
        return cluster.local_states({job.job_id: job for job in jobs})

    def _wave(self, count: int) -> int:
        """One job at a time unless ``hydra.launcher.parallel_jobs`` asks for more (``slurm.LocalConf``)."""
        return int(self.params.get("parallel_jobs", 1))

    @staticmethod
    def _cancel(job: Any) -> str | None:
        job.cancel(check=False)
        return None
