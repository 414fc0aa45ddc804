"""Refusals of a sweep's axes before Hydra starts (``run.py``), torch-free: an axis that lists one value
twice (:func:`repeated_value_problem`) and a key that steers the whole sweep, swept
(:func:`sweep_level_problem`). Each returns one line (``Invalid config: ...``), or None."""

from __future__ import annotations

import json

SWEEP_LEVEL_KEYS = {
    "resume": ("it steers the whole sweep (which of its jobs run again), not one job", "resume=true"),
    "fail_fast": (
        "it steers the whole sweep (stop at the first job that is not ok), not one job",
        "fail_fast=true",
    ),
    "sweep": (
        "a sweep file's axes (its hydra.sweeper.params) are read once, for the whole sweep: each job "
        "would run its file's fixed values alone",
        "+sweep=smoke, one command per sweep file",
    ),
}
"""Keys that apply to a sweep as a whole, each with why a sweep over it means nothing and the fix's example:
``resume`` and ``fail_fast`` jobs are the same run (neither is part of a job's identity,
:data:`flopsweep.identity.RUN_CONTROL_KEYS`); ``+sweep=smoke,backends`` ran one job per file, its axes
dropped."""


def _parsed(overrides: list[str]) -> list:
    """Hydra's parsed overrides of the command line (its flags left out); [] where the grammar refuses one
    (:func:`flopsweep.override_grammar.syntax_problem`'s line comes first)."""
    from flopsweep.override_parsing import parsed_all_or_none

    given = [a for a in overrides if "=" in a and not a.startswith("-")]
    parsed = parsed_all_or_none(given)
    return [] if parsed is None else parsed


def _text(value: object) -> str:
    """A parsed value as the command line writes it (``null``, ``true``, ``[1,2]``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(map(_text, value)) + "]"
    return str(value)


def repeated_value_problem(overrides: list[str]) -> str | None:
    """One line for a sweep that lists one value twice (``-m seed=1,1``, ``model=gpt-tiny,gpt-tiny``,
    ``tag=a,a``), else None. Was: two identical jobs, the same run measured twice under two job numbers
    (a plan: two equal rows), in silence. The fix lists each value once, and names ``repeats=N``, which
    measures a set-up N times and pools the rounds. ``fault`` and ``fault.*`` are left out: a fault-injection
    sweep lists ``none`` between its faults on purpose (``fault.kind=none,raise,none``: the job after a
    fault is measured as a fresh process)."""
    from flopsweep.override_schema import sweep_values

    for o in _parsed(overrides):
        key = o.key_or_group
        if not o.is_sweep_override() or o.is_delete() or key.startswith(("hydra", "fault")):
            continue  # fault=: a clean job (kind none) between faults, on purpose, is a job of its own
        values = sweep_values(o)
        seen: dict[str, object] = {}
        twice = None
        for v in values:
            label = json.dumps(v, sort_keys=True, default=str)
            if label in seen and twice is None:
                twice = v
            seen.setdefault(label, v)
        if twice is None:
            continue
        once = ",".join(_text(v) for v in seen.values())
        plan = any(a.partition("=")[0].lstrip("+") == "plan" for a in overrides)
        again = "" if plan else " (to measure a set-up several times: -m repeats=3)"  # a plan repeats nothing
        return (
            f"Invalid config: {o.input_line}: lists {_text(twice)} more than once, so the same job would "
            f"run twice. Fix: give each value once: {key}={once}{again}."
        )
    return None


def sweep_level_problem(overrides: list[str]) -> str | None:
    """One line for a sweep over a key of :data:`SWEEP_LEVEL_KEYS` (``-m resume=true,false``,
    ``fail_fast=true,false``, ``+sweep=smoke,backends``), or a group added twice (``+sweep=smoke
    +sweep=smoke``: Hydra's "sweep appears more than once in the final defaults list", exit 1), else
    None. Was: two jobs of the same run, one resumed and one not (or one stopping the sweep and one not);
    one job per sweep file, its axes dropped; in silence."""
    added: dict[str, str] = {}
    for o in _parsed(overrides):
        key = o.key_or_group
        if o.is_delete() or o.package is not None:
            continue
        if key in SWEEP_LEVEL_KEYS and o.is_sweep_override():
            why, example = SWEEP_LEVEL_KEYS[key]
            return (
                f"Invalid config: {o.input_line}: is swept, but {why}. "
                f"Fix: give it one value for the whole sweep, e.g. {example}."
            )
        if o.is_add() and "." not in key and not key.startswith("hydra"):
            if key in added:
                return (
                    f"Invalid config: {added[key]} and {o.input_line}: + adds the group {key} once, and "
                    f"Hydra refuses it twice. Fix: give {o.input_line.partition('=')[0]} once."
                )
            added[key] = o.input_line
    return None
