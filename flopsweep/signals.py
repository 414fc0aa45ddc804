"""Signal deferral around a write that must finish: a record is written whole or not at all (and around a
parse that must not see the interrupt: pandas' of ``plan.csv``); before the first job of a run or sweep
starts, SIGINT and SIGTERM that end the process (:func:`stop_before_jobs`); between two jobs a sweep runs in
its own process, the signal held until the next job starts or the sweep ends (:func:`between_jobs`).

Torch-free and imports nothing of flopsweep (:func:`flopsweep.files.atomic_write_json` uses it).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM (Ctrl-C, a scheduler's preemption) until the block is done.

    A record being written is finished first; the signal is then raised again, and the
    handler that was in place runs. (Masking with ``pthread_sigmask`` is not enough: the
    signal may land on another thread, and CPython runs the handler on the main thread
    anyway.) Yields the signal numbers held so far, in arrival order (the block may look: a
    stop that must finish can finish sooner, :func:`flopsweep.launch.stop_all`). Only the main
    thread can set handlers; elsewhere this holds nothing and yields an empty list.
    """
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    except ValueError:  # not the main thread
        yield pending
        return
    try:
        yield pending
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


STOP_LINE = "flopsweep: stopped by {name} before any job started; nothing was recorded\n"
"""The line :func:`stop_before_jobs` writes (``{name}``: ``SIGTERM``, ``SIGINT``)."""
ANALYSIS_LINE = "flopsweep-analysis: interrupted ({name}); nothing more is written\n"
"""The analysis's line for a signal (``{name}``: ``SIGINT``, ``SIGTERM`` as it starts,
:func:`stop_as_it_starts`; ``Ctrl-C`` once it runs, :func:`analysis.cli.entry`)."""

_JOB_HANDLERS: dict[int, object] = {}
"""The handlers :func:`jobs_starting` puts in place (while :func:`stop_before_jobs` is installed)."""
_CLEANUP: list[Callable[[], object]] = []
"""What :func:`_stop` runs before it exits (:func:`stop_before_jobs`'s ``cleanup``)."""
_HELD: list[int] = []
"""The signals :func:`between_jobs` held; :func:`jobs_starting` or :func:`jobs_done` raises them."""
_LINE: list[str] = [STOP_LINE]
"""The line :func:`_stop` writes: :data:`STOP_LINE`, or the one :func:`stop_as_it_starts` was given."""


def _stop(signum: int, frame: object) -> None:
    """SIGINT or SIGTERM before the first job: the cleanup (:func:`stop_before_jobs`; an exception in it
    ignored), the line on file descriptor 2 (``os.write``: no Python stream, which may be mid-write or
    gone), then ``os._exit(128 + signum)`` (no ``atexit`` handler runs: the cleanup releases what must be)."""
    for cleanup in _CLEANUP:
        try:
            cleanup()
        except Exception:  # noqa: BLE001, S110 - the process ends now, with its line
            pass
    try:
        os.write(2, _LINE[0].format(name=signal.Signals(signum).name).encode())
    except OSError:
        pass
    os._exit(128 + signum)


def _hold(signum: int, frame: object) -> None:
    """SIGINT or SIGTERM between two jobs (:func:`between_jobs`): held for the next job's start; the same
    signal again (a second Ctrl-C) is raised at once, through the job's handler."""
    if signum in _HELD:
        _HELD.clear()
        _restore()
        signal.raise_signal(signum)
        return
    _HELD.append(signum)


def stop_before_jobs(job_handlers: dict[int, object], cleanup: Callable[[], object] | None = None) -> None:
    """Until :func:`jobs_starting`, SIGINT and SIGTERM end the process at once: one line
    (:data:`STOP_LINE`), exit status 128 + the signal (130, 143), as a shell reports a process the
    signal killed.

    Before a job starts nothing is recorded, so nothing is left half-written; an exception raised from
    the handler instead (``KeyboardInterrupt``, :class:`flopsweep.launch.Terminated`) could land anywhere
    in Hydra's composition: inside OmegaConf, it left a half-built node whose error Hydra printed
    ("'NoneType' object has no attribute '_invalidate_flags_cache'"), and a large config (a YAML alias
    bomb) went on for minutes. A write that holds the signals (:func:`signals_deferred`: the sweep's
    ``multirun.yaml``) still ends first. ``job_handlers`` (signal number -> handler) are put in place by
    :func:`jobs_starting`. ``cleanup`` runs before the process ends (``run.py``:
    :func:`flopsweep.unstarted.remove_unstarted`, the folder Hydra made for the job that did not start, and
    the run's lock). Only the main thread can set handlers; elsewhere this does nothing.
    """
    _stop_on_signals(STOP_LINE, job_handlers, cleanup)


def stop_as_it_starts(line: str) -> None:
    """A command that records nothing (``python -m analysis``): until it hands the signals back
    (:func:`analysis.cli.run_entry`), SIGINT and SIGTERM end the process at once, ``line`` (``{name}``: the
    signal's name) on file descriptor 2 and exit status 128 + the signal (130, 143), as
    :func:`stop_before_jobs` does for ``run.py``: a Ctrl-C in its imports (pandas, matplotlib: 0.6 s) was a
    traceback. Only the main thread can set handlers; elsewhere this does nothing."""
    _stop_on_signals(line, {}, None)


def _stop_on_signals(
    line: str, job_handlers: dict[int, object], cleanup: Callable[[], object] | None
) -> None:
    """:func:`_stop` for SIGINT and SIGTERM, with ``line``, the job handlers to put back later and the
    cleanup to run; nothing off the main thread (where no handler can be set)."""
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _stop)
    except ValueError:  # not the main thread
        return
    _JOB_HANDLERS.clear()
    _JOB_HANDLERS.update(job_handlers)
    _CLEANUP[:] = [cleanup] if cleanup is not None else []
    _HELD.clear()
    _LINE[0] = line


def _restore() -> bool:
    """The job handlers of :func:`stop_before_jobs` back where :func:`_stop` or :func:`_hold` is in place;
    False off the main thread."""
    try:
        for s, handler in list(_JOB_HANDLERS.items()):
            if signal.getsignal(s) in (_stop, _hold):
                signal.signal(s, handler)
    except ValueError:  # not the main thread
        return False
    return True


def jobs_starting() -> None:
    """A job (or a launcher's batch of them) is about to start: the handlers :func:`stop_before_jobs` was
    given take over, so that a signal from now on stops the job's ranks and records the job; a signal
    :func:`between_jobs` held is raised here, through them (``KeyboardInterrupt`` before the job starts).
    Does nothing when :func:`stop_before_jobs` is not in place (a job process of a launcher, a test), or off
    the main thread, but mark the sweep's first job start (:func:`flopsweep.progress.jobs_began`: its
    estimate of the time left counts from there, whatever the launcher)."""
    from flopsweep.progress import jobs_began

    jobs_began()
    _release()


def _release() -> None:
    """The job handlers back, and a signal :func:`between_jobs` held raised through them."""
    if not _restore():
        return
    held = list(dict.fromkeys(_HELD))
    _HELD.clear()
    for s in held:
        signal.raise_signal(s)


def between_jobs() -> None:
    """A job run in this process (Hydra's basic launcher) has ended: until the next one starts
    (:func:`jobs_starting`) or the sweep ends (:func:`jobs_done`), SIGINT and SIGTERM are held, then raised
    there. Between two jobs Hydra composes the next job's config in OmegaConf, where a ``KeyboardInterrupt``
    left a half-built node: Hydra printed "'NoneType' object has no attribute '_invalidate_flags_cache'",
    exit 1, and the interrupt was lost. A second signal of the same kind is raised at once. Does nothing
    unless :func:`stop_before_jobs` is in place with job handlers, or off the main thread."""
    if not _JOB_HANDLERS:
        return
    try:
        for s in _JOB_HANDLERS:
            signal.signal(s, _hold)
    except ValueError:  # not the main thread
        return


def raise_held() -> None:
    """A signal :func:`between_jobs` held is raised now (the job handlers back first); without one the
    signals stay held. The sweeper calls it after each batch of jobs, before it reads their results."""
    if _HELD:
        _release()


def jobs_done() -> None:
    """The sweep's last job has ended (the sweep's ``on_multirun_end``): the job handlers back, and a signal
    :func:`between_jobs` held is raised now (the sweep's table or summary then is the interrupt's)."""
    _release()


DONE_LINE = (
    "flopsweep: {name} came after the work was written; the records stand as written, "
    "the exit status is the work's\n"
)
"""The line :func:`work_done` writes for ``run.py`` (``{name}``: ``SIGINT``, ``SIGTERM``), once."""
ANALYSIS_DONE_LINE = (
    "flopsweep-analysis: {name} came after the work was written; its output stands as written, "
    "the exit status is the work's\n"
)
"""The line :func:`work_done` writes for the analysis (:func:`analysis.cli.run_entry`), once: its table,
report, plots or notebook are whole; before that a signal is :data:`ANALYSIS_LINE` and 130."""
_DONE: list[str] = []
"""``[line]`` once :func:`work_done` was given a line: what :func:`_after_work` writes (``[]`` before, and
off the main thread)."""


def work_done(line: str | None = None) -> None:
    """The process's work is done and its output written (``run.py`` once Hydra has returned or exited;
    the analysis once its entry returned): from here to the exit, which only tears the process down (the
    ``atexit`` callbacks: a plan's scratch folder, the locks, the log files; then the interpreter's
    finalization, 0.6-1.1 s after torch was imported), SIGINT and SIGTERM change nothing: the exit status
    stays the work's (0 for a sweep whose every job was recorded), as Python set it when the work ended.

    Without ``line`` they are ignored (``SIG_IGN``). With it (``run.py``: :data:`DONE_LINE`; the analysis:
    :data:`ANALYSIS_DONE_LINE`), the first
    writes ``line`` (``{name}``: the signal's name) on file descriptor 2 and the rest are ignored; was a
    Ctrl-C 0.3 s after a run's record was written ignored without a word. CPython puts the system's
    default action back for a signal that has a Python handler as it finalizes (a Ctrl-C there was exit
    -2, no line): the last ``atexit`` callback (:func:`_quiet_teardown`) ignores both before that.
    Off the main thread does nothing."""
    handler = signal.SIG_IGN
    if line is not None:
        _DONE[:] = [line]
        handler = _after_work
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, handler)
    except ValueError:  # not the main thread
        _DONE.clear()


def _after_work(signum: int, frame: object) -> None:
    """:func:`work_done`'s handler: its line on file descriptor 2 (``os.write``: no Python stream, which
    may be mid-write or gone), then both signals ignored."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    try:
        os.write(2, str(_DONE[0]).format(name=signal.Signals(signum).name).encode())
    except (OSError, IndexError):
        pass


def _quiet_teardown() -> None:
    """The last ``atexit`` callback of the process (registered as this module is imported, before those of
    the modules imported after it: torch, pandas, matplotlib): where :func:`work_done`'s handler is in place,
    both signals ignored for the interpreter's finalization that follows, where CPython puts the default
    action back for a Python handler (a Ctrl-C there was exit -2). Nothing is skipped (an ``os._exit`` here
    was: #801)."""
    with contextlib.suppress(ValueError):  # not the main thread
        for s in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(s) is _after_work:
                signal.signal(s, signal.SIG_IGN)


atexit.register(_quiet_teardown)


@contextlib.contextmanager
def children_ignore_interrupt() -> Iterator[None]:
    """While the block starts child processes (a launch's ranks): SIGINT is blocked on this thread, so each
    child starts with it blocked, from its first line (a thread's signal mask carries over ``fork`` and
    ``exec``), until it ignores it (:func:`rank_ignores_interrupt`): a Ctrl-C to the whole process group (a
    terminal's) stops only this process, which stops the children and records the run. Was:
    ``model=llama-tiny device=cpu backend=ddp nproc_per_node=2`` interrupted while the ranks imported torch
    printed each rank's ``KeyboardInterrupt`` traceback before flopsweep's one line.

    This process keeps its handler: a SIGINT meanwhile runs it on another thread's delivery or when the block
    ends (the mask is put back). ``SIG_IGN`` here instead (which a child inherits too) lost it: another
    thread of this process took the signal while it was ignored. SIGINT and SIGTERM are also held for the
    block (:func:`signals_deferred`) and raised as it ends: the children are all started, and the caller
    has what stops them."""
    with signals_deferred():
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            if signal.SIGINT not in blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def rank_ignores_interrupt() -> None:
    """A rank's first step (:func:`flopsweep.worker.spawned_main`): SIGINT ignored, then no longer blocked
    (one that came while it started, blocked: :func:`children_ignore_interrupt`, is dropped), for the rank's
    whole life; its launcher stops it (SIGTERM, then SIGKILL) and records the run. Off the main thread only
    unblocks it."""
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


PR_SET_PDEATHSIG = 1
"""``prctl(2)``'s option (``<linux/prctl.h>``): the signal this process gets when its parent ends."""
TERMINATED_STATUS = 128 + signal.SIGTERM
"""The exit status of a process that :func:`end_with_parent` ends at once (143, as SIGTERM would)."""


def end_with_parent(parent: int) -> bool:
    """Have Linux send SIGTERM to this process when its parent, ``parent`` (the pid that started it:
    ``os.getpid()`` there, handed down), ends (``prctl(PR_SET_PDEATHSIG, SIGTERM)``, through ctypes),
    then check that the parent is still ``parent``: when it is not (it died before the request, the race
    ``prctl(2)`` names, and this process was adopted by init or a subreaper), exit at once with status
    143 (:data:`TERMINATED_STATUS`). The one place for a rank (:func:`flopsweep.worker.spawned_main`)
    and a pool job (``hydra_plugins.flopsweep_pool.task``); the signal is kept across ``exec``, not
    passed to this process's own children. Linux ties it to the parent's *thread* that started this
    process: every launch starts its ranks on its main thread.

    Returns:
        True once asked; False where there is no ``prctl`` (not Linux, no libc): nothing asked."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        asked = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(TERMINATED_STATUS)
    return asked
