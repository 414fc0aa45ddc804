"""A plan's keys (and ``predict.calibration``'s path) on the command line, checked before Hydra starts
(``run.py``'s :func:`refusal`, exit 2, one line): what the job would refuse in one line too, but after
Hydra had made the run's folder (``outputs/<date>/<time>/`` with ``.hydra`` and an empty ``run.log``, or
``multirun/<date>/`` for a sweep), where the user stood. The job checks them all again (a value from a
``+sweep`` file, an interpolation, ``here``): the same lines, from the same functions
(:func:`flopsweep.clusters.parse_cluster`, :func:`flopsweep.job.plandecide.named_clusters`,
:func:`flopsweep.gpu_memory.planned_gpu_bytes`, :meth:`flopsweep.space.Space.from_config`,
:func:`flopsweep.rules.planned_gpu_on_the_cpu`, :func:`flopsweep.calibration_files.check_calibration_path`);
``here`` where this machine surely has no GPU (:func:`flopsweep.local_gpus.no_gpu_here`, torch-free).

Torch-free; :mod:`flopsweep.job.plandecide` (about 0.15 s to import) only when the command line names
``plan_clusters`` or a ``space.*`` key.
"""

from __future__ import annotations

import dataclasses
import math

from flopsweep.choices import require_choice
from flopsweep.cli import LOCAL_LAUNCHERS
from flopsweep.config import ConfigError, ParallelConfig
from flopsweep.limits import PLAN_FORMATS
from flopsweep.override_parsing import override_key, split_override, typed_values
from flopsweep.override_schema import sweep_values
from flopsweep.peaks import lookup
from flopsweep.space_values import DECIDED_BY, SPACE_KEYS

ONE_VALUE_KEYS = {
    "plan": (
        "is swept: a sweep is a plan or a run, not both (the plan's jobs start no worker)",
        "give it one value: plan=true, or drop it to measure",
    ),
    "plan_format": (
        "is swept: every job of a plan sweep prints into one table, in one format (each value's rows twice)",
        "give it one value, e.g. plan_format=csv",
    ),
}
"""Keys a sweep cannot sweep, each with why and the fix: one ``plan.csv`` and one printed plan per sweep."""


def _gpu_problem(gpus: list, memories: list) -> None:
    """Raise the :class:`ConfigError` of a ``plan_gpu`` or ``plan_gpu_memory_gib`` value that
    :func:`flopsweep.gpu_memory.planned_gpu_bytes` refuses: a name the peak table does not know, a size
    the device is not sold in or none where it comes in several (unless ``plan_gpu_memory_gib`` is
    given: it names the memory), a memory that is not a positive finite number of GiB."""
    from flopsweep.gpu_memory import planned_gpu_bytes

    for gpu in gpus:
        if gpu is None or not str(gpu).strip() or "${" in str(gpu):
            continue  # plan_gpu='' and null are unset
        if isinstance(gpu, list | dict):
            continue  # plan_gpu=[H100]: a list for one name, overrides.type_problem's line
        try:
            planned_gpu_bytes(str(gpu), None)
        except ConfigError:
            if not (memories and lookup(str(gpu)) is not None):
                raise
    for memory in memories:
        if isinstance(memory, int | float) and not isinstance(memory, bool):
            planned_gpu_bytes(None, memory)


def _cost_problem(key: str, value: object) -> None:
    """Raise the :class:`ConfigError` validation would for ``cost.usd_per_gpu_hour`` or ``budget.tokens``
    (:func:`flopsweep.checks.check_bounds`, ``validate_cost``): no number, not finite, a price below 0,
    a token count below 1 or not whole (0.5). null is unset; an interpolation is Hydra's."""
    example = "2.5" if key.startswith("cost") else "15e12"
    if value is None or (isinstance(value, str) and ("${" in value or value.strip().lower() in ("", "none"))):
        return
    if isinstance(value, str):  # quoted ('2.5'): OmegaConf converts it to the float key's number
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(key, value, "is not a number", f"set e.g. {key}={example}, or {key}=null")
    if not math.isfinite(value):
        raise ConfigError(key, value, "must be a finite number", f"set e.g. {key}={example}, or {key}=null")
    if key.startswith("cost") and value < 0:
        raise ConfigError(
            key,
            value,
            "must be >= 0 US dollars",
            "set e.g. cost.usd_per_gpu_hour=2.5 (your price per GPU-hour), or cost.usd_per_gpu_hour=null",
        )
    if key.startswith("budget") and (value < 1 or not float(value).is_integer()):  # 0.5: session 37
        raise ConfigError(
            key,
            value,
            "must be a whole number of tokens >= 1",
            "set e.g. budget.tokens=15e12, or budget.tokens=null",
        )


def _space_problem(given: dict[str, object]) -> None:
    """Raise the :class:`ConfigError` of a ``space.*`` value that :meth:`flopsweep.space.Space.check`
    refuses (an unknown backend, layout, policy or precision, an empty entry, a micro batch below 1, a
    headroom outside [0, 1)) or a ``space.top`` below 1; the others at their defaults. A value of the
    wrong type is left to :func:`flopsweep.overrides.type_problem`'s line."""
    from flopsweep.config import SpaceConfig
    from flopsweep.space import Space

    lists = {k: v for k, v in given.items() if k not in ("top", "min_headroom")}
    if any(not isinstance(v, list) or any("${" in str(x) for x in v) for v in lists.values()):
        return  # a value of another type: type_problem's line; an interpolation: Hydra's
    headroom = given.get("min_headroom", 0.1)
    if not isinstance(headroom, int | float) or isinstance(headroom, bool):
        return
    try:
        Space.from_config(SpaceConfig(**lists, min_headroom=headroom))
    except ConfigError:
        raise
    except (TypeError, ValueError, OverflowError):  # space.micro_batches=[a] or [1e400]: type_problem's
        return
    top = given.get("top", 5)
    if isinstance(top, int) and not isinstance(top, bool) and top < 1:
        raise ConfigError("space.top", top, "must be at least 1", "set e.g. space.top=5")


def command_line_problem(overrides: list[str]) -> str | None:
    """The one line ``run.py`` refuses a plan's keys with before Hydra starts (whose own messages are
    several lines, and whose run folder a refusal in the job would leave behind), or None:

    - ``plan_clusters`` given as one name instead of a list, as an empty list (``[]`` planned the one
      job instead, silently), swept with ``null`` beside a list (``null,[H100:8]``: the two plans' rows
      are of other columns, one ``plan.csv`` holds one kind), or with an entry
      :func:`flopsweep.clusters.parse_cluster` refuses
      (``8xH100:100gbps``, ``H999:8``, a bad price: ``H100:8@-1``), an empty entry, or one cluster twice
      (:func:`flopsweep.job.plandecide.named_clusters`; ``here`` is left to the job: it asks torch);
    - a ``space.*`` value a plan or the tuner refuses, with ``plan_clusters`` or ``hydra/sweeper=tune``
      (the value shown as typed: ``[null]``, ``[1e30]``), and ``compile`` beside a ``space.compile`` list;
    - ``plan_gpu`` naming no device of the peak table (the known names listed,
      :func:`flopsweep.gpu_memory.typed_gpu_names`), or a size it is not sold in; ``plan_gpu_memory_gib``
      that is not a positive finite number of GiB;
    - ``cost.usd_per_gpu_hour`` or ``budget.tokens`` that is no number, not finite, or out of range;
    - a ``plan_format`` that is none of :data:`flopsweep.limits.PLAN_FORMATS`; ``plan`` or ``plan_format``
      swept (``plan_format=csv,json``: each job's rows twice, printed in one format; :data:`ONE_VALUE_KEYS`);
    - ``plan=true`` with ``plan_gpu`` (or ``plan_gpu_memory_gib``) and ``device=cpu``
      (:func:`flopsweep.rules.planned_gpu_on_the_cpu`);
    - a ``predict.calibration`` path, of any run, that does not exist, is a link, or is neither a file nor a
      folder, or holds no record that may calibrate (:func:`flopsweep.calibration_files.calibration_records`).

    Each value of a sweep is checked; an interpolation is left to Hydra and the job.
    """
    from flopsweep.cluster_prices import sizes_written
    from flopsweep.lookalike import list_text
    from flopsweep.override_parsing import parsed_or_none

    values: dict[str, list] = {}
    typed: dict[str, str] = {}  # a key's one value as typed, where it holds a float (1e30)
    for override in overrides:
        _, key, value = split_override(override)
        if "=" not in override or override.startswith("-"):
            continue
        typed.pop(key, None)
        if key == "plan_clusters" and value.replace(" ", "").strip("'\"") == "[]":
            return str(
                ConfigError(
                    key,
                    value,
                    "names no cluster (an empty list would plan the one job instead)",
                    "name one, e.g. plan_clusters=[H100:8x8], or drop plan_clusters for the one-row plan",
                )
            )
        if key == "plan_clusters" and (meant := list_text(value)) and not value.strip().startswith("["):
            return str(
                ConfigError(
                    key,
                    value,
                    "is one string, not a list (its quotes make it one)",
                    f"{key}={sizes_written(meant)}",
                )
            )
        if (
            key == "plan_clusters"
            and value.strip().lower() != "null"  # overrides.type_problem's
            and not value.strip().startswith("[")
            and "," not in value
            and "$" not in value
        ):
            return str(
                ConfigError(
                    key,
                    value,
                    "is one name, not a list",
                    f"write a list: plan_clusters=[{_misread_gpu(sizes_written(value.strip()))}",
                )
            )
        if (parsed := parsed_or_none(override)) is None:
            continue  # the grammar's own line (syntax_problem) comes first
        if key in ONE_VALUE_KEYS and parsed.is_sweep_override():
            return str(ConfigError(key, value, *ONE_VALUE_KEYS[key]))
        values[key] = sweep_values(parsed)  # a glob, a range: none (Hydra's)
        one = values[key][0] if len(values[key]) == 1 else None
        if any(isinstance(v, float) for v in (one if isinstance(one, list) else [one])):
            typed[key] = value.strip()  # a number written as a float: Python writes it otherwise
        elif not key.startswith("space."):
            typed[key] = value.strip()  # '1e400', 1,1e400: the job's float key reads each as a float
    try:
        _keys_problem(values)
    except ConfigError as exc:
        shown = typed.get(exc.key)
        if shown is not None and isinstance(exc.value, float):  # 1e400, not inf; one value of a sweep
            shown = next((w for w in shown.split(",") if _same_number(w, exc.value)), None)
        if shown is not None and (exc.key.startswith("space.") or isinstance(exc.value, float)):
            return str(ConfigError(exc.key, exc.value, exc.problem, exc.fix, shown.strip().strip("'\"")))
        return str(exc)  # the job's line (Space.check shows a list as typed: [ddp,nope])
    return None


def _same_number(text: str, value: float) -> bool:
    """Whether ``text`` (one value of an override as typed, quotes aside) is the number ``value``, nan too."""
    try:
        number = float(text.strip().strip("'\""))
    except ValueError:
        return False
    return number == value or (math.isnan(number) and math.isnan(value))


def _calibration_problem(paths: list) -> None:
    """Raise the job's :class:`ConfigError` for a ``predict.calibration`` path that does not exist, is a
    link or is neither a file nor a folder (:func:`flopsweep.calibration_files.check_calibration_path`,
    then the job's read of what it holds, :func:`flopsweep.calibration_files.calibration_records`: a
    file that is no record, a folder that holds none that may calibrate). null, empty and an interpolation
    are left out."""
    from flopsweep.calibration_files import calibration_records, check_calibration_path, log

    named = [
        p for p in paths if isinstance(p, str) and p.strip() and "${" not in p and p.strip().lower() != "null"
    ]
    for path in named:  # each path's own kind first: no file read while another path is missing
        check_calibration_path(path)
    for path in named:
        was, log.disabled = log.disabled, True  # its skipped files are the job's to warn of, once
        try:
            calibration_records(path)  # the job's read: a corrupt, huge or too deep record, not JSON
        finally:
            log.disabled = was


def _plan_gpu_on_the_cpu(values: dict[str, list]) -> None:
    """Raise :func:`flopsweep.rules.planned_gpu_on_the_cpu`'s :class:`ConfigError` for ``plan=true`` with
    ``plan_gpu`` (or ``plan_gpu_memory_gib``) and ``device=cpu``, any value of a sweep of each."""
    if True not in values.get("plan", ()) or "cpu" not in values.get("device", ()):
        return
    from types import SimpleNamespace

    from flopsweep.rules import planned_gpu_on_the_cpu

    for key in ("plan_gpu", "plan_gpu_memory_gib"):
        for value in values.get(key, ()):
            if key == "plan_gpu_memory_gib":  # a float key: 80 is 80.0 to OmegaConf; 'abc' is type_problem's
                try:
                    value = None if isinstance(value, bool) or value is None else float(value)
                except (TypeError, ValueError):
                    continue
            if value is not None and str(value).strip() and "${" not in str(value):
                cfg = {"plan_gpu": None, "plan_gpu_memory_gib": None, key: value}
                planned_gpu_on_the_cpu(SimpleNamespace(plan=True, device="cpu", **cfg))


def _keys_problem(values: dict[str, list]) -> None:
    """Raise the first refusal of :func:`command_line_problem` among the parsed ``values`` of each key."""
    _calibration_problem(values.get("predict.calibration", []))
    _plan_gpu_on_the_cpu(values)
    for key in ("cost.usd_per_gpu_hour", "budget.tokens"):
        for value in values.get(key, ()):
            _cost_problem(key, value)
    for value in values.get("plan_format", ()):
        if not (isinstance(value, str) and "${" in value):
            require_choice("plan_format", str(value).strip(), PLAN_FORMATS)
    memories = [v for v in values.get("plan_gpu_memory_gib", ()) if v is not None]
    _gpu_problem(values.get("plan_gpu", []), memories)
    clusters = [v for v in values.get("plan_clusters", ()) if isinstance(v, list)]
    if clusters and None in values.get("plan_clusters", ()):  # one table cannot hold both plans' rows
        raise ConfigError(
            "plan_clusters",
            ",".join("null" if v is None else f"[{','.join(map(str, v))}]" for v in values["plan_clusters"]),
            "sweeps a plan over clusters beside the one-row plan (null), whose rows one plan.csv cannot hold",
            "give every job of the sweep a cluster list, or plan each way in its own sweep",
        )
    # space.compile, not compile: the bare key (compile=true after space.compile=[...]) took its place
    space = {
        k.removeprefix("space."): v
        for k, v in values.items()
        if k.startswith("space.") and k[6:] in SPACE_KEYS
    }
    if not (clusters or (space and values.get("hydra/sweeper") == ["tune"])):
        return
    from flopsweep.clusters import gpu_of
    from flopsweep.job.plandecide import named_clusters
    from flopsweep.local_gpus import no_gpu_here

    inter = [v for v in values.get("predict.inter_node_gbps", ()) if isinstance(v, int | float)]
    names_here = any(gpu_of(n).lower() == "here" for names in clusters for n in names)
    here = ("", 0) if names_here and no_gpu_here() else None  # else torch's, in the job
    named = [
        named_clusters(list(names), gbps, before_hydra=True, here=here)
        for names in clusters
        for gbps in inter or [None]
    ]
    for choice in _combinations(space):
        _space_problem(choice)
    _placed_problem(named, space, values)
    _compile_problem(values, space, "a plan" if clusters else "a tuning sweep")
    _decided_problem(values, "a plan over plan_clusters" if clusters else "a tuning sweep over space.*")
    if clusters:
        _unplanned_problem(values)
    else:
        _tuned_search_problem(values)


def _placed_problem(named: list[list], space: dict[str, list], values: dict[str, list]) -> None:
    """Raise :func:`flopsweep.job.plandecide.placed_nowhere_problem`'s line for each value of
    ``space.layouts`` (the others at their first values) that no cluster of a ``plan_clusters`` list
    places, or whose every layout the rules refuse for a model (``[ep2]``, a dense model), its fix the
    layouts each model of the command line takes
    (:func:`flopsweep.layout_fit.command_line_models`); a value of another type, or an interpolation, is
    left to the lines that say so, and a model only Hydra can compose (``model=hf``) to the job's check."""
    from flopsweep.config import SpaceConfig
    from flopsweep.job.plandecide import placed_nowhere_problem
    from flopsweep.layout_fit import command_line_models
    from flopsweep.space import Space

    first = {k: v[0] for k, v in space.items() if v and k not in ("top",)}
    cfg: object = False  # read once
    for layouts in space.get("layouts", []):
        lists = {**first, "layouts": layouts}
        try:
            built = Space.from_config(SpaceConfig(**lists))
        except (ConfigError, TypeError, ValueError, OverflowError):
            continue  # _space_problem's line, or type_problem's
        for clusters in named:
            shown = f"[{','.join(map(str, layouts))}]" if isinstance(layouts, list) else None
            on = [c for c in clusters if c.gpus_per_node]
            cfg = command_line_models(values) if cfg is False else cfg
            if cfg is not None:  # else the job's check, which has the model Hydra composed
                placed_nowhere_problem(built, on, shown, cfg)


def _shown(value: object) -> str:
    """A parsed value as typed (``true``, ``null``, ``4``)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _decided_problem(values: dict[str, list], reader: str) -> None:
    """Raise the :class:`ConfigError` of a key of :data:`flopsweep.space_values.DECIDED_BY` given beside a
    plan over ``plan_clusters`` or a ``space.*`` tuning sweep, whose set-ups set it from a ``space.*``
    list (``backend=ddp``: the plan ranked fsdp set-ups, exit 0, the key ignored), with the list to write:
    the value's own where :func:`_listable`, else an example (``parallel.tp=null``, ``=0``, an
    interpolation ``${steps.measure}``: refused too, the set-ups ignored it). A ``parallel.*`` degree at
    its data-parallel default (:data:`DATA_PARALLEL`: what every set-up of ``space.layouts=[dp]`` sets) is
    no conflict. A degree in a ``parallel`` mapping (``'parallel={tp:2}'``, a sweep file's axis
    ``parallel: "{tp:2},{pp:2}"``) is that ``parallel.*`` key's value."""
    merged = {k: list(v) for k, v in values.items()}
    for mapping in values.get("parallel", ()):
        for field, value in mapping.items() if isinstance(mapping, dict) else ():
            merged.setdefault(f"parallel.{field}", []).append(value)
    for key, (space_key, written) in DECIDED_BY.items():
        given = [v for v in merged.get(key, ()) if _shown(v) != DATA_PARALLEL.get(key)]
        if not given:
            continue
        why = f"{reader} takes it from {space_key} (each set-up sets its own {key})"
        if all(_listable(key, v) for v in given):
            listed = ",".join(dict.fromkeys(written.format(_shown(v)) for v in given))
            fix = f"drop {key} and give it as {space_key}=[{listed}]"
        else:  # null, 2.0, abc, 0, ${steps.measure}: no value of the list; the fix names none of them
            example = f"{space_key}={EXAMPLES[space_key]}"
            fix = f"drop {key} and list the set-ups' values in {space_key}, e.g. {example}"
        raise ConfigError(key, given[0], why, fix, ",".join(_shown(v) for v in given))


EXAMPLES = {"space.layouts": "[dp,tp2]", "space.micro_batches": "[1,2,4,8]"}
"""A list of each ``space.*`` key whose values a refused degree or micro batch is written in, for a fix
that names no value of the command line's (``parallel.tp=null``: no ``[tpnull]``)."""


def _listable(key: str, value: object) -> bool:
    """Whether ``value`` of ``key`` (:data:`flopsweep.space_values.DECIDED_BY`) may be written in its
    ``space.*`` list as is: a degree or micro batch that is a whole number at least 1 (``parallel.dp_shard``
    also -1), an option of ``backend``, ``precision``, ``activation_checkpointing`` with no interpolation."""
    if isinstance(value, str) and "${" in value:
        return False
    if key.startswith("parallel.") or key == "batch.micro_batch_size":
        whole = isinstance(value, int) and not isinstance(value, bool)
        return whole and (value >= 1 or (key == "parallel.dp_shard" and value == -1))
    return isinstance(value, str) and bool(value.strip())


DATA_PARALLEL = {
    f"parallel.{f.name}": str(f.default)
    for f in dataclasses.fields(ParallelConfig)
    if f"parallel.{f.name}" in DECIDED_BY
}
"""The ``parallel.*`` defaults (:class:`flopsweep.config.ParallelConfig`), as typed: restating one beside a
space is no conflict with its layouts."""


UNPLANNED = {
    "batch": (
        "auto",
        "it predicts each set-up at the micro batches of space.micro_batches, and searches none",
        "list them: space.micro_batches=[1,2,4,8]",
    ),
    "search.model": (
        "largest",
        "it ranks set-ups of the model given, and searches no size",
        "name the model: model=llama3.1-8b",
    ),
}
"""Keys whose value a plan over ``plan_clusters`` cannot use at all (it predicts, runs no search) ->
(that value, why, what to write instead)."""


def _searched(key: str, values: dict[str, list]) -> str | None:
    """The first value of ``key`` (``batch`` or ``search.model``) among ``values`` that starts a search,
    as typed: an option of ``batch`` of kind ``auto`` (``auto``, ``auto/max16``), ``largest``; else None."""
    from flopsweep.override_schema import option_kind

    for value in values.get(key, ()):
        if (
            key == "batch"
            and isinstance(value, str)
            and "${" not in value
            and option_kind(key, value) == "auto"
        ):
            return value
        if value == UNPLANNED[key][0]:
            return str(value)
    return None


def _unplanned_problem(values: dict[str, list]) -> None:
    """Raise the :class:`ConfigError` of ``batch=auto`` (or ``auto/max16``) or ``search.model=largest``
    beside ``plan_clusters`` (:data:`UNPLANNED`): the plan ranked its set-ups without them, exit 0."""
    for key, (_, why, instead) in UNPLANNED.items():
        if (value := _searched(key, values)) is not None:
            raise ConfigError(
                key,
                value,
                f"a plan over plan_clusters cannot use it ({why})",
                f"drop {key}={value} and {instead}, or drop plan_clusters for the one-row plan",
                value,
            )


def _tuned_search_problem(values: dict[str, list]) -> None:
    """Raise the :class:`ConfigError` of ``batch=auto`` (or ``auto/max16``) or ``search.model=largest``
    beside a ``space.*`` tuning sweep (the latter: each job grew its own model, the tuner ranked set-ups
    measured on different models). Of ``batch=auto``: each set-up's job searched the largest micro batch
    that fits from the one ``space.micro_batches`` gave it and measured there, so the tuner ranked
    set-ups under micro batches they were not measured at (``space.micro_batches=[1,2]``: both measured
    at 256 on the CPU, the winner named ``batch.micro_batch_size=2``)."""
    if (value := _searched("batch", values)) is not None:
        raise ConfigError(
            "batch",
            value,
            "a tuning sweep over space.* gives each set-up its micro batch from space.micro_batches, which "
            f"batch={value} replaces with the largest that fits (each set-up measured there, ranked under "
            "the micro batch it was given)",
            f"drop batch={value} and list the micro batches: space.micro_batches=[1,2,4,8], or drop the "
            f"space.* overrides to tune the sweep's axes with batch={value}",
            value,
        )
    if (value := _searched("search.model", values)) is not None:
        models = [str(v) for v in values.get("model", ()) if isinstance(v, str) and "${" not in v]
        name = f"model={models[0]}" if len(models) == 1 else "a model, e.g. model=gpt-tiny"
        raise ConfigError(
            "search.model",
            value,
            "a tuning sweep over space.* ranks set-ups measured on one model, which search.model="
            f"{value} replaces with the largest each set-up fits (each job grows its own model)",
            f"drop search.model={value} to tune {name}",
            value,
        )


def _compile_problem(values: dict[str, list], space: dict[str, list], reader: str) -> None:
    """Raise the :class:`ConfigError` of ``compile`` beside a ``space.compile`` that lists values, which
    sets each set-up's (the tuner refused it in the sweep, after Hydra; the plan ignored it); a value
    of ``compile`` that is no bool is left to :func:`flopsweep.overrides.type_problem`'s line."""
    compiles = values.get("compile", [])
    if not compiles or not all(isinstance(v, bool) for v in compiles):
        return
    if not any(isinstance(v, list) and v for v in space.get("compile", ())):
        return
    given = "[" + ",".join(dict.fromkeys(str(v).lower() for v in compiles)) + "]"
    raise ConfigError(
        "compile",
        compiles[0],
        f"{reader} over space.* takes it from the space (space.compile sets each set-up's compile)",
        f"give it as space.compile={given} in place of both, or drop space.compile to keep the job's own",
        ",".join(str(v).lower() for v in compiles),
    )


def _combinations(space: dict[str, list]) -> list[dict[str, object]]:
    """Each ``space.*`` key with each of its values (a sweep's: ``space.top=0,5``), one key at a time
    against the others' first values: every value is checked, without their product."""
    first = {k: v[0] for k, v in space.items() if v}
    return [first] + [{**first, k: value} for k, vs in space.items() for value in vs[1:]]


def cpu_plan_problem(overrides: list[str]) -> str | None:
    """The job's refusal (:func:`flopsweep.plan.states_error`) of ``plan=true`` on a machine with no GPU
    (:func:`flopsweep.local_gpus.no_gpu_here`) and no GPU named to plan for (``plan_gpu``,
    ``plan_gpu_memory_gib`` and ``plan_clusters`` absent, blank or null), whose one rank's fp32 weights,
    gradients and AdamW states (16 bytes a parameter) exceed this machine's memory: its fix names
    ``plan_gpu=H100``. Only where the command line alone decides it: one ``model=`` option of a family
    built from its YAML, with any ``model.KEY=VALUE`` overrides of one value each merged in as Hydra
    merges them (``model=llama3.1-8b model.n_layer=40``); else None, the job's check: ``model=hf`` (its
    parameters are counted by building the module with torch and transformers), a ``model.*`` sweep,
    interpolation, ``+`` or ``~``, ``+sweep=``, ``nproc_per_node`` over 1, ``nnodes``, ``device`` other
    than ``cpu``/``auto`` or a launcher that runs the jobs elsewhere (``slurm``: its plan is of the GPU
    node's)."""
    typed = typed_values(overrides)
    if typed.get("plan", "").lower() not in ("true", "1", "yes", "y", "on"):
        return None
    if any(typed.get(k, "").lower() not in ("", "null", "~") for k in PLANNED_GPU_KEYS):
        return None
    if (
        any(k in ("sweep", "nnodes") for k in typed)
        or typed.get("device", "auto") not in ("auto", "cpu")
        or typed.get("nproc_per_node", "1") not in ("1", "auto")
        or typed.get("hydra/launcher", "basic") not in LOCAL_LAUNCHERS
    ):
        return None
    model_keys = [o for o in overrides if not o.startswith("-") and override_key(o).startswith("model.")]
    return _states_problem(typed.get("model", "gpt-tiny"), model_keys, typed.get("device", "auto"))


PLANNED_GPU_KEYS = ("plan_gpu", "plan_gpu_memory_gib", "plan_clusters")
"""The keys that name a GPU for ``plan=true`` to plan for, not this machine's."""


def _states_problem(option: str, model_keys: list[str], device: str = "auto") -> str | None:
    """:func:`cpu_plan_problem`'s line for ``model=option`` and its ``model.*`` overrides ``model_keys``
    (one rank), where no GPU is here; ``device`` as typed (``cpu``: the fix drops it)."""
    from flopsweep import hostmem
    from flopsweep.local_gpus import no_gpu_here
    from flopsweep.model_identity import merged_model
    from flopsweep.models import family
    from flopsweep.plan import states_error

    if not option or any(c in option for c in ",${}[]()/") or not no_gpu_here():
        return None
    if (merged := merged_model(option, model_keys)) is None or merged[0].arch == "hf":
        return None
    model, changes = merged
    try:
        need = 16 * family(model).n_params(model)
    except Exception:  # noqa: BLE001 - an option this cannot count is the job's to refuse
        return None
    host = hostmem.total_bytes()
    if host is None or need <= host:
        return None
    changes_typed = " ".join(f"model.{k}={_shown(v)}" for k, v in changes.items())
    name = str(getattr(model, "name", option))
    return str(
        states_error(name, need, 1, host, plan=True, shard=False, changes=changes_typed, device_given=device)
    )


def _misread_gpu(name: str) -> str:
    """A cluster name, then ``]``, with its GPU as meant where a letter was read as a digit (``H2OO:1x8``:
    ``H200:1x8] ('O' is a letter, not the digit '0')``, :func:`flopsweep.lookalike.misread`), so that the
    list the fix writes is accepted."""
    from flopsweep.gpu_memory import typed_gpu_names
    from flopsweep.lookalike import misread

    gpu = name.split(":")[0]
    slip = misread(gpu, typed_gpu_names()) if gpu and lookup(gpu) is None else None
    return f"{name.replace(gpu, slip[0], 1)}] ({slip[1]})" if slip else f"{name}]"
