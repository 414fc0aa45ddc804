"""Keys that do nothing without another, torch-free: ``fault.rank=1`` without ``fault.kind`` injected no
fault and ran as if it were not there (trial 24). ``run.py`` refuses them before Hydra starts
(:func:`flopsweep.key_needs.idle_key_problem`, exit 2, one line), the fix the whole line that runs.

Each :class:`Idle` names the keys, the key that makes them act and the values of it under which they do
nothing. A command line is refused when it gives one of the keys and no value it gives the other key
(none, or each value of a sweep: ``-m fault.kind=none,raise fault.phase=warmup`` sweeps a control job
beside the fault, and passes) makes them act. A ``+sweep`` file or another ``--config-name`` may set
the other key: such a command line is left alone (the job runs as the file says).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from flopsweep.compile_levers import COMPILE_MODES, COMPILE_SCOPES
from flopsweep.limits import FAULT_PHASES, PLAN_FORMATS, SEARCH_GROW


@dataclass(frozen=True)
class Idle:
    """Keys (``keys``) that act only when ``needs`` has a value outside ``idle`` (its default among
    them), with the fix's pick (``pick``, a value of ``needs`` that makes them act, an override), the
    other values that would (``others``), why, and the values a key takes (``choices``: a value outside
    them is left to the job's own refusal, which lists them, so that the fix is never a line refused
    for the value in turn), and the least whole number a key takes (``lowest``: ``fault.rank=-1`` is no
    rank; the fix writes the least, which the job's check of the other key's value then passes), and the
    ``space.*`` list that sets ``needs`` per set-up of a plan or a tuner (``space``: ``space.compile=[true]``
    compiles the set-ups, so ``compile_mode`` acts on them without ``compile=true``)."""

    keys: tuple[str, ...]
    needs: str
    idle: tuple[str, ...]
    pick: str
    others: str
    why: str
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lowest: dict[str, tuple[int, str]] = field(default_factory=dict)
    space: str = ""
    unset_acts: bool = False
    """Whether ``needs`` unset (its default) makes the keys act: ``search.grow=n_layer``, the default,
    grows the blocks, so ``search.min_n_layer`` is idle only beside ``search.grow=seq_len``."""


SEARCH_LOWEST: dict[str, tuple[int, str]] = {
    **{k: (1, "a model has a block or more") for k in ("search.min_n_layer", "search.max_n_layer")},
    **{k: (1, "a sequence holds a token or more") for k in ("search.min_seq_len", "search.max_seq_len")},
}
"""The least value of each of the search's bounds, for an idle key's line (``is below 1 (...)``); the job's
and the check's own bound are :data:`flopsweep.lower_bounds.MIN_BY_KEY`'s."""

IDLE: tuple[Idle, ...] = (
    Idle(
        ("fault.rank", "fault.phase"),
        "fault.kind",
        ("none",),
        "fault.kind=raise",
        " (or oom, kill, abort, hang, nan_loss for raise)",
        "fault.kind=none (the default) injects no fault",
        {"fault.phase": FAULT_PHASES},
        {"fault.rank": (0, "a rank is 0 to the world size - 1")},
    ),
    Idle(
        (
            "search.grow",
            "search.min_n_layer",
            "search.max_n_layer",
            "search.min_seq_len",
            "search.max_seq_len",
            "search.seq_len_multiple",
        ),
        "search.model",
        ("none",),
        "search.model=largest",
        "",
        "search.model=none (the default) searches nothing",
        {"search.grow": SEARCH_GROW},
        lowest=SEARCH_LOWEST,
    ),
    Idle(
        ("search.min_seq_len", "search.max_seq_len", "search.seq_len_multiple"),
        "search.grow",
        ("n_layer",),
        "search.grow=seq_len",
        "",
        "search.grow=n_layer (the default) grows the blocks at the configured seq_len",
        lowest={k: SEARCH_LOWEST[k] for k in ("search.min_seq_len", "search.max_seq_len")},
    ),
    Idle(
        ("search.min_n_layer", "search.max_n_layer"),
        "search.grow",
        ("seq_len",),
        "search.grow=n_layer",
        "",
        "search.grow=seq_len grows the sequence at the configured n_layer",
        lowest={k: SEARCH_LOWEST[k] for k in ("search.min_n_layer", "search.max_n_layer")},
        unset_acts=True,
    ),
    Idle(
        ("compile_scope", "compile_mode"),
        "compile",
        ("false", "no", "off", "0"),
        "compile=true",
        "",
        "compile=false (the default) compiles nothing",
        {"compile_scope": COMPILE_SCOPES, "compile_mode": COMPILE_MODES},
        space="space.compile",
    ),
    Idle(
        ("plan_format", "plan_clusters"),
        "plan",
        ("false", "no", "off", "0"),
        "plan=true",
        "",
        "only plan=true plans (plan=false, the default, runs the job)",
        {"plan_format": PLAN_FORMATS},
    ),
)
"""Every key that does nothing without another; ``search.memory_budget_gib`` is left out (``batch=auto``
reads it too), and so is ``plan_gpu`` (a run warns when its GPU is not the one named).
``compile_scope``/``compile_mode`` are :func:`flopsweep.compile_levers.check`'s in the job too (for a
``+sweep`` file); on the command line this refuses them before Hydra makes a run folder. Beside
``space.compile`` (a plan's or the tuner's set-ups) they act where it lists true, on the compiled set-ups."""


def space_acts(idle: Idle, typed: list[str] | str | None) -> bool | None:
    """Whether the ``space.*`` list of ``idle`` (:attr:`Idle.space`), as typed (each value of a sweep),
    lists a value that makes its keys act (``[false,true]``: ``true``); None where it lists none
    (not given, ``[]``, ``null``: the job's own ``needs`` decides)."""
    texts = [typed] if isinstance(typed, str) else typed or []
    words = [w for t in texts for w in re.split(r"[\[\],\s'\"]+", t.lower()) if w not in ("", "null", "none")]
    return None if not idle.space or not words else "true" in words


def pick_of(idle: Idle, given: dict[str, str]) -> str:
    """The override that makes ``idle``'s keys act on a command line that sets ``given``: its
    :attr:`Idle.pick`, or beside a ``space.*`` list of no such value (``space.compile=[false]``, where
    ``compile=true`` is refused) that list with one: ``space.compile=[false,true]``."""
    return f"{idle.space}=[false,true]" if space_acts(idle, given.get(idle.space)) is False else idle.pick


def idle_without(key: str, given: dict[str, str]) -> Idle | None:
    """The :class:`Idle` under which ``key`` does nothing on a command line that sets ``given`` (key ->
    first value as typed), else None; ``compile_mode`` beside ``space.compile=[true]`` acts."""
    for idle in IDLE:
        if key in idle.keys and space_acts(idle, given.get(idle.space)) is not None:
            return None if space_acts(idle, given.get(idle.space)) else idle
        if key in idle.keys:
            other = given.get(idle.needs)
            if (other is None and not idle.unset_acts) or (
                other is not None and "$" not in other and other.strip().strip("'\"").lower() in idle.idle
            ):
                return idle
    return None
