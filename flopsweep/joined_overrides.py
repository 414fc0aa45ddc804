"""Several overrides quoted as one word (``flopsweep "backend=fsdp nproc_per_node=2" device=cpu``): the
shell passes them as one argument, which Hydra reads as one key's value (``backend`` given ``fsdp
nproc_per_node=2``), and the line then blamed the value (``is no option of backend``). Refused first, with
the split command as the fix (:func:`joined_problem`). Torch-free."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from flopsweep.override_parsing import overrides_of

JOINED = re.compile(r"\s+[+~]{0,2}[A-Za-z_][\w.@/-]*=")
"""Whitespace, then ``KEY=`` (``+``, ``++`` or ``~`` before it): where a value holds another override."""


def split_word(override: str) -> list[str] | None:
    """The overrides ``override`` (one word of the command line, ``KEY=VALUE``) holds, split at whitespace,
    where its value holds whitespace followed by ``KEY=`` (:data:`JOINED`) and no quote (a quoted value is
    Hydra's own text: ``tag='a b=c'``), else None: ``"backend=fsdp nproc_per_node=2"`` ->
    ``["backend=fsdp", "nproc_per_node=2"]``."""
    key, eq, value = override.partition("=")
    if not eq or not key.strip() or any(q in value for q in "'\"") or not JOINED.search(value):
        return None
    return override.split()


def joined_problem(argv: list[str], recheck: Callable[[list[str]], str | None] | None = None) -> str | None:
    """One line for the first word of ``argv`` (``KEY=VALUE``, not a flag) that holds several overrides
    (:func:`split_word`), else None; the fix is the command line with that word split, as typed back
    (``flopsweep backend=fsdp nproc_per_node=2 device=cpu``), every such word of the line split; ``recheck``
    (``run.py``'s refusal) names what still refuses the split line (``(then: ...)``)."""
    from flopsweep.cli import COMMAND
    from flopsweep.text import printable

    words = overrides_of(argv)
    first = next((w for w in words if split_word(w)), None)
    if first is None:
        return None
    fixed = [part for a in argv for part in ((split_word(a) or [a]) if a in words else [a])]
    line = f"{COMMAND} {' '.join(shlex.quote(a) for a in fixed)}"
    note = ""
    if recheck is not None and (again := recheck(fixed)):
        note = f" (then: {again.removeprefix('Invalid config: ')})"
    parts = split_word(first) or []
    return printable(
        f"Invalid config: {first}: holds {len(parts)} overrides in one word ({', '.join(parts)}): quoted "
        f"together, the shell passes them as one, read as the value of {first.partition('=')[0].strip()}. "
        f"Fix: give each override its own word: {line}{note or '.'}"
    )
