"""A command line's sweeps before Hydra starts (``run.py``'s :func:`refusal`, exit 2), torch-free: what runs
only under ``-m`` (:func:`needs_multirun`: a sweep of several values, ``repeats`` above 1, another sweeper or
launcher), a sweep without it (:func:`sweep_without_m_problem`, :func:`sweeper_without_m_problem`), a sweep
of more than :data:`MAX_SWEEP_JOBS` jobs (:func:`sweep_size_problem`), and a sweep function that runs no
job or a traceback (:func:`sweep_function_problem`). :func:`split_choices` splits a value at its top-level
commas. Left :mod:`flopsweep.override_grammar` (the grammar's own refusals) in session 42, which imports
it, never the other way.
"""

from __future__ import annotations

import math
import os

from flopsweep.config import typed_form
from flopsweep.flags import is_multirun
from flopsweep.override_parsing import overrides_of, parsed_overrides, split_override
from flopsweep.override_schema import CONF, listed_values


def quoted_override(key: str, value: str) -> str:
    """``KEY=VALUE`` with the value quoted for Hydra (a quote the value lacks) and the whole
    override in single quotes for a POSIX shell, e.g. ``'tag="ünï"'``."""
    inner = '"' if '"' not in value else "'"
    text = f"{key}={inner}{value}{inner}"
    return "'" + text.replace("'", "'\\''") + "'" if inner == '"' else '"' + text + '"'


def split_choices(value: str) -> list[str] | None:
    """``value`` split at its top-level commas (outside brackets and quotes), or None when a bracket or
    quote is left open."""
    items, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(value):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(value[start:i])
            start = i + 1
    if quote or depth:
        return None
    return [*items, value[start:]]


def needs_multirun(override: str) -> bool:
    """Whether ``override`` runs only under ``-m``: ``repeats=`` above 1 (its rounds are jobs of a
    sweep, ``command_line_checks.repeats_problem``), a ``hydra/sweeper`` other than :data:`DEFAULT_SWEEPER`
    (:func:`sweeper_without_m_problem`), a sweep of several values (:func:`sweep_without_m_problem`)."""
    prefix, key, value = split_override(override)
    value, deleted = value.strip().strip("'\""), "~" in prefix  # ~repeats=3 deletes: no rounds
    if key == "repeats" and not deleted:
        return value.isascii() and value.isdigit() and int(value) > 1
    if key in ("hydra/sweeper", "hydra/launcher") and not deleted:
        return value != (DEFAULT_SWEEPER if key == "hydra/sweeper" else DEFAULT_LAUNCHER)
    items = split_choices(value)
    return bool(items and len(items) > 1) or value.startswith(("range(", "glob("))


def sweep_without_m_problem(argv: list[str]) -> str | None:
    """One line for a sweep override (``backend=ddp,fsdp``, ``tag=a,b``, ``seed=range(3)``) on a
    command line without ``-m``/``--multirun``, else None: several values are several jobs.

    Hydra's own "Ambiguous value" block lists three ways out; the line names the key, the value and
    the two that fit: ``-m`` for one job each, or one quoted string (a group option or a number
    never is one). Keys under ``hydra.`` are Hydra's own and left to it.
    """
    from flopsweep.decimal_comma import decimal_comma
    from flopsweep.flags import one_value, prints_only

    if is_multirun(argv):
        return None
    if (parsed := parsed_overrides(argv)) is None:  # syntax_problem's
        return None
    for o in parsed:
        if not o.is_sweep_override() or o.key_or_group.startswith("hydra"):
            continue
        override = o.input_line or f"{o.key_or_group}=..."
        prefix, name, value = split_override(override)
        key = prefix + name
        fix = f"add -m (flopsweep -m {override} ...)"
        if prints_only(argv):  # -m --cfg is refused: one value prints one job's config
            one = [one_value(a) if a in overrides_of(argv) else a for a in argv]
            fix = f"one value prints one job's config: flopsweep {' '.join(one)}"
        values = list(getattr(o.value(), "list", None) or [])
        group = "." not in name and os.path.isdir(os.path.join(CONF, name))
        if values and not group and not all(isinstance(v, int | float | bool) for v in values):
            fix += f", or, for {name} as one string, quote it: {quoted_override(key, value)}"
        elif comma := decimal_comma(name, value, overrides_of(argv)):
            fix += f", or, if {value} is a decimal comma, write it with a point: {name}={comma}"
        return (
            f"Invalid config: {override}: several values are a sweep, one job each, and this command "
            f"line has no -m. Fix: {fix}."
        )
    return None


DEFAULT_SWEEPER = "basic_batched"
"""``conf/config.yaml``'s ``hydra/sweeper`` choice: Hydra's basic sweeper, flopsweep's batch size."""


DEFAULT_LAUNCHER = "basic"
"""Hydra's own launcher, conf/config.yaml's (it picks none): jobs one after another in this process."""


def sweeper_without_m_problem(argv: list[str]) -> str | None:
    """One line for a ``hydra/sweeper=`` choice other than :data:`DEFAULT_SWEEPER`, or a
    ``hydra/launcher=`` other than :data:`DEFAULT_LAUNCHER`, on a command line without
    ``-m``/``--multirun``, else None: Hydra runs one plain job and never starts a sweeper or a launcher
    (``flopsweep hydra/sweeper=tune device=cpu`` ran one job, exit 0, nothing tuned;
    ``hydra/launcher=slurm`` without ``-m`` ended in submitit's traceback). A command line that only
    prints (``--cfg job``, :func:`flopsweep.flags.prints_only`) is left alone: ``-m --cfg`` is refused."""
    from flopsweep.flags import prints_only
    from flopsweep.pool import cpu_pool_problem

    if is_multirun(argv) or prints_only(argv):
        return None
    for override in overrides_of(argv):
        prefix, name, value = split_override(override)
        choice = value.strip().strip("'\"")
        default = {"hydra/sweeper": DEFAULT_SWEEPER, "hydra/launcher": DEFAULT_LAUNCHER}.get(name)
        if "=" in override and default is not None and "~" not in prefix and choice != default:
            what = name.rpartition("/")[2]
            added = override
            if choice == "pool" and cpu_pool_problem(["-m", *argv]):  # device=cpu: no GPU to count
                added, what_else = f"{override} hydra.launcher.slots=[0,1]", " and the pool's devices"
            else:
                what_else = ""
            return (
                f"Invalid config: {override}: a {what} runs only under -m (without it Hydra runs one plain "
                f"job and the {what} never starts). Fix: add -m{what_else} (flopsweep -m {added} ...)."
            )
    return None


MAX_SWEEP_JOBS = 10_000
"""The most jobs a command line's sweep may expand to (its axes' product, times ``repeats=``): a typo
such as ``seed=range(0,100000)`` beside another axis made Hydra's basic sweeper build every
combination in memory (99,900,000 for two ranges) before the first job, for minutes, silently."""


def axis_length(override: object) -> int:
    """How many values a sweep override expands to, without expanding a range: a choice's count, a
    range's arithmetic length, a group glob's matching options; 1 for what this cannot tell
    (a key's glob, an interval: Hydra's)."""
    from hydra.core.override_parser.types import ChoiceSweep, Glob, RangeSweep

    value = override.value()  # type: ignore[attr-defined]
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if not step:
            return 1
        return max(0, math.ceil((stop - start) / step))
    if isinstance(value, Glob):  # None: a key's glob, Hydra's to expand; [] a group glob matching nothing
        listed = listed_values(override)
        return 1 if listed is None else len(listed)
    return 1


def sweep_size_problem(argv: list[str]) -> str | None:
    """One line for a command-line sweep of more than :data:`MAX_SWEEP_JOBS` jobs (the product of its
    axes' lengths times ``repeats=``), naming the largest axis, or of no job (an axis that lists no
    value: ``range(0,0)``, ``range(5,1)``, a group's ``glob()`` that matches no option; Hydra launched 0
    jobs and the summary said ``0 ok``, exit 0) or of a ``range()`` of step 0 (a traceback from
    Hydra's range or Python's), else None. An Optuna study draws
    ``n_trials`` points from its ranges and is left out. The axes of a ``+sweep=`` file's
    ``hydra.sweeper.params`` are counted by :func:`flopsweep.conf_files.sweep_file_problem`, which puts
    them before the command line's and calls this. A ``repeats=`` outside 1..``MAX_REPEATS`` is not
    counted: ``command_line_checks.repeats_problem`` refuses it in its own line."""
    from hydra.core.override_parser.types import RangeSweep

    from flopsweep.override_parsing import parsed_all_or_none

    if not is_multirun(argv):
        return None
    overrides = overrides_of(argv)
    if any(
        o.partition("=")[2].strip().startswith("optuna") for o in overrides if o.startswith("hydra/sweeper=")
    ):
        return None
    if (parsed := parsed_all_or_none(overrides)) is None:  # syntax_problem's
        return None
    if still := next((o for o in parsed if isinstance(o.value(), RangeSweep) and not o.value().step), None):
        line = still.input_line or still.key_or_group
        return (
            f"Invalid config: {line}: a range() of step 0 never reaches its end (Hydra and Python refuse it "
            f"in a traceback). Fix: give a step that is not 0 (range(start,stop,step), step 1 by default), "
            f"or list the values ({still.key_or_group}=1,2,3)."
        )
    axes = {o.input_line or o.key_or_group: axis_length(o) for o in parsed if o.is_sweep_override()}
    repeats = next(
        (o.value() for o in parsed if o.key_or_group == "repeats" and not o.is_sweep_override()), 1
    )
    if empty := next((axis for axis, n in axes.items() if n == 0), None):  # Hydra: "Launching 0 jobs"
        return (
            f"Invalid config: {empty}: lists no value, so the sweep would run no job. Fix: give "
            f"{empty.partition('=')[0]} at least one value (range(a,b) stops before b: range(1,4) is 1, "
            "2, 3; a glob must match an option)."
        )
    from flopsweep.limits import MAX_REPEATS

    # a repeats= out of 1..MAX_REPEATS is command_line_checks.repeats_problem's line (the bound comes first)
    counted = isinstance(repeats, int) and not isinstance(repeats, bool) and 1 <= repeats <= MAX_REPEATS
    total = math.prod(axes.values()) * (repeats if counted else 1)
    if total <= MAX_SWEEP_JOBS or not axes:
        return None
    widest = max(axes, key=axes.__getitem__)
    shown = " x ".join(f"{n}" for n in axes.values())
    return (
        f"Invalid config: {widest}: the sweep would run {total} jobs ({shown}"
        f"{f' x repeats={repeats}' if counted and repeats > 1 else ''}), over the bound of "
        f"{MAX_SWEEP_JOBS}. Fix: give {widest.partition('=')[0]} fewer values, or split the sweep into "
        f"parts of at most {MAX_SWEEP_JOBS} jobs (one hydra.sweep.dir each)."
    )


def sweep_function_problem(argv: list[str]) -> str | None:
    """One line for a sweep function the chosen sweeper cannot expand, else None (each a key's
    override of ``-m``):

    - ``glob()`` of a key that is no config group (``seed=glob(*)``): a glob picks a group's option
      files, so Hydra expanded it to no value, launched 0 jobs and the summary said ``0 ok``, exit 0;
    - ``interval()`` under any sweeper but Optuna's (``hydra/sweeper=optuna_objective``): the basic,
      batched and tune sweepers list values, and Hydra stopped with "BasicSweeper does not support
      sweep type : INTERVAL_SWEEP" in a traceback, exit 1.

    A ``+sweep=`` file or another ``--config-name`` may pick another sweeper: an interval is then left
    to Hydra. ``range()`` and choice values are checked as values (:func:`flopsweep.overrides.type_problem`,
    :func:`flopsweep.value_sets.value_set_problem`: ``seed=range(1.5,3.5,0.5)`` is no whole number)."""
    from hydra.core.override_parser.types import Glob, IntervalSweep

    from flopsweep.override_parsing import parsed_or_none

    if not is_multirun(argv):
        return None  # sweep_without_m_problem's
    overrides = overrides_of(argv)
    given = {k.lstrip("+"): v.strip().strip("'\"") for k, _, v in (o.partition("=") for o in overrides)}
    other_config = "sweep" in given or any(a.startswith(("-cn", "--config-name")) for a in argv)
    optuna = given.get("hydra/sweeper", "").startswith("optuna")
    for text in overrides:
        if (o := parsed_or_none(text)) is None:  # syntax_problem's
            continue
        key, value = o.key_or_group, o.value()
        is_group = "/" in key or ("." not in key and os.path.isdir(os.path.join(CONF, key)))
        if isinstance(value, Glob) and not is_group and not key.startswith("hydra"):
            return (
                f"Invalid config: {text}: glob() picks the option files of a config group, and {key} is a "
                f"key, so the sweep would run no job. Fix: list its values, e.g. {key}=1,2,3 or "
                f"{key}=range(1,4) (a glob fits a group: precision=glob(fp*))."
            )
        if not isinstance(value, IntervalSweep):
            continue
        whole = whole_interval_problem(key, value, overrides)
        if optuna and whole:
            return f"Invalid config: {text}: {whole[0]}. Fix: {whole[1]}."
        if not optuna and not other_config:
            ends = f"{key}={interval_end(value.start, whole, up=True)},{interval_end(value.end, whole)}"
            sampled = f"'{whole[1]}' with" if whole else "add"
            return (
                f"Invalid config: {text}: interval() is a range for Optuna to sample, and the "
                f"{given.get('hydra/sweeper', 'basic_batched')} sweeper runs listed values only. Fix: list "
                f"values, e.g. {ends} (its ends), or {sampled} hydra/sweeper=optuna_objective."
            )
    return None


def whole_interval_problem(key: str, value: object, overrides: list[str]) -> tuple[str, str] | None:
    """(why, fix) for ``interval()`` of a whole-number key (``batch.micro_batch_size=interval(1,4)``):
    Optuna samples a float from it (2.78...) and Hydra then refused merging the float into the integer
    key, a traceback per trial. ``int(interval(1,4))`` samples whole numbers; the fix is that override.
    None: a float key, an interval cast to ``int`` already, or a key no schema has (Hydra's)."""
    from omegaconf.nodes import IntegerNode

    from flopsweep.override_schema import schema_node

    found = schema_node(key, overrides)
    if found is None or not isinstance(found[0], IntegerNode):
        return None
    if isinstance(value.start, int) and isinstance(value.end, int):
        return None  # int(interval(...)): Optuna samples integers
    fix = f"{key}=int(interval({interval_end(value.start, True, up=True)},{interval_end(value.end, True)}))"
    return f"{key} is a whole number and interval() samples floats (e.g. 2.78)", fix


def interval_end(end: float, whole: object, *, up: bool = False) -> str:
    """An interval's end as an override writes it: for a whole-number key a whole number inside it
    (``1``; ``up``: the start, 1.5 -> 2), else :func:`flopsweep.config.typed_form`'s float (``0.0001``)."""
    if whole:
        return str(math.ceil(end) if up else math.floor(end))
    return typed_form(float(end))
