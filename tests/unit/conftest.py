"""The unit tier's guard: a test under ``tests/unit/`` starts no process.

Every way Python starts one ends in a few calls, patched here for each test's set-up, call and
tear-down (so a module or session fixture that a unit test sets up is guarded too):
``_posixsubprocess.fork_exec`` (``subprocess`` and ``multiprocessing``'s spawn and forkserver),
``os.posix_spawn``/``os.posix_spawnp`` (``subprocess``'s fast path), ``os.fork``/``os.forkpty``
(``multiprocessing``'s fork, ``pty.fork``, ``os.spawn*``), ``os.exec*`` and ``os.system``. A patched
call raises :class:`ProcessStarted` instead of starting anything, and the phase fails with the test's
id and what it tried to start, even when the code under test caught the error. A test that needs a
process belongs in ``tests/integration/``.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager

import pytest

_OS_CALLS = (
    "fork",
    "forkpty",
    "posix_spawn",
    "posix_spawnp",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "system",
)
"""The ``os`` functions that start or replace a process (``os.execl*`` and ``os.spawn*`` go through
``execv``/``execve``/``fork``; ``os.popen`` goes through ``subprocess``)."""


class ProcessStarted(RuntimeError):
    """Raised in place of starting a process from a unit test."""


def _what(name: str, args: tuple) -> str:
    """``name`` and the program it was asked to run (the first argv list or path among ``args``)."""
    for arg in args:
        if isinstance(arg, (list, tuple)) and arg:
            return f"{name} {[os.fsdecode(a) if isinstance(a, bytes) else a for a in arg][:6]}"
        if isinstance(arg, (str, bytes, os.PathLike)):
            return f"{name} {os.fsdecode(arg)!r}"
    return name


def _refusal(nodeid: str, started: list[str], name: str) -> Callable:
    """A stand-in for ``name`` that records the call in ``started`` and raises :class:`ProcessStarted`."""

    def refuse(*args, **kwargs):
        what = _what(name, args)
        started.append(what)
        raise ProcessStarted(f"{nodeid} started a process ({what}): move the test to tests/integration/")

    return refuse


@contextmanager
def _patched(nodeid: str, started: list[str]) -> Iterator[None]:
    """Every process-starting call refused (and noted in ``started``) while the block runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_posixsubprocess, "fork_exec", _refusal(nodeid, started, "fork_exec"))
        patch.setattr(subprocess, "_fork_exec", _refusal(nodeid, started, "subprocess"))
        for name in _OS_CALLS:
            if hasattr(os, name):
                patch.setattr(os, name, _refusal(nodeid, started, f"os.{name}"))
        yield


def _guarded(item: pytest.Item) -> Generator[None, object, object]:
    """Run one phase of ``item`` under :func:`_patched`; fail it when it tried to start a process,
    naming the test and what it started, even if the code under test caught the refusal or the phase
    failed otherwise."""
    started: list[str] = []
    try:
        with _patched(item.nodeid, started):
            result = yield
    finally:
        if started:
            message = f"{item.nodeid} started a process ({'; '.join(started)}): tests/unit/ starts none; "
            raise pytest.fail.Exception(message + "move it to tests/integration/", pytrace=False) from None
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Guard the set-up of ``item``'s fixtures, of every scope."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Guard the test itself."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """Guard the tear-down of ``item``'s fixtures."""
    return (yield from _guarded(item))


@pytest.fixture(scope="module", autouse=True)
def one_intra_op_thread() -> Iterator[None]:
    """torch on one intra-op thread for each unit module (the count before is restored after it).

    The unit tier's models are tiny: a second OpenMP thread buys nothing, and on a shared 2-core
    machine it waits for a core at every parallel region. The torch-heavy unit files (test_llama,
    test_hf, test_chunked_loss, test_optim_in_backward, test_attention, test_llama_backends) took
    80-127 s on two threads and 20 s on one at load 1.7-3.6 (2026-12-04). A run's own thread count is
    checked where runs start, in ``tests/integration/`` (``system.cpu_threads``)."""
    torch = sys.modules.get("torch")  # imported by the modules that use it; none is imported here
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
