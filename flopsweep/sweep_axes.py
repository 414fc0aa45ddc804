"""Refusals of a sweep's axes before Hydra starts (``run.py``), torch-free: an axis that lists one value
twice (:func:`repeated_value_problem`), a key that steers the whole sweep, swept
(:func:`sweep_level_problem`), and a ``space.*`` list swept (:func:`space_sweep_problem`). Each returns
one line (``Invalid config: ...``), or None."""

from __future__ import annotations

import json

from flopsweep.override_parsing import set_key

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
    from flopsweep.override_parsing import parsed_overrides

    parsed = parsed_overrides(overrides)
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


def _as_read(o: object, key: str, value: object) -> object:
    """``value`` as the job reads it: a text its key's schema converts (``batch.micro_batch_size=01``: the
    grammar's text ``'01'``, OmegaConf's int 1) converted, else as it is (``tag=01`` stays ``'01'``)."""
    if not isinstance(value, str) or not value.strip():
        return value
    from omegaconf import OmegaConf

    from flopsweep.options import GROUP_BASES
    from flopsweep.override_schema import key_schemas

    try:
        schema, _ = key_schemas([o], key)[0]
        inner = key.partition(".")[2] if key.split(".")[0] in GROUP_BASES else key
        import copy as copies

        copy = copies.deepcopy(schema) if OmegaConf.is_config(schema) else OmegaConf.structured(schema)
        OmegaConf.set_readonly(copy, False)  # the cached schema itself is read-only
        OmegaConf.update(copy, inner, value, merge=False)
        return OmegaConf.select(copy, inner)
    except Exception:  # noqa: BLE001 - no such key or not its type: type_problem's line, the text kept
        return value


def space_sweep_problem(overrides: list[str]) -> str | None:
    """One line for a sweep over a ``space.*`` list (:data:`flopsweep.space_values.LIST_KEYS`) beside
    ``plan_clusters`` or ``hydra/sweeper=tune`` (``-m 'space.backends=[ddp],[fsdp]'``), else None. Was: the
    tuner dropped the lists and tuned the default space (90 set-ups, ``single`` among them); a plan ran one
    plan per list. The space is every combination of its lists: the fix is one list of every value."""
    from flopsweep.override_schema import sweep_values
    from flopsweep.space_values import LIST_KEYS

    keys = {set_key(a) for a in overrides}
    tune = any(a.replace(" ", "") == "hydra/sweeper=tune" for a in overrides)
    if not (tune or "plan_clusters" in keys):
        return None
    for o in _parsed(overrides):
        key = o.key_or_group
        if not o.is_sweep_override() or o.is_delete() or key.removeprefix("space.") not in LIST_KEYS:
            continue
        if not key.startswith("space."):
            continue
        merged = [_text(v) for vs in sweep_values(o) for v in (vs if isinstance(vs, list) else [vs])]
        return (
            f"Invalid config: {o.input_line}: is swept, but the space is every combination of its lists "
            f"({'the tuner' if tune else 'the plan'} searches one space, not a sweep of spaces). "
            f"Fix: give one list: {key}=[{','.join(dict.fromkeys(merged))}]."
        )
    return None


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
            read = _as_read(o, key, v)  # 01 is 1 to an int key, as the job reads it
            label = json.dumps(read, sort_keys=True, default=str)
            if label in seen and twice is None:
                twice = read
            seen.setdefault(label, read)
        if twice is None:
            continue
        once = ",".join(_text(v) for v in seen.values())
        plan = any(set_key(a) == "plan" for a in overrides)
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
