"""The standard streams of a command started with some of them closed (``flopsweep ... >&-``,
``flopsweep-analysis DIR 2>&-``), torch-free, standard library only: :func:`standard_streams` is the
first step of ``run.py`` and of the analysis's entry.
"""

from __future__ import annotations

import os
import sys

STANDARD_FDS = ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY))
"""The standard file descriptors and how :func:`reopen_closed_fds` opens ``os.devnull`` in their place."""


def reopen_closed_fds(fds=STANDARD_FDS) -> list[int]:
    """Point each closed descriptor of ``fds`` (``(fd, flags)``; a command started with ``>&-``,
    ``2>&-``, ``<&-``) at ``os.devnull``, so that no file opened later takes its number (a record opened
    as descriptor 1 would get every ``print``, a worker's output included) and what is written there
    is dropped; inheritable, as the standard descriptors are, so that the processes this one starts (the
    ranks) have them too. Returns the descriptors reopened."""
    reopened = []
    for fd, flags in fds:
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        devnull = os.open(os.devnull, flags)
        if devnull != fd:
            os.dup2(devnull, fd)  # inheritable
            os.close(devnull)
        else:  # os.open's descriptors are close-on-exec (PEP 446): a worker rank would start with it closed
            os.set_inheritable(fd, True)
        reopened.append(fd)
    return reopened


def usable_stream(stream, fd: int):
    """``stream`` (``sys.stdout`` or ``sys.stderr``), or, when it is None (Python sets it so when its
    descriptor was closed at start) or closed, a text stream on ``fd`` (line-buffered, never closing
    ``fd``): every ``print`` of the run then works, and what it writes goes where ``fd`` points
    (``os.devnull`` after :func:`reopen_closed_fds`)."""
    if isinstance(stream, ClosedPipeGuard) or (stream is not None and not getattr(stream, "closed", False)):
        return stream
    return open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


CLOSED_AT_START: set[int] = set()
"""The standard descriptors :func:`standard_streams` found closed (``{1}`` after ``>&-``): what a command
whose product is its stdout (``python -m analysis DIR`` without ``--output``) reads to refuse, rather
than write its table to ``os.devnull`` and exit 0 (:func:`stdout_closed_at_start`)."""


def stdout_closed_at_start() -> bool:
    """Whether this process was started with its stdout closed (``>&-``), as :func:`standard_streams`
    found it; False before that ran, and for ``> /dev/null`` (a stdout opened by the user)."""
    return 1 in CLOSED_AT_START


def standard_streams() -> list[int]:
    """``run.py``'s and the analysis's first step: :func:`reopen_closed_fds`, then ``sys.stdout`` and
    ``sys.stderr`` made usable (:func:`usable_stream`) and each guarded against a reader that goes away
    (:func:`guarded`); the descriptors reopened are kept in :data:`CLOSED_AT_START` and returned.
    ``flopsweep ... >&-`` wrote its record, then failed in its last ``print`` ("'NoneType' object has no
    attribute 'flush'", exit 120); it now exits with the run's status (its product is the record). The
    analysis refuses instead (its product is the table). ``flopsweep-analysis DIR 2>&1 | head -1`` exited
    1 with nothing said (the footer's next line on stderr met ``BrokenPipeError``, and its traceback went
    to the same closed pipe); both streams are guarded now: exit 0, as with stdout alone."""
    reopened = reopen_closed_fds()
    CLOSED_AT_START.update(reopened)
    sys.stdout = guarded(usable_stream(sys.stdout, 1))
    sys.stderr = guarded(usable_stream(sys.stderr, 2))
    return reopened


def guarded(stream):
    """``stream`` wrapped in a :class:`ClosedPipeGuard`, or as is when it is one already (``flopsweep``
    runs ``run.py``, and each calls :func:`standard_streams`)."""
    return stream if isinstance(stream, ClosedPipeGuard) else ClosedPipeGuard(stream)


class ClosedPipeGuard:
    """``sys.stdout`` and ``sys.stderr`` (:func:`standard_streams`) whose reader may go away (``flopsweep
    --help | head -3``, ``--cfg job | head``, a plan piped to ``grep -m1``, ``flopsweep-analysis DIR 2>&1 |
    head -1``): the Python docs' handling of SIGPIPE ("Note on SIGPIPE", the
    ``signal`` module), made to hold inside Hydra too, which prints ``--help``, ``--cfg`` and
    ``--info`` itself and answers an exception in them with a traceback (``run_and_report``).

    The first write or flush that meets ``BrokenPipeError`` points the stream's descriptor at ``os.devnull``
    (``os.dup2``), so that no later write, the interpreter's last flush included, raises again, and
    the output is dropped from then on, as the reader asked; the process goes on and exits as it
    would have (a job started already records itself, ranks included). SIGPIPE itself stays
    ignored (Python's default): its default action would also kill the process when a socket's
    peer closes (torch.distributed's). :attr:`closed` says whether it happened.
    """

    def __init__(self, stream) -> None:
        self._stream = stream
        self.closed = False

    def _closed(self) -> None:
        self.closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()
            self._stream.flush()  # what it held goes to os.devnull now: the buffer is empty

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
