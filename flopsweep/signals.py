"""Signal deferral around a write that must finish: a record is written whole or not at all.

Torch-free and imports nothing of flopsweep (:func:`flopsweep.files.atomic_write_json` uses it).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM (Ctrl-C, a scheduler's preemption) until the block is done.

    A record being written is finished first; the signal is then raised again, and the
    handler that was in place runs. (Masking with ``pthread_sigmask`` is not enough: the
    signal may land on another thread, and CPython runs the handler on the main thread
    anyway.) Only the main thread can set handlers; elsewhere this does nothing.
    """
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)
