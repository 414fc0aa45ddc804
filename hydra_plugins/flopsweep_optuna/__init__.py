"""``hydra/sweeper=optuna_objective``: hydra-optuna-sweeper, where a job's NaN objective (a run that is not
``ok``) fails its trial instead of the study.

The released plugin (1.3; ``pyproject.toml`` asks for it: 1.2.0 raised the failed cast below and ended
the study at the first trial that was not ok) tells Optuna a NaN value as ``COMPLETE``, which Optuna
refuses, then tells ``FAIL`` with the same values, which Optuna refuses too, and the sweep stops with a
traceback (facebookresearch/hydra#2237, fixed upstream after 1.3.0 by passing no values with ``FAIL``). Here
the sweeper's launcher hands the sweeper a NaN objective as a value that cannot be cast to float:
the plugin then tells ``FAIL`` with no values, logs ``Failed experiment``, and goes on to the next
trial. The job's record and the callbacks see the run as it was.

Hydra takes sweepers only from the ``hydra_plugins`` package and imports every module there at
start-up; without hydra-optuna-sweeper (the ``optuna`` extra) this module defines no sweeper.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper as _PluginSweeper
except ImportError:  # the optuna extra is not installed
    _PluginSweeper = None


class NotOk:
    """A trial's objective when its run was not ``ok`` (the job returned NaN): ``float()`` of it
    raises ValueError, which the plugin turns into a ``FAIL`` trial."""

    def __float__(self) -> float:
        raise ValueError("the run is not ok (its objective is NaN): trial failed, the study goes on")

    def __repr__(self) -> str:
        return "nan (the run is not ok)"


class _NaNFailsTrial:
    """The sweeper's launcher, with each NaN return value replaced by :class:`NotOk`."""

    def __init__(self, launcher: Any) -> None:
        self._launcher = launcher

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        returns = self._launcher.launch(job_overrides, initial_job_idx)
        for ret in returns:
            value = ret._return_value if ret.status == JobStatus.COMPLETED else None
            if isinstance(value, float) and math.isnan(value):
                ret.return_value = NotOk()
        return returns

    def __getattr__(self, name: str) -> Any:
        return getattr(self._launcher, name)


if _PluginSweeper is not None:

    class OptunaSweeper(_PluginSweeper):
        """hydra-optuna-sweeper's sweeper; a NaN objective fails its trial, not the study."""

        def setup(self, *args: Any, **kwargs: Any) -> None:
            super().setup(*args, **kwargs)
            self.sweeper.launcher = _NaNFailsTrial(self.sweeper.launcher)

        def sweep(self, arguments: list[str]) -> None:
            """The plugin's study; one that ends with no completed trial (every run not ok, or
            ``plan=true``, whose jobs measure nothing) says so in one line instead of Optuna's
            ``ValueError: No trials are completed yet`` traceback, and the sweep ends normally
            (its records are written and its summary printed). A study every trial of which is refused
            for one reason (``device=cuda`` without a GPU here, the free host memory) is refused once, exit
            2, before its first trial (:func:`_refused_once`). ``optimization_results.yaml`` is
            written as a new file renamed into place (:func:`flopsweep.hydrafiles.saved_safely`): a
            link or FIFO planted there is replaced, never written through."""
            from hydra_plugins.hydra_optuna_sweeper import _impl

            from flopsweep.files import RecordUnwritable
            from flopsweep.hydrafiles import saved_safely

            _refused_once(self.sweeper, arguments)  # every trial refused for one reason: once, exit 2
            try:
                with saved_safely(_impl):  # optimization_results.yaml: never through a link
                    return super().sweep(arguments)
            except RecordUnwritable as exc:
                print(f"flopsweep: {exc}. Fix: {exc.fix}", file=sys.stderr)
                raise SystemExit(1) from None
            except ValueError as exc:
                if "No trials are completed" not in str(exc):
                    raise
                print(
                    "flopsweep: the Optuna study has no completed trial (no run was ok, or plan=true "
                    "measured none), so it has no best value",
                    file=sys.stderr,
                )
                return None


def _refused_once(impl: Any, arguments: list[str]) -> None:
    """Refuse, before its first trial, a study every trial of which is refused for one reason, in one line,
    exit 2, else say the default sweeper's note on a study of distributed backends each on 1 CPU rank
    (:func:`flopsweep.one_rank_sweep.sweep_note`) (``hydra_plugins.flopsweep_repeats.once``, the default
    sweeper's check over the study's space:
    :func:`~hydra_plugins.flopsweep_repeats.once.study_jobs`, ``hydra.sweeper.n_trials`` of them). Was:
    each trial refused in its own line (``device='cuda': no CUDA GPU is visible ...``), the study going on.
    ``impl``: the plugin's sweeper (its ``config``, ``hydra_context``, ``params`` and ``n_trials``)."""
    from hydra_plugins.flopsweep_repeats.once import jobs_refusal_line, refused_once, study_jobs, trial_names

    params = [f"{k!s}={v}" for k, v in (impl.params or {}).items()] + list(arguments)
    jobs, complete = study_jobs(params)
    line = jobs_refusal_line(
        impl,
        jobs,
        total=int(impl.n_trials),
        units=("study", "trial"),
        complete=complete,
        names=trial_names(jobs),
    )
    if line is not None:
        refused_once(line, impl.config.hydra.get("launcher"))
    from flopsweep.one_rank_sweep import sweep_note

    if note := sweep_note(jobs, impl.config):  # backends on 1 CPU rank each: said, not refused (#970)
        print(note, file=sys.stderr, flush=True)
