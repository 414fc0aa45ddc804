"""``hydra/sweeper=tune``: the tuner. It prunes the sweep's space by the rules and the memory
estimate, ranks the rest by the step-time prediction, measures the most promising set-ups with
ordinary flopsweep jobs through the launcher, refits the prediction on what it measured, drops the
losers by successive halving (more ``repeat=`` rounds for the survivors) and stops at a GPU-time
budget (docs/tuning.md).

``conf/hydra/sweeper/tune.yaml`` names :class:`TuneSweeper` as its ``_target_`` (Hydra instantiates
plugins only from the ``hydra_plugins`` namespace, and imports every module there at start-up:
nothing heavy is imported here before a sweep starts). The space is Hydra's basic sweeper's (the
command line's sweep axes and ``hydra.sweeper.params``, in the order that sweeper would run them);
the decisions are :mod:`flopsweep.tune`'s, the report :mod:`flopsweep.tunereport`'s. Every job is an
ordinary flopsweep job (its folder ``hydra.sweep.dir/N``, its record, its place in ``resume=true``);
a job's ``repeat=K`` and ``repeats=R`` are the overrides the basic sweeper's ``repeats=`` gives, so
the analysis pools a set-up's runs into one row with an interval over repeats. Torch-free.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

TARGET = "hydra_plugins.flopsweep_tune.TuneSweeper"
"""The ``_target_`` of ``conf/hydra/sweeper/tune.yaml``."""

SPACE_KEY_OF = {
    "backend": "space.backends=[...]",
    "activation_checkpointing": "space.checkpointing=[...]",
    "precision": "space.precisions=[...]",
    "batch.micro_batch_size": "space.micro_batches=[...]",
    "parallel.dp_replicate": "space.layouts=[...] (hsdp)",
    "parallel.dp_shard": "space.layouts=[...] (hsdp)",
    "parallel.tp": "space.layouts=[...] (tpN)",
    "parallel.pp": "space.layouts=[...] (ppN)",
    "parallel.cp": "space.layouts=[...] (cpN)",
    "parallel.ep": "space.layouts=[...] (epN)",
    "compile": "space.compile=[...]",
}
"""A key a ``space.*`` tuning sweep sets -> the ``space.*`` key that takes its values instead."""


def _param_problem(
    name: str,
    value: Any,
    *,
    least: float,
    default: Any,
    whole: bool = True,
    above: bool = False,
    typed: Sequence[str] | None = None,
) -> str | None:
    """One line refusing a sweeper parameter that is not a number of at least ``least`` (``above``:
    over it) and at most :data:`flopsweep.limits.MAX_INT` (a count) or :data:`flopsweep.limits.MAX_FLOAT`
    (as the run config's keys are), its fix the parameter's default; a ``whole`` one (a count) given
    as a float, even a whole one (``initial=1e3``, ``eta=2.0``), is told to write the int, as a typed
    key of the run's config is (:func:`flopsweep.overrides.type_problem`): the sweeper's keys have no
    schema to convert it. The value is echoed as ``typed`` (the command line's words; None: this process's)
    spelled it (:func:`flopsweep.shown_overrides.typed_value`: ``1e-400``, not ``0``)."""
    from flopsweep.config import typed_form
    from flopsweep.limits import MAX_FLOAT, MAX_INT
    from flopsweep.shown_overrides import typed_value

    said = typed_value(f"hydra.sweeper.{name}", value, typed)

    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    inside = ok and (value > least if above else value >= least)
    most = MAX_INT if whole else MAX_FLOAT
    if inside and value > most:  # eta=1e30: the fix wrote a 31-digit int; the run config's bounds
        shown = most if whole else typed_form(float(most))
        return (
            f"Invalid config: hydra.sweeper.{name}={said}: must be at most {shown}. "
            f"Fix: set hydra.sweeper.{name}={default} (its default), or another such value."
        )
    if inside and not whole:
        return None
    if inside and isinstance(value, int):
        return None
    if inside and float(value).is_integer():  # initial=1e3: a count, told as a typed key's 1e3 is
        return (
            f"Invalid config: hydra.sweeper.{name}={said if said != typed_form(value) else repr(value)}: "
            "is a whole number written as a float. "
            f"Fix: write it without a point or exponent: hydra.sweeper.{name}={int(value)}."
        )
    kind = "a whole number" if whole else "a finite number"
    bound = f"above {typed_form(least)}" if above else f"of at least {typed_form(least)}"
    return (
        f"Invalid config: hydra.sweeper.{name}={said}: must be {kind} {bound}. "
        f"Fix: set hydra.sweeper.{name}={default} (its default), or another such value."
    )


PARAMETERS = ("budget_gpu_s", "initial", "eta", "finalists", "memory_gib", "max_batch_size")
"""The parameters :func:`parameter_problem` checks (``hydra.sweeper.NAME=``)."""


def parameter_problem(
    *,
    budget_gpu_s: Any = 3600.0,
    initial: Any = 8,
    eta: Any = 2,
    finalists: Any = 2,
    memory_gib: Any = None,
    max_batch_size: Any = None,
    typed: Sequence[str] | None = None,
) -> str | None:
    """The line refusing the first of the tuner's parameters (:class:`TuneSweeper`'s, their defaults
    here) of the wrong type or out of range, else None: ``budget_gpu_s`` a finite number above 0,
    ``memory_gib`` one or null; ``initial``, ``finalists`` (at least 1), ``eta`` (at least 2) and
    ``max_batch_size`` (at least 1, or null) ints: a float is refused, a whole one (``eta=3.0``,
    ``initial=1e3``) with the int to write; a bool, a string (``'8'``: the sweeper's keys have no schema,
    so nothing converts it) or a list is no number. ``typed``: the command line's words, whose spelling
    the refusal echoes (None: this process's command line)."""
    t, budget = typed, {"least": 0, "default": 3600.0, "whole": False, "above": True}
    return (
        _param_problem("budget_gpu_s", budget_gpu_s, **budget, typed=t)
        or _param_problem("initial", initial, least=1, default=8, typed=t)
        or _param_problem("eta", eta, least=2, default=2, typed=t)
        or _param_problem("finalists", finalists, least=1, default=2, typed=t)
        or (  # max_batch_size=0 raised in range(), below 0 launched no job
            None
            if max_batch_size is None
            else _param_problem("max_batch_size", max_batch_size, least=1, default="null", typed=t)
        )
        or (
            None
            if memory_gib is None
            else _param_problem(
                "memory_gib", memory_gib, least=0, default="null", whole=False, above=True, typed=t
            )
        )
    )


def command_line_problem(overrides: list[str]) -> str | None:
    """The one line ``run.py`` refuses a tuner parameter with before Hydra starts (exit 2), else None:
    with ``hydra/sweeper=tune`` on the command line, a ``hydra.sweeper.NAME=`` of :data:`PARAMETERS`
    that :func:`parameter_problem` refuses (``budget_gpu_s=0``, ``eta=1``), the sweeper's own check. In
    the sweep, Hydra has made the sweep's folder (``multirun/<date>/``) before the sweeper is built; this
    leaves none.
    A value that is a sweep or an interpolation, or a tuner picked by a config file, is left to the
    sweeper, which checks them all again."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    tune, given = False, {}
    for text in overrides:
        if text.startswith("-") or "=" not in text:
            continue
        try:
            o = parser.parse_override(text)
        except Exception:  # noqa: BLE001 - run.py's syntax_problem answers the grammar
            continue
        key = o.key_or_group
        if key == "hydra/sweeper":
            tune = not o.is_sweep_override() and str(o.value()) == "tune"
        name = key.removeprefix("hydra.sweeper.")
        if key.startswith("hydra.sweeper.") and name in PARAMETERS and not o.is_sweep_override():
            value = o.value()
            if not (isinstance(value, str) and "${" in value):
                given[name] = value
    return parameter_problem(**given, typed=overrides) if tune and given else None


def nothing_to_tune_problem(overrides: list[str]) -> str | None:
    """:data:`NOTHING_TO_TUNE` for a command line that picks ``hydra/sweeper=tune`` and gives it no sweep
    axis, no ``space.*`` key, no ``hydra.sweeper.params``, no ``+sweep`` file and no other config (any of
    which may give it set-ups) under ``-m`` (not ``--cfg``, which prints it), else None; ``run.py`` asks
    it after every other check (exit 2)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from flopsweep.flags import is_multirun, prints_only

    if not is_multirun(overrides) or prints_only(overrides):  # --cfg job prints it: nothing is tuned
        return None
    parser = OverridesParser.create()
    tune, space = False, False
    for text in overrides:
        if text.startswith("-") or "=" not in text:
            space = space or text.startswith(("--config-name", "-cn", "--config-dir", "-cd"))
            continue
        try:
            o = parser.parse_override(text)
        except Exception:  # noqa: BLE001 - run.py's syntax_problem answers the grammar
            return None
        key = o.key_or_group
        space = space or _axis(o) or key.startswith(("space.", "hydra.sweeper.params", "sweep"))
        if key == "hydra/sweeper":
            tune = not o.is_sweep_override() and str(o.value()) == "tune"
    return NOTHING_TO_TUNE if tune and not space else None


def _axis(override: Any) -> bool:
    """Whether a parsed override sweeps over more than one value (``seed=range(0,1)``, ``choice(0)``: one);
    an ``interval()`` or a sweep whose values cannot be listed counts as an axis."""
    if not override.is_sweep_override():
        return False
    try:
        return len(set(override.sweep_string_iterator())) > 1
    except Exception:  # noqa: BLE001 - interval(), glob(): the sweeper's to expand
        return True


NOTHING_TO_TUNE = (
    "Invalid config: hydra/sweeper=tune: one set-up, nothing to tune (no sweep axis, no space.* list). "
    "Fix: add sweep axes (backend=ddp,fsdp) or space.* lists, or run it plainly (repeats=3 for an interval)."
)
"""``-m hydra/sweeper=tune`` with no axis, no ``space.*`` key, no ``hydra.sweeper.params``, no ``+sweep``
file and no other config: session 35 ran its one set-up 3 times (the finalists' repeats) and named it the
winner."""


class TuneSweeper(BasicSweeper):
    """Hydra's basic sweeper's space, searched by successive halving (:mod:`flopsweep.tune`).

    Args:
        budget_gpu_s: the GPU-time budget (GPU-seconds, above 0; CPU ranks count as GPUs): no round
            starts whose estimated cost would pass it (the first round always runs). 0 or less, NaN or
            inf is refused before any job (0 was overspent: ``18/0 GPU-s spent``, ``-18 left``).
        initial: how many set-ups round 0 measures (the best predicted that pass the pruning).
        eta: each round keeps the best ``1/eta`` of the pool.
        finalists: halving stops cutting at this many; they are measured ``repeats`` times.
        memory_gib: the memory per rank a set-up must fit by the estimate (GiB); null: the GPU's,
            or on the CPU the host's available memory over the ranks of a node.
        max_batch_size, params: the basic sweeper's (jobs per launch, the space's axes).
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        params: dict[str, str] | None = None,
        budget_gpu_s: float = 3600.0,
        initial: int = 8,
        eta: int = 2,
        finalists: int = 2,
        memory_gib: float | None = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        # as given: sweep() refuses a float count (eta=1e9, which range() took with a TypeError
        # traceback) or any other wrong value with _problem's one line before anything reads it
        self.budget_gpu_s, self.initial, self.eta = budget_gpu_s, initial, eta
        self.finalists, self.memory_gib = finalists, memory_gib

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Hydra's check that every job of ``batch`` composes, each config kept for the launcher
        (:func:`flopsweep.composed_once.check_batch`: composed once, not twice)."""
        from flopsweep.composed_once import check_batch

        check_batch(self, batch)

    def _problem(self) -> str | None:
        return parameter_problem(
            budget_gpu_s=self.budget_gpu_s,
            initial=self.initial,
            eta=self.eta,
            finalists=self.finalists,
            memory_gib=self.memory_gib,
            max_batch_size=self.max_batch_size,
        )

    def _report_files_problem(self) -> str | None:
        """The refusal of a sweep folder holding a ``tune.json`` or ``tune.md`` this tuner did not make
        (:func:`flopsweep.folders.plan_file_problem`), on the folder Hydra resolved: ``run.py`` checks the
        command line's ``hydra.sweep.dir`` before Hydra, and an interpolation's (``${oc.env:DIR}``) or a sweep
        file's had run every job, then replaced a user's link by the report, exit 0 (docs/reliability-10.md
        #605)."""
        import os

        from flopsweep.folders import plan_file_problem
        from flopsweep.tunereport import JSON_FILE, MARKDOWN_FILE

        folder = str(self.sweep_dir)
        files = (JSON_FILE, MARKDOWN_FILE)
        return plan_file_problem("hydra.sweep.dir", folder, os.path.abspath(folder), files, "a tuner")

    def sweep(self, arguments: list[str]) -> Any:
        """Tune over the space of ``arguments`` and ``hydra.sweeper.params``; prints one line per
        round and the report, and writes ``tune.json`` and ``tune.md`` in the sweep folder. A
        parameter or a ``space.*`` value out of range stops it with one line, exit 2 (a config error,
        as ``run.py``'s refusals); a ``multirun.yaml`` or a report that cannot be written, exit 1.
        ``multirun.yaml`` is written once a set-up is left to measure (:meth:`Tuning.run`): a space
        pruned to nothing leaves no folder behind."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from flopsweep.config import ConfigError
        from flopsweep.files import RecordUnwritable
        from hydra_plugins.flopsweep_tune.tuning import Tuning

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        if problem := self._problem() or self._report_files_problem():  # exit 2, as run.py's refusals
            print(f"flopsweep: {problem.removeprefix('flopsweep: ')}", file=sys.stderr, flush=True)
            raise SystemExit(2)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = parser.parse_overrides(self._parse_config() + list(arguments))
        swept = {o.get_key_element() for o in parsed if o.is_sweep_override()}
        combos = [c for batch in self.split_arguments(parsed, None) for c in batch]
        try:
            space, setups = self.space(parsed, len(combos))
        except ConfigError as exc:
            print(f"flopsweep: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        try:
            tuning = Tuning(self, combos, swept, space, setups)
            return tuning.run()
        except RecordUnwritable as exc:
            print(f"flopsweep: {exc}. Fix: {exc.fix}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None

    def space(
        self, parsed: list[Any], combos: int = 1
    ) -> tuple[Any, tuple[list[Any], tuple[int, int]] | None]:
        """``cfg.space`` checked (:meth:`flopsweep.space.Space.from_config`), the objective checked,
        and with any ``space.*`` override the set-ups of the space placed on this machine
        (:func:`flopsweep.space.placed` on ``nnodes`` x ``nproc_per_node``, ``auto``: its GPUs,
        else 1) with ``(nnodes, ranks per node)``; None without one (the Hydra combinations are the
        set-ups).

        Raises:
            ConfigError: a bad ``space.*`` value or objective; with ``space.*``, more set-ups than
                :data:`flopsweep.space.MAX_SETUPS` (its combinations x ``combos``, the sweep's
                combinations), an override of a key the space sets
                (:data:`flopsweep.space.SETUP_KEYS`; ``compile`` with ``space.compile``) or a sweep
                over ``nproc_per_node`` or ``nnodes``: one line naming the ``space.*`` key to use.
        """
        from flopsweep import objective
        from flopsweep.config import ConfigError
        from flopsweep.local_gpus import gpus_here
        from flopsweep.plan import fixed_nproc
        from flopsweep.space import SETUP_KEYS, Space, placed
        from flopsweep.tune import MIN_HEADROOM

        cfg = self.config
        assert cfg is not None
        space = Space.from_config(cfg.space)
        given = any(o.get_key_element().lstrip("+~") == "space.min_headroom" for o in parsed)
        if not given and space.min_headroom == Space.min_headroom:  # the plan's margin: the tuner measures
            space = dataclasses.replace(space, min_headroom=MIN_HEADROOM)
        objective.direction(str(cfg.get("objective") or objective.DEFAULT))
        if not any(o.get_key_element().lstrip("+~").startswith("space.") for o in parsed):
            return space, None
        for o in parsed:
            key = o.get_key_element().lstrip("+~")
            own = key in SETUP_KEYS or (key == "compile" and bool(space.compile))  # space.compile sets it
            if own or (key in ("nproc_per_node", "nnodes") and o.is_sweep_override()):
                typed = o.input_line.split("=", 1)[-1].strip() if o.input_line else ""
                why = {"compile": "space.compile sets each set-up's compile"}.get(key, "")
                why = why or (
                    "space.layouts: one machine size" if key in ("nproc_per_node", "nnodes") else ""
                )
                raise ConfigError(
                    key,
                    typed,
                    "a tuning sweep over space.* takes it from the space" + (f" ({why})" if why else ""),
                    f"give it as {SPACE_KEY_OF.get(key, 'one fixed value')}, or drop the space.* overrides",
                    shown=typed,
                )
        space.size_problem(max(1, combos), f" over {combos} combination(s) of the sweep's axes")
        nproc = fixed_nproc(str(cfg.nproc_per_node))
        if nproc is None:
            nproc = (len(gpus_here()) if str(cfg.device) != "cpu" else 0) or 1
        nodes = (int(cfg.nnodes), nproc)
        return space, (placed(space, *nodes), nodes)

    @property
    def sweep_dir(self) -> Path:
        assert self.config is not None
        return Path(str(self.config.hydra.sweep.dir))
