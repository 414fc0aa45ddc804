"""The command-line checks of ``run.py`` that read only the overrides (``key=value`` texts as Hydra gets
them): each returns the one line refusing them before Hydra starts (exit 2), else None; ``run.refusal``
runs them with the others. Torch-free."""

from __future__ import annotations

import os
import re
from pathlib import Path

from flopsweep import objective
from flopsweep.cli import COMMAND, LOCAL_LAUNCHERS
from flopsweep.config import ConfigError
from flopsweep.files import RecordUnwritable, check_writable
from flopsweep.flags import is_multirun, prints_only
from flopsweep.free_folder import another, another_writable
from flopsweep.hydrafiles import RUN_FILES_FOLDERS, config_folder_problem, output_folder_problem
from flopsweep.override_parsing import override_key, overrides_of, set_key, split_override, typed_values

_SORT_RANGE = re.compile(r"sort\(\s*range\(([^)]*)\)\s*(?:,\s*reverse\s*=\s*(\w+))?\s*\)", re.IGNORECASE)


def sorted_range_problem(overrides: list[str]) -> str | None:
    """One line refusing ``sort(range(...))`` in a sweep override, with the list to write instead.

    hydra-core 1.3 expands it to other values than Python would (facebookresearch/hydra#3228:
    ``sort(range(1,6,2),reverse=true)`` runs 4, 2, 0 instead of 5, 3, 1), and every record would
    then list a value nobody asked for.
    """
    for override in overrides:
        key, _, value = override.partition("=")
        match = _SORT_RANGE.search(value)
        if not match:
            continue
        try:
            args = [int(a.split("=")[-1]) for a in match.group(1).split(",") if a.strip()]
            values = sorted(range(*args), reverse=(match.group(2) or "false").lower() == "true")
        except (TypeError, ValueError):
            values = None
        fix = (
            f"write the list: {key}={','.join(map(str, values))}" if values else "write the values as a list"
        )
        return (
            f"Invalid config: {override}: hydra-core 1.3 expands sort(range(...)) to other values than asked "
            f"(facebookresearch/hydra#3228). Fix: {fix}."
        )
    return None


def _probe_makedirs(path: str) -> None:
    """Make ``path`` as Hydra would and write a byte in it, then remove what was made: nothing is
    left behind (a launcher may still refuse the sweep), and a path that cannot be made, or is
    read-only or full, raises OSError here, in one line, rather than in Hydra with a traceback."""
    missing = []
    head = os.path.abspath(path)
    while not os.path.exists(head):
        missing.append(head)
        head = os.path.dirname(head)
    os.makedirs(path, exist_ok=True)
    try:
        check_writable(Path(path))
    finally:
        for made in missing:  # deepest first
            os.rmdir(made)


def output_dir_problem(overrides: list[str]) -> str | None:
    """One line refusing an output directory that would put records where they do not belong:
    an empty ``hydra.run.dir`` (the current directory, often the repository), a
    ``hydra.sweep.subdir`` that leaves the sweep directory (``../x``, an absolute path) or enters a run's
    own files, a ``hydra.run.dir`` or ``hydra.sweep.dir`` that is a symbolic link, a FIFO or a file
    (never followed), passes through another user's link (:func:`flopsweep.links.foreign_link`) or lies
    inside a run's own files
    (:func:`flopsweep.hydrafiles.output_folder_problem`), or a
    ``hydra.output_subdir`` (Hydra's own ``.hydra/`` writes follow links: :mod:`flopsweep.hydrafiles`).
    Without a ``hydra.run.dir`` (``hydra.sweep.dir`` with ``-m``), the default folder made here is refused
    inside a folder Hydra reads configs from (:func:`flopsweep.hydrafiles.config_folder_problem`)."""
    for override in overrides:
        _, key, value = split_override(override)
        value = value.strip().strip("'\"")
        if key in ("hydra.run.dir", "hydra.sweep.dir") and value and "${" not in value:
            if problem := output_folder_problem(key, value):  # a link, a FIFO, inside .hydra/
                return problem
            try:
                _probe_makedirs(value)
            except RecordUnwritable as exc:  # made, but read-only or full
                return f"Invalid config: {key}={value}: {exc}. Fix: {exc.fix}, or {another(value, key)}."
            except OSError as exc:
                return (
                    f"Invalid config: {key}={value}: cannot make the directory ({exc.strerror or exc}). "
                    f"Fix: {another_writable(value, key)}."
                )
        if key == "hydra.sweep.dir" and "${hydra:" in value.replace(" ", ""):
            return (
                f"Invalid config: {key}={value}: Hydra makes the sweep's folder before it sets what "
                "${hydra:...} reads, and stops on it with a traceback. Fix: write the folder itself; a "
                f"relative one is taken from the folder you run in (e.g. {key}=multirun/my-sweep)."
            )
        if key in ("hydra.run.dir", "hydra.sweep.dir") and not value:
            return (
                f"Invalid config: {key}='': an empty directory writes the records into the current "
                f"directory. Fix: name a directory, e.g. {key}=outputs/my-run."
            )
        if key == "hydra.output_subdir" and value.lower() not in ("null", "~"):
            return (
                f"Invalid config: {key}={value}: Hydra would write the job's config files there through "
                "any link planted in the directory; flopsweep writes them itself, into .hydra/ "
                "(flopsweep.hydrafiles). Fix: drop the override."
            )
        parts = value.split("/")
        if key == "hydra.sweep.subdir" and (not value or os.path.isabs(value) or ".." in parts):
            return (
                f"Invalid config: {key}={value!r}: each job's directory must stay inside hydra.sweep.dir "
                "(no '..', not absolute), or the summary and resume=true lose its record. "
                "Fix: drop the override (default ${hydra.job.num}), or use a relative name "
                "such as job-${hydra.job.num}."
            )
        if key == "hydra.sweep.subdir" and (inside := set(parts) & set(RUN_FILES_FOLDERS)):
            return (
                f"Invalid config: {key}={value!r}: {min(inside)} is a run's own files; each job's "
                "directory must not lie among them. Fix: drop the override (default ${hydra.job.num})."
            )
    key = "hydra.sweep.dir" if is_multirun(overrides) else "hydra.run.dir"
    if not any(override_key(o) == key and "=" in o for o in overrides):  # the default, in this folder
        default = "multirun" if "sweep" in key else "outputs"
        return config_folder_problem(
            key, f"{default}/... (the default)", os.path.realpath(default), here=True
        )
    return None


_ENV = re.compile(r"\$\{oc\.env:([^,}]+)(,[^}]*)?\}")


def interpolation_problem(overrides: list[str]) -> str | None:
    """One line for an override whose interpolation cannot resolve, before Hydra prints a
    traceback for it: ``${oc.env:NAME}`` of an unset variable with no default, or a key that
    refers to itself (``tag='${tag}'``)."""
    for override in overrides:
        _, key, value = split_override(override)
        for name, default in _ENV.findall(value):
            if default == "" and name.strip() not in os.environ:
                return (
                    f"Invalid config: {key}={value}: environment variable {name.strip()} is not set. "
                    f"Fix: set it, or give a default: ${{oc.env:{name.strip()},default}}."
                )
        if "${" + key + "}" in value:
            return f"Invalid config: {key}={value}: the value refers to itself. Fix: give {key} a value."
    return None


def tag_problem(overrides: list[str]) -> str | None:
    """One line for a ``tag=`` longer than :data:`flopsweep.limits.MAX_TAG_CHARS` (each value of a sweep),
    before Hydra echoes it into the plan table and the job's lines (validation bounds it too)."""
    from flopsweep.limits import MAX_TAG_CHARS
    from flopsweep.override_parsing import override_parser

    for override in overrides:
        _, key, text = split_override(override)
        if key != "tag" or len(text) <= MAX_TAG_CHARS:
            continue
        try:
            parsed = override_parser().parse_override(override)
            values = (
                [str(v) for v in parsed.sweep_string_iterator()]
                if parsed.is_sweep_override()
                else [str(parsed.value())]
            )
        except Exception:  # noqa: BLE001 - the grammar's own line (syntax_problem) comes after
            values = [text]
        for value in values:
            if len(value) <= MAX_TAG_CHARS:
                continue
            return str(
                ConfigError(
                    "tag",
                    value,
                    f"is {len(value)} characters, over the bound of {MAX_TAG_CHARS} (it is copied into every "
                    "record and line)",
                    f"shorten the tag to at most {MAX_TAG_CHARS} characters",
                )
            )
    return None


def objective_problem(overrides: list[str]) -> str | None:
    """One line for an ``objective=`` that names no figure of merit (each value of a sweep), or whose
    figure needs a key the command line leaves unset (:func:`flopsweep.objective.inputs_problem`:
    ``objective=usd_per_million_tokens`` without ``cost.usd_per_gpu_hour``, or with ``plan=true`` and a
    ``plan_clusters`` entry that names no ``@PRICE``), or that a plan over ``plan_clusters`` cannot
    predict (:func:`flopsweep.objective.planned`: ``objective=hfu``), else None. A ``+sweep=`` file may
    set the key: the job's check (:func:`flopsweep.checks.validate`) refuses it then."""
    given = typed_values(overrides)
    files = any(k in ("sweep", "cost", "budget") or "${" in v for k, v in given.items())
    if given.get("plan", "").lower() not in _TRUE:  # the clusters' @PRICEs price a plan's rows alone
        given.pop("plan_clusters", None)
    for override in overrides:
        _, key, values = split_override(override)
        if key != "objective" or "${" in values or "(" in values:
            continue
        for name in values.split(","):
            name = name.strip().strip("'\"")
            try:
                objective.spec_of(name)
            except ConfigError as exc:
                return str(exc)
            if not files and (unset := objective.inputs_problem(name, given)):
                return str(unset)
            clusters = given.get("plan_clusters", "null").lower() not in ("null", "", "[]")
            if not files and clusters:  # a plan ranks its set-ups by a figure it predicts
                try:
                    objective.planned(name)
                except ConfigError as exc:
                    return str(exc)
    return None


_TRUE = ("true", "1", "yes", "y", "on")
"""How a command line may write a boolean's true (OmegaConf's spellings)."""


def plan_conflict_problem(overrides: list[str]) -> str | None:
    """One line for ``plan=true`` beside what measures runs, else None: ``hydra/sweeper=tune`` (its
    plan jobs leave no record, so every set-up read as failed, "no winner", exit 0) or ``repeats=N``
    over 1 (N identical plan rows per job)."""
    values = {key: value.lower() for key, value in typed_values(overrides).items()}
    if values.get("plan") not in _TRUE:
        return None
    if values.get("hydra/sweeper") == "tune":
        return (
            "Invalid config: plan=true: the tuner (hydra/sweeper=tune) measures runs, and a plan runs none "
            "(its set-ups would all read as failed). Fix: drop plan=true (the tuner prunes and predicts "
            "before it measures), or drop hydra/sweeper=tune to plan the sweep's jobs."
        )
    repeats = values.get("repeats", "1")
    from flopsweep.limits import MAX_REPEATS

    if repeats.isdigit() and 1 < int(repeats) <= MAX_REPEATS:  # past the bound: repeats_problem's line
        run = "drop plan=true to run the rounds" + (
            "" if is_multirun(overrides) else " (with -m: they are a sweep's jobs)"
        )
        return (
            f"Invalid config: repeats={repeats}: a plan runs nothing, so its rounds would be {repeats} "
            f"identical rows per job. Fix: drop repeats=, or {run}."
        )
    return None


def plan_folder_problem(overrides: list[str]) -> str | None:
    """One line for ``plan=true`` into a ``hydra.run.dir`` (``hydra.sweep.dir`` with ``-m``) that holds a
    ``plan.csv`` this plan did not make (:func:`flopsweep.folders.plan_file_problem`: a single plan
    replaced it silently, exit 0), or ``hydra/sweeper=tune`` into a ``hydra.sweep.dir`` holding a
    ``tune.json`` or ``tune.md`` it did not make (it replaced them, a link too, exit 0), else None; the
    folder as the command line gives it (a sweep file's, an interpolation's: the callback's same check for a
    plan)."""
    from flopsweep.folders import plan_file_problem

    values = typed_values(overrides)
    key = "hydra.sweep.dir" if is_multirun(overrides) else "hydra.run.dir"
    folder = values.get(key, "")
    if not folder or "${" in folder:
        return None
    path = os.path.abspath(os.path.expanduser(folder))
    if key == "hydra.sweep.dir" and values.get("hydra/sweeper") == "tune":  # its tune.json and tune.md
        from flopsweep.tunereport import JSON_FILE, MARKDOWN_FILE

        return plan_file_problem(key, folder, path, (JSON_FILE, MARKDOWN_FILE), "a tuner")
    if values.get("plan", "").lower() not in _TRUE:
        return None
    return plan_file_problem(key, folder, path)


def repeats_problem(overrides: list[str]) -> str | None:
    """One line for a ``repeats=`` that cannot run: not one whole number from 1 to
    ``MAX_REPEATS``, over 1 without ``-m`` (the rounds are jobs of a sweep) or with another sweeper
    than flopsweep's basic one (``hydra/sweeper=optuna_objective`` runs trials, not rounds), else
    None."""
    from flopsweep.limits import MAX_REPEATS

    multirun = is_multirun(overrides) or prints_only(overrides)  # --cfg job prints: -m --cfg is refused
    for override in overrides:
        _, key, value = split_override(override)
        if key != "repeats" or "${" in value:
            continue
        value = value.strip().strip("'\"")
        if not value.isdigit() or not 1 <= int(value) <= MAX_REPEATS:
            return (
                f"Invalid config: repeats={value}: must be one whole number from 1 to {MAX_REPEATS} "
                "(repeats is not a sweep axis). Fix: set repeats=3."
            )
        if int(value) > 1 and not multirun:
            return (
                f"Invalid config: repeats={value}: the rounds are jobs of a sweep. "
                f"Fix: add -m ({COMMAND} -m repeats={value} ...)."
            )
        sweeper = next((o.partition("=")[2] for o in overrides if o.startswith("hydra/sweeper=")), "")
        # the tuner (hydra/sweeper=tune) takes repeats= as its finalists' runs
        if int(value) > 1 and sweeper and sweeper not in ("basic_batched", "tune"):
            return (
                f"Invalid config: repeats={value}: the rounds come from flopsweep's basic sweeper, not "
                f"hydra/sweeper={sweeper} (its trials are its own). Fix: drop repeats, or the sweeper."
            )
    return None


def repeats_axis_problem(axes: list[str]) -> str | None:
    """One line for ``repeats`` among a sweep file's ``hydra.sweeper.params`` (``axes``, each ``KEY=VALUE``),
    else None: the command line's own check (:func:`repeats_problem`: one whole number from 1 to
    ``MAX_REPEATS``, so ``repeats: 1,2`` and ``20000`` get its line), then a count over 1, which as an axis
    reaches each job as one value the sweeper never expands into rounds (the job refused it: "did not
    expand into rounds of jobs", an ``invalid`` record, exit 0). Its fix is the file's plain value or the
    command line's, which replaces the axis."""
    for axis in axes:
        _, key, value = split_override(axis)
        if key != "repeats":
            continue
        count = value.strip().strip("'\"")
        fix = "out of hydra.sweeper.params (repeats: {n} beside the file's values), or repeats={n} on the "
        fix += "command line"
        if problem := repeats_problem(["-m", axis]):
            return problem.replace("Fix: set repeats=3.", f"Fix: set it {fix.format(n=3)}.")
        if count.isdigit() and int(count) > 1:  # an interpolation is the job's
            return (
                f"Invalid config: repeats={count}: is the count of rounds, not a sweep axis (under "
                "hydra.sweeper.params each job gets it as one value, and no rounds are made). Fix: set it "
                f"{fix.format(n=count)}."
            )
    return None


SLURM_LAUNCHERS = ("slurm", "slurm_local")
"""The ``hydra/launcher`` options that submit through submitit: each needs ``nproc_per_node`` as a number
(:func:`flopsweep.slurm.check_sweep`)."""


def placement_problem(overrides: list[str]) -> str | None:
    """One line for ``nproc_per_node`` or ``nnodes`` as typed that no local run takes, before Hydra makes
    the job's folder (:func:`flopsweep.plan.resolve` refuses each the same way, in the job): a
    ``nproc_per_node`` below 1, or not a number under a Slurm launcher (``auto``, the default:
    :data:`SLURM_LAUNCHERS`); with no launcher that gives nodes (none named, or a local one:
    :data:`LOCAL_LAUNCHERS`), no ``plan=true`` and no ``+sweep=`` file (either may change the answer),
    an ``nnodes`` over 1, or on the CPU (``device=cpu``, or ``auto`` with no GPU here:
    :func:`flopsweep.local_gpus.no_gpu_here`) more ranks than
    :data:`flopsweep.plan.MAX_CPU_RANKS_PER_CORE` per core of this machine. Each value of a
    comma sweep is checked; an interpolation or a sweep function is left to the job."""
    from flopsweep.plan import MAX_CPU_RANKS_PER_CORE
    from flopsweep.text import plural

    typed = typed_values(overrides)
    local = (
        typed.get("hydra/launcher", "basic") in LOCAL_LAUNCHERS
        and typed.get("plan", "false").lower() not in _TRUE
        and "sweep" not in typed
    )
    if (
        typed.get("hydra/launcher") in SLURM_LAUNCHERS
        and "sweep" not in typed
        and not any(c in typed.get("nproc_per_node", "auto") for c in "$(,")
    ):
        from flopsweep.slurm import check_sweep

        try:  # the launcher's own check, which ran after Hydra made the sweep's folder: exit 1
            check_sweep(nproc_per_node=typed.get("nproc_per_node", "auto"), swept=())
        except ConfigError as exc:
            return str(exc)
    device = typed.get("device", "auto")
    on_cpu = device == "cpu" or (device == "auto" and "nproc_per_node" in typed and _no_gpu_here())
    for key in ("nproc_per_node", "nnodes"):
        text = typed.get(key, "")
        if "${" in text or "(" in text:
            continue
        for value in (v.strip() for v in text.split(",")):
            if not value.lstrip("-").isdigit():
                continue  # auto, or a type the type check refuses
            n = int(value)
            if key == "nproc_per_node" and n < 1:
                fix = "set nproc_per_node=auto or a positive integer such as 2"
                return str(ConfigError(key, n, "must be a positive integer", fix))
            if key == "nnodes" and n > 1 and local:
                return str(
                    ConfigError(
                        key,
                        n,
                        "only a Slurm job spans nodes; a local run has one",
                        "set nnodes=1, or run the sweep with -m hydra/launcher=slurm; to plan it here add "
                        "plan=true (predict.nnodes= and predict.gpus_per_node= predict its step on another "
                        "cluster)",
                    )
                )
            cap = MAX_CPU_RANKS_PER_CORE * (os.cpu_count() or 1)
            if key == "nproc_per_node" and n > cap and local and on_cpu:
                return str(
                    ConfigError(
                        key,
                        n,
                        f"starts more CPU ranks than {MAX_CPU_RANKS_PER_CORE} per core "
                        f"({plural(os.cpu_count() or 1, 'core')} here)",
                        f"set nproc_per_node to at most {cap}",
                    )
                )
    return None


def added_key_problem(overrides: list[str]) -> str | None:
    """One line for a ``+key=value`` or ``++key=value`` whose key no schema has, before Hydra makes the
    job's folder; the job refuses it the same way (:func:`flopsweep.checks.validate`), the prefix as typed:

    - a top-level key that is no field of :class:`flopsweep.config.RunConfig`, no config group of ``conf/``
      and not ``hydra`` (``+bogus=1``, ``++bogus=1``), or a key below one (``+bogus.x=1``);
    - a nested key that no typed section has (``++steps.bogus=1``; ``+model.bogus=1``: the schema of each
      option the command line, else conf/config.yaml, picks, and of no other option of the group).

    A key below an untyped section (a mapping of any keys), a key of another option of the group (the job
    names that option), a package (``@``) and ``hydra.`` keys are left alone."""
    import dataclasses

    from flopsweep.config import RunConfig
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.override_schema import CONF, added_key_error, key_schemas, known_keys

    names = [f.name for f in dataclasses.fields(RunConfig)]
    parsed = [o for o in map(parsed_or_none, overrides_of(overrides)) if o]
    for override in overrides:
        plus, key, value = split_override(override)
        if "=" not in override or not plus.startswith("+") or override.startswith("-"):
            continue
        if "/" in key or "@" in key or key.split(".")[0] == "hydra" or os.path.isdir(os.path.join(CONF, key)):
            continue
        top = key.split(".")[0]
        if "." not in key or (top not in names and not os.path.isdir(os.path.join(CONF, top))):
            found = [None if key in names else ([], names)]  # +bogus.x=1: no section bogus to hold x
        elif key in known_keys():
            found = [None]
        else:
            found = [
                _keys_missing(schema, key.split(".")[1:] if whose else key.split("."), [top] if whose else [])
                for schema, whose in key_schemas(parsed, key)
            ]
        if found and all(f is not None for f in found):
            section, here = found[0]  # type: ignore[misc]
            # as typed: bogus=1, and the prefix typed (the job cannot tell '+' from '++')
            return str(added_key_error(key, value, ".".join(section), here, plus, value))
    return None


def _keys_missing(schema: object, parts: list[str], above: list[str]) -> tuple[list[str], list[str]] | None:
    """The typed section that should hold the next of ``parts`` (a dotted key split) in ``schema`` (a
    structured config), where one is not among them (``steps.bogus``, ``steps.bogus.y``): its path
    (``above``, the parts of the key above ``schema``, then those found) and its keys; None when every part
    is found, or when a section on the way is untyped (a mapping of any keys), null or no section."""
    import dataclasses

    from omegaconf import DictConfig, OmegaConf

    node = schema
    for i, part in enumerate(parts):
        typed = isinstance(node, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(node))
        if typed and part not in node:  # steps.bogus.y: the typed section steps has no bogus
            return [*above, *parts[:i]], [str(k) for k in node]  # type: ignore[union-attr]
        if i == len(parts) - 1:
            return None
        node = node._get_node(part) if isinstance(node, DictConfig) and part in node else None  # type: ignore[attr-defined]
        if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
            return None
    return None


def model_config_problem(overrides: list[str]) -> str | None:
    """One line for a ``model.config`` as typed that names no shipped config and no readable Hugging Face
    ``config.json`` (missing, a FIFO, not JSON, not a model's config: :func:`flopsweep.models.hf_files.load`,
    the job's own read, bounded), before Hydra makes the job's folder. A sweep over several files
    (``model.config=a.json,b.json``) is left to its jobs, each of which records its own refusal; null,
    empty and interpolations are left to the job too."""
    from flopsweep.models.hf_files import load as read_model_config

    text = typed_values(overrides).get("model.config", "")
    if not text or text.lower() == "null" or any(c in text for c in "${}()[],"):
        return None
    try:
        read_model_config(text)
    except ConfigError as exc:
        return str(exc)
    return None


def _no_gpu_here() -> bool:
    """:func:`flopsweep.local_gpus.no_gpu_here`, imported when asked."""
    from flopsweep.local_gpus import no_gpu_here

    return no_gpu_here()


def search_range_problem(overrides: list[str]) -> str | None:
    """One line for a search range whose upper end is below its lower end (``search.min_n_layer=8
    search.max_n_layer=2``; ``search.min_seq_len=4096 search.max_seq_len=1024``), a key not given
    read at its default (:data:`flopsweep.limits.SEARCH_RANGES`), else None: the job's own line
    (:func:`flopsweep.search_rules.model_search`), before Hydra makes the sweep's folder. The job recorded
    each as invalid (a sweep file's values named no file). A sweep over either key, or a value that is not a
    whole number (``type_problem``'s), is left to the job."""
    from flopsweep.limits import SEARCH_RANGES
    from flopsweep.override_parsing import parsed_or_none

    given: dict[str, object] = {}
    for text in overrides:
        key = set_key(text)
        if key.startswith("search.") and not text.startswith("-"):
            given[key] = o.value() if (o := parsed_or_none(text)) is not None else None
    for high_key, (low_key, low_default, high_default, why, fix) in SEARCH_RANGES.items():
        if high_key not in given and low_key not in given:
            continue
        low, high = given.get(low_key, low_default), given.get(high_key, high_default)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (low, high)):
            continue
        if high < low:
            return str(ConfigError(high_key, high, why.format(low=low), fix))
    return None
