"""The default sweeper: Hydra's basic sweeper, with ``repeats=N`` as the outermost sweep axis.

``conf/hydra/sweeper/basic_batched.yaml`` names :class:`RepeatingSweeper` as its ``_target_`` (Hydra
instantiates plugins only from the ``hydra_plugins`` namespace).
Hydra's basic sweeper takes the product of its axes with :func:`itertools.product`, the first axis
outermost (``BasicSweeper.split_arguments``, hydra-core 1.3), and puts ``hydra.sweeper.params``
before the command line's axes. With ``repeats=3`` this sweeper puts ``repeat=0,1,2`` before every
other axis, so the jobs run in rounds, every set-up once per round (A B C A B C): drift of the
machine (clocks, power cap, other tenants) spreads over all set-ups, and each round is a job of its
own (its directory, its record, its Slurm array element, its place in ``resume`` and
``fail_fast``). It writes ``multirun.yaml`` never through a link (:func:`RepeatingSweeper.sweep`).
Torch-free.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from flopsweep.composed_once import check_batch
from flopsweep.files import RecordUnwritable
from flopsweep.hydrafiles import sweep_dir, write_multirun
from flopsweep.safe_folders import foreign_link_refusal
from flopsweep.signals import jobs_starting, raise_held
from flopsweep.text import plural

REPEAT_KEY = "repeat"
"""The config key of a job's round (:attr:`flopsweep.config.RunConfig.repeat`)."""


def repeat_axis(repeats: object) -> list[str]:
    """The sweep override that expands ``repeats`` rounds (``["repeat=range(0,3)"]``), or none when
    ``repeats`` is 1 (or not a valid count: the job's validation refuses it in one line)."""
    if isinstance(repeats, int) and not isinstance(repeats, bool) and repeats > 1:
        return [f"{REPEAT_KEY}=range(0,{repeats})"]
    return []


PROGRESS_BATCH = 50
"""A batch of at least this many jobs gets :func:`composing_line` before Hydra composes their configs."""


def composing_line(jobs: int) -> str:
    """The line before Hydra's check of a batch of ``jobs`` (``validate_batch_is_legal``: it composes each
    job's config, a fraction of a second each, before the first job starts)."""
    return (
        f"flopsweep: composing the config of each of {plural(jobs, 'job')} before the first starts "
        "(Hydra checks them all first; a fraction of a second each)"
    )


def job_folder_line(exc: OSError) -> str:
    """The line for a job folder that Hydra's ``mkdir`` refused (a dangling link, a file, a FIFO
    planted at its name): never followed or replaced."""
    return (
        f"cannot make the job folder {exc.filename}: {exc.strerror} (a link, FIFO or file is there; "
        f"it is never followed or replaced). Fix: remove {exc.filename}, then run again with resume=true"
    )


def no_gpu_line(sweeper: Any, env: Any = None, free: int | None = None) -> str | None:
    """The one line refusing a sweep every job of which is refused for one reason before any starts
    (``device=cuda`` on a machine without a CUDA GPU, session 40's; the launch's free host memory, session
    41's), else None: :func:`hydra_plugins.flopsweep_repeats.once.refusal_line`, whatever the launcher
    whose jobs run here. ``env``: the machine (None: this one); ``free``: its free host memory, bytes
    (None: read now)."""
    from hydra_plugins.flopsweep_repeats.once import refusal_line

    return refusal_line(sweeper, env, free)


def one_rank_line(sweeper: Any) -> str | None:
    """The note before a sweep over distributed backends each of whose jobs runs 1 rank on the CPU
    (:func:`flopsweep.one_rank_sweep.sweep_note` of its batches), where its jobs run here; else None."""
    from flopsweep.one_rank_sweep import sweep_note

    return sweep_note([list(job) for batch in sweeper.overrides for job in batch], sweeper.config)


class RepeatingSweeper(BasicSweeper):
    """Hydra's basic sweeper; ``repeats`` (read from the composed config) adds the outermost axis
    ``repeat`` (:func:`repeat_axis`). Batches, ``max_batch_size`` and the launcher are the basic
    sweeper's."""

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Hydra's check that every job of ``batch`` composes, each config kept for the launcher
        (:func:`flopsweep.composed_once.check_batch`: composed once, not twice)."""
        check_batch(self, batch)

    def _parse_config(self) -> list[str]:
        repeats = self.config.get("repeats", 1) if self.config is not None else 1
        return repeat_axis(repeats) + super()._parse_config()

    def sweep(self, arguments: list[str]) -> Any:
        """Hydra's ``BasicSweeper.sweep`` (hydra-core 1.3), but ``multirun.yaml`` is written by
        :func:`flopsweep.hydrafiles.write_multirun` (a new file renamed into place: a link or FIFO
        planted there is replaced, never written through or opened); one that cannot be written
        stops the sweep with one line, exit 1, before any job. A job folder Hydra cannot make (a
        dangling link or a file planted at its name) stops it with one line too (:func:`job_folder_line`),
        and so does another user's link on the sweep folder's path before each batch
        (:func:`flopsweep.links.foreign_link`: Hydra makes the job folders with a plain ``mkdir``). A
        sweep every job of which is refused for one reason (a GPU where there is none, the free host
        memory) is refused once, exit 2, nothing left (:func:`no_gpu_line`)."""
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        params_conf = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params_conf), self.max_batch_size)
        if line := no_gpu_line(self):  # every job refused for one reason: once, before anything is written
            from hydra_plugins.flopsweep_repeats.once import refused_once

            refused_once(line, self.config.hydra.get("launcher"))  # exit 2, its folders and lock removed
        if note := one_rank_line(self):  # a backends sweep of 1 CPU rank each: said, not refused
            print(note, file=sys.stderr, flush=True)
        try:
            write_multirun(self.config)
        except RecordUnwritable as exc:
            print(f"flopsweep: {exc}. Fix: {exc.fix}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        returns, initial_job_idx = [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            if len(batch) >= PROGRESS_BATCH:  # Hydra composes each job's config before the first starts
                print(composing_line(len(batch)), file=sys.stderr, flush=True)
            self.validate_batch_is_legal(batch)  # composition errors before any job of the batch
            if foreign := foreign_link_refusal(sweep_dir(self.config)):  # planted since the sweep started:
                print(f"flopsweep: {foreign.line}. Fix: {foreign.fix}", file=sys.stderr, flush=True)
                raise SystemExit(1)  # before Hydra's mkdir of the batch's job folders through it
            if not isinstance(self.launcher, BasicLauncher):  # in this process: each job's own start, run.py
                jobs_starting()  # a signal from here on stops the job and records it (flopsweep.signals)
            try:
                results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            except (FileExistsError, NotADirectoryError) as exc:  # Hydra's mkdir of a job's folder
                if not exc.filename:
                    raise
                print(f"flopsweep: {job_folder_line(exc)}", file=sys.stderr, flush=True)
                raise SystemExit(1) from None
            raise_held()  # a Ctrl-C after the batch's last job: now, before a job's error is read
            for r in results:
                _ = r.return_value  # raises the error of a job that failed, as Hydra's sweeper does
            initial_job_idx += len(batch)
            returns.append(results)
        return returns
