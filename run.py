"""Hydra entry point: ``python run.py [overrides]`` or ``python run.py -m [sweep overrides]``.

A thin wrapper: the config is converted once to the typed ``RunConfig`` and handed
to :func:`flopsweep.job.run_job`, which validates it, launches the ranks and writes
``metrics.json`` in the Hydra job directory.

Exit status: a single run exits 0 when ok (or skipped by ``resume=true``), 1 on
``oom``/``error`` or when its record could not be written, 2 on ``invalid``. A sweep exits 0
when every job was recorded, whatever the statuses; 1 when the sweep itself broke (a
composition error, a record it refused to overwrite, a directory that became read-only or
full) or ``fail_fast=true`` stopped it.
"""

from __future__ import annotations

if __name__ == "__main__":  # Ctrl-C from here: one line and 130 (its import sets the handler first)
    import flopsweep.console  # noqa: F401 - was: flopsweep.signals' imports unguarded (#606)

from flopsweep.signals import stop_before_jobs

if __name__ == "__main__":  # Ctrl-C in the imports below (~0.8 s): one line and 130, no traceback
    stop_before_jobs({})

import importlib
import logging
import os
import secrets
import signal
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from flopsweep import cli, objective
from flopsweep.callbacks import JobNotRecorded, RecordRefused, SweepStopped
from flopsweep.checkpointing import normalize_overrides
from flopsweep.cli import help_section
from flopsweep.command_line_checks import (
    added_key_problem,
    interpolation_problem,
    model_config_problem,
    objective_problem,
    output_dir_problem,
    placement_problem,
    plan_conflict_problem,
    plan_folder_problem,
    repeats_problem,
    search_range_problem,
    sorted_range_problem,
    tag_problem,
)
from flopsweep.conf_files import (
    ConfFileProblem,
    checked_yaml,
    conf_file_problem,
    sweep_file_problem,
)
from flopsweep.decimal_comma import decimal_comma_problem
from flopsweep.files import (
    JobFolderUnwritable,
    NotRecorded,
    RecordExistsError,
)
from flopsweep.flags import (
    completes,
    completion_problem,
    delete_problem,
    expand_flag_prefixes,
    flag_problem,
    group_prefix_problem,
    is_multirun,
    searchpath_problem,
)
from flopsweep.folders import home_tilde_problem
from flopsweep.foreign_digits import foreign_digits_problem
from flopsweep.free_folder import command_started
from flopsweep.hydra_keys import (
    hydra_key_problem,
    hydra_sweep_problem,
    params_axis_problem,
)
from flopsweep.interpolations import interpolated_problem, resolution_fix
from flopsweep.job_log import job_log_problem, log_link_problem
from flopsweep.job_log_keys import job_logging_key_problem
from flopsweep.joined_overrides import joined_problem
from flopsweep.key_needs import idle_key_problem, rechecked
from flopsweep.launch import Terminated, raise_terminated
from flopsweep.mapping_overrides import read_as_keys
from flopsweep.model_identity import command_line_problem as model_problem
from flopsweep.model_identity import shape_problem as model_shape_problem
from flopsweep.option_file_keys import option_file_problem, sweep_picks_problem
from flopsweep.override_grammar import config_name_problem, control_character_problem, syntax_problem
from flopsweep.override_multirun import (
    sweep_function_problem,
    sweep_size_problem,
    sweep_without_m_problem,
    sweeper_without_m_problem,
)
from flopsweep.override_parsing import split_override
from flopsweep.override_schema import existing_key_add_problem
from flopsweep.override_sweeps import list_sweep_problem, range_problem, repeated_sweep_problem
from flopsweep.overrides import (
    group_choice_problem,
    listed_values,
    preset_option_keys,
    sweeper_extra_problem,
    type_problem,
    unread_space_problem,
)
from flopsweep.overrides import option_kind as _option_kind
from flopsweep.plan_command_line import command_line_problem as plan_problem
from flopsweep.plan_command_line import cpu_plan_problem
from flopsweep.pool import cpu_pool_problem
from flopsweep.signals import DONE_LINE, between_jobs, jobs_starting, work_done
from flopsweep.start_checks import (
    blank_omp_threads,
    omp_threads_line,
    option_file_lines,
    root_problem,
    version_asked,
    version_line,
)
from flopsweep.store import register_configs
from flopsweep.streams import standard_streams
from flopsweep.sweep_axes import repeated_value_problem, space_sweep_problem, sweep_level_problem
from flopsweep.sweep_file_defaults import defaults_problem as sweep_defaults_problem
from flopsweep.sweep_file_defaults import pool_problem as sweep_pool_problem
from flopsweep.sweep_file_hydra import output_dir_problem as sweep_file_dir_problem
from flopsweep.sweep_file_keys import shape_problem as sweep_file_shape_problem
from flopsweep.sweep_file_keys import values_problem as sweep_file_values
from flopsweep.sweep_file_keys import without_m_problem as sweep_file_without_m_problem
from flopsweep.sweep_subdir import fixed_subdir_problem
from flopsweep.text import printable
from flopsweep.unstarted import remove_unstarted
from flopsweep.value_sets import value_set_problem
from hydra_plugins.flopsweep_pool import detect_gpus
from hydra_plugins.flopsweep_tune import command_line_problem as tuner_problem
from hydra_plugins.flopsweep_tune import nothing_to_tune_problem

QUIET_AT_EXIT = ("torch._subclasses.fake_tensor",)
"""Loggers that log at exit (after flopsweep's last line) and are held at WARNING in this process."""

# Unique per sweep process, so that two sweeps started in the same second never
# share a directory (cached like ${now:}, so every job of a sweep agrees).
_UID = f"{os.getpid()}-{secrets.token_hex(2)}"
OmegaConf.register_new_resolver("flopsweep_uid", lambda: _UID, use_cache=True, replace=True)
# fail_fast: one job per sweeper batch, so that the sweep stops right after the job that failed.
OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: 1 if fail_fast else None, replace=True)
# hydra/sweeper=optuna_objective (conf/hydra/sweeper/): maximize or minimize, from MetricSpec.better.
OmegaConf.register_new_resolver("flopsweep_direction", lambda k: objective.direction(str(k)), replace=True)
# conf/hydra/help/flopsweep.yaml (flopsweep --help): the config groups of conf/, where the docs are.
OmegaConf.register_new_resolver("flopsweep_help", help_section, replace=True)
register_configs()
# torch logs its FakeTensor cache stats at INFO from an atexit hook (fake_tensor.dump_cache_stats); Hydra's
# logging sets the root logger to INFO, so they came after flopsweep's last line (Ctrl-C at a job's start).
for _name in QUIET_AT_EXIT:
    logging.getLogger(_name).setLevel(logging.WARNING)
# Nothing above imports torch (the job does, in main), so that a refusal, Hydra's included, is quick.

EXIT_CODES = {"ok": 0, "oom": 1, "error": 1, "invalid": 2}


RUN_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf")
"""This checkout's ``conf/``, the one Hydra reads (``@hydra.main(config_path="conf")``); the package
may be installed elsewhere (a wheel), so the checks of its folder are given this one."""


def foreign_option_keys(overrides: list[str]) -> str | None:
    """One line for an override such as ``attention.window_blocks=0`` whose key belongs only to
    other options than one the command line picks (``attention=sdpa``; in a sweep over several,
    ``backend=ddp,fsdp backend.cpu_offload=true``, any of them), else None.

    Hydra would refuse it too, but with "Key 'window_blocks' not in 'AttentionConfig'" and a
    hint to add '+'; this names the option the key belongs to. Only command-line choices are
    known here (else the defaults of conf/config.yaml), so a group that a ``+sweep`` file may
    choose is left to Hydra.
    """
    from flopsweep.options import GROUP_BASES, owners
    from flopsweep.override_parsing import parsed_overrides
    from flopsweep.override_schema import kinds_said, picks

    # Hydra's flags (``-m``, ``--config-name NAME``) are not overrides: the parser would refuse them.
    if (parsed := parsed_overrides(overrides)) is None:  # Hydra reports its own syntax errors
        return None
    if any(o.key_or_group == "sweep" for o in parsed):
        return None
    try:  # bounded and read once a process; a damaged file is root_config_problem's or Hydra's to name
        root = checked_yaml(os.path.join(RUN_CONF, "config.yaml"), RUN_CONF)
    except ConfFileProblem:
        return None
    defaults = root.get("defaults") if isinstance(root, dict) else None
    chosen = {k: [v] for d in defaults or [] if isinstance(d, dict) for k, v in d.items()}
    for o in parsed:
        if o.key_or_group in GROUP_BASES and o.package is None:
            chosen[o.key_or_group] = (listed_values(o) or []) if o.is_sweep_override() else [o.value()]
    for o in parsed:
        group, _, key = o.key_or_group.partition(".")
        if o.is_add() or o.is_force_add() or group not in GROUP_BASES or not key or "." in key:
            continue
        own = owners(group, key)
        others = [str(p) for p in chosen.get(group) or [] if _option_kind(group, str(p)) not in own]
        if own and others:
            names = kinds_said(group, own)  # the llama options of model: model=llama composes nothing
            pick = picks(group, own, near=others[0])
            # A sweep over several options sets the key in every job: Hydra would stop the sweep at
            # the first job whose option lacks it (after the jobs before it ran).
            mixed = len(others) < len(chosen[group])
            fix = f"sweep only {names} with it, or run the others without it" if mixed else f"pick {pick}"
            return (
                f"Invalid config: {o.key_or_group}: belongs to {names}, "
                f"not to {group}={','.join(others)}"
                f"{' (a command-line override applies to every job of the sweep)' if mixed else ''}. "
                f"Fix: drop the override, or {fix}."
            )
    return None


def refusal(overrides: list[str]) -> str | None:
    """The one line refusing the command line before Hydra starts (exit 2), or None."""
    if completes(overrides):  # -sc install=bash: Hydra's shell completion, its words no overrides
        return flag_problem(overrides, RUN_CONF) or completion_problem(overrides)
    keyed = read_as_keys(overrides)  # 'parallel={tp:0}' as parallel.tp=0, for the checks of one key
    return (
        tag_problem(overrides)
        or config_name_problem(overrides)
        or root_problem(overrides, RUN_CONF)  # a damaged conf/config.yaml, not the override's fault
        or flag_problem(overrides, RUN_CONF)
        or searchpath_problem(overrides)
        or control_character_problem(overrides)
        or joined_problem(overrides, refusal)  # "backend=fsdp nproc_per_node=2": one word, several overrides
        or home_tilde_problem(overrides)  # hydra.sweep.dir=~/x: a folder named ~ here (before the grammar's)
        or foreign_digits_problem(overrides, refusal)  # steps.measure=٣, quoted or not: int() reads it as 3
        or syntax_problem(overrides, refusal)  # a look-alike's corrected line checked again
        or range_problem(overrides)  # seed=range(0,4,0): Python's range() raised, a traceback
        or conf_file_problem(
            overrides, RUN_CONF
        )  # before anything reads a file of conf/ the command line picks
        or sweep_file_shape_problem(overrides, RUN_CONF)  # a sweep file's header, form and keys
        or sweep_defaults_problem(overrides, RUN_CONF)  # its defaults list: /modle, /model without override
        or option_file_problem(overrides, RUN_CONF)  # a picked option file's form and keys (model=mine)
        or sweep_picks_problem(overrides, RUN_CONF)  # a sweep file's override /model: typo, hydra: keys
        or hydra_sweep_problem(overrides)  # hydra.sweeper.budget_gpu_s=1,2: Hydra sweeps no hydra.* key
        or params_axis_problem(overrides, RUN_CONF)  # hydra.sweeper.params.seed=3 with params null
        or list_sweep_problem(overrides)  # space.layouts=dp,tp2: the fix is one list, not -m
        or space_sweep_problem(overrides)  # -m 'space.backends=[ddp],[fsdp]': one space, one list
        or decimal_comma_problem(overrides)  # cost.usd_per_gpu_hour=2,50: one price, not a sweep, -m or not
        or sweep_without_m_problem(overrides)
        or sweep_file_without_m_problem(overrides, RUN_CONF)  # +sweep=mine of axes: one job, silently
        or repeated_sweep_problem(overrides)  # a=1,2 a=3: Hydra keeps the last, the sweep dropped silently
        or sweep_function_problem(overrides)  # seed=glob(*): 0 jobs; interval() without Optuna: a traceback
        or sweep_size_problem(overrides)
        or objective_problem(overrides)
        or plan_conflict_problem(overrides)  # before repeats_problem: plan=true repeats=3's fix is not -m
        or repeats_problem(overrides)
        or sorted_range_problem(overrides)
        or output_dir_problem(overrides)
        or job_logging_key_problem(overrides, RUN_CONF)  # +hydra.job_logging.handlers.file.baseFilename=x
        or job_log_problem(overrides)  # hydra.job.name=../x, a job_logging filename out of the run's folder
        or plan_folder_problem(overrides)  # plan=true into a folder holding a plan.csv it did not make
        or log_link_problem(overrides)  # a run.log link in the run's folder: replaced without a word
        or sweep_file_dir_problem(
            overrides, RUN_CONF
        )  # its hydra.sweep.dir: conf/backend/x, '', ${hydra:...}
        or fixed_subdir_problem(overrides, RUN_CONF)  # hydra.sweep.subdir=x, a file's, ${now:%H}: one folder
        or interpolation_problem(overrides)
        or interpolated_problem(
            overrides, RUN_CONF
        )  # model=${tag}, ${oc.decode:0}: Hydra's multi-line errors
        or group_choice_problem(overrides)
        or group_prefix_problem(overrides, RUN_CONF)
        or existing_key_add_problem(overrides)  # +steps.measure=3: Hydra's five lines
        or delete_problem(overrides, RUN_CONF)  # after the + and ~ of a group no default picks
        or sweeper_extra_problem(overrides)
        or sweeper_without_m_problem(overrides)  # after the choice's own checks: "add -m" must pass them
        or preset_option_keys(overrides)
        or foreign_option_keys(overrides)
        or plan_problem(overrides)
        or hydra_key_problem(overrides)
        or idle_key_problem(overrides, refusal)  # after the values' own checks; its fix checked again
        or tuner_problem(overrides)
        # a did-you-mean's line checked again; 'parallel={tp:0}' read as parallel.tp=0 (read_as_keys)
        or rechecked(type_problem(keyed), keyed, refusal)
        or rechecked(value_set_problem(keyed), keyed, refusal)  # fault.kind=oomm, model.n_layer=0
        or search_range_problem(overrides)  # search.min_n_layer=8 search.max_n_layer=2: the job's line
        or model_problem(overrides)  # after the types: model.name=null is type_problem's line
        or added_key_problem(overrides)  # +bogus=1: the job's line, before Hydra makes its folder
        or placement_problem(overrides)  # nproc_per_node=0, nnodes=2 with no launcher that gives nodes
        or model_config_problem(overrides)  # model.config=missing, a FIFO, not JSON: the job's read
        or model_shape_problem(
            overrides
        )  # model.n_kv_head=3, a config.json's num_hidden_layers=-3: the job's check
        or cpu_plan_problem(overrides)  # plan=true of a model this CPU cannot hold, no GPU named
        or unread_space_problem(overrides)
        or repeated_value_problem(overrides)  # seed=1,1 (after its values' own lines): the same job twice
        or sweep_level_problem(overrides)  # resume=true,false: a sweep's key, per job
        or cpu_pool_problem(
            overrides, detected=detect_gpus
        )  # hydra/launcher=pool, no GPU: its slots must be given
        or sweep_pool_problem(overrides, detect_gpus, RUN_CONF)  # a sweep file's pool values, the same line
        or sweep_file_problem(
            overrides, RUN_CONF
        )  # its axes after the command line's own: those lines come first
        or sweep_file_values_problem(overrides)  # its plain values, as the command line's
        or nothing_to_tune_problem(overrides)  # -m hydra/sweeper=tune alone: one set-up (after the rest)
    )


FILE_VALUE_CHECKS = (
    control_character_problem,  # tag: "a\tb": a tab or ESC in a file's text, as on the command line
    tag_problem,
    foreign_digits_problem,
    decimal_comma_problem,  # cost.usd_per_gpu_hour: 2,50 (a string of the file): 2.50, before its type's line
    plan_problem,  # a bad @PRICE of plan_clusters, the file's own or an axis of its params (@1e400)
    objective_problem,
    repeats_problem,
    plan_conflict_problem,
    interpolation_problem,
    type_problem,
    value_set_problem,
    idle_key_problem,
    search_range_problem,  # after its keys' own checks (idle without search.model=largest)
    foreign_option_keys,
)
"""The command line's checks that a sweep file's plain values (``timeout_s: -5``) get before Hydra
(:func:`flopsweep.sweep_file_keys.values_problem`): each value's own bounds and type, not the flags."""


FILE_MERGE_CHECKS = (foreign_digits_problem, decimal_comma_problem, type_problem)
"""The checks a sweep file's plain value gets though the command line gives its key again: Hydra merges the
file's value into the typed config first (``steps: {measure: 3.0}`` beside ``steps.measure=3``: Hydra's
``ValidationError``, exit 1), so its type must convert."""


def sweep_file_values_problem(overrides: list[str]) -> str | None:
    """One line for a plain value of a ``+sweep=`` file that the command line's own checks refuse
    (:data:`FILE_VALUE_CHECKS`; one the command line gives again, :data:`FILE_MERGE_CHECKS`), with the
    file named and the fix in the file's form, else None."""
    return sweep_file_values(overrides, FILE_VALUE_CHECKS, RUN_CONF, FILE_MERGE_CHECKS)


def existing_record_problem(overrides: list[str]) -> str | None:
    """A single run into a ``hydra.run.dir`` that already holds a record, without ``resume=true``:
    refused here, before Hydra rewrites the directory's ``.hydra/*.yaml``."""
    values = dict(o.partition("=")[::2] for o in overrides if "=" in o)
    if is_multirun(overrides) or values.get("resume", "").lower() == "true":
        return None
    run_dir = values.get("hydra.run.dir", "").strip().strip("'\"")
    if run_dir and "${" not in run_dir and os.path.lexists(os.path.join(run_dir, "metrics.json")):
        from flopsweep.record import exists_message, record_path_problem

        path = os.path.join(run_dir, "metrics.json")
        return record_path_problem(path) or exists_message(path)  # a link: no advice to resume
    return None


def env_in_tag_warning(overrides: list[str]) -> str | None:
    """A warning when ``tag`` takes an environment variable into the records that people share."""
    for override in overrides:
        _, key, value = split_override(override)
        if key == "tag" and "oc.env:" in value:
            return (
                f"flopsweep: warning: {override} copies an environment value into every record's "
                "config.tag; records are often shared"
            )
    return None


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """One job (:func:`one_job`). Returns its ``objective`` as a float for the sweeper (NaN when not ``ok``).
    A sweep's job run in this process (Hydra's basic launcher) holds SIGINT and SIGTERM once it ends, until
    the next job starts or the sweep ends (:func:`flopsweep.signals.between_jobs`): Hydra composes the next
    job's config in between, where an interrupt was lost."""
    ended = True  # returned, or failed with anything but the interrupt (which is the sweep's)
    try:
        return one_job(cfg)
    except (KeyboardInterrupt, Terminated):
        ended = False
        raise
    finally:
        if ended and HydraConfig.get().mode == RunMode.MULTIRUN:
            between_jobs()


def one_job(cfg: DictConfig) -> float:
    """One job of :func:`main`: its ``objective`` as a float (NaN when not ``ok``)."""
    # torch: only once Hydra has composed
    from flopsweep.clusters import plans_gpu
    from flopsweep.hydrafiles import hydra_files, sweep_dir
    from flopsweep.job import JobInfo, job_libraries, plan_invalid_line, run_job
    from flopsweep.job.planprint import plan_output, plan_refused_line, plan_unfit_line

    hc = HydraConfig.get()
    info = JobInfo(
        job_dir=hc.runtime.output_dir,
        # as typed: iterating the ListConfig resolves each one (model.n_layer=${model.experts}: a traceback)
        overrides=OmegaConf.to_container(hc.overrides.task, resolve=False),
        job_num=hc.job.get("num"),
        choices={k: str(v) for k, v in hc.runtime.choices.items() if v is not None},
        sweep_dir=str(sweep_dir(hc)) if hc.mode == RunMode.MULTIRUN else None,
        # hydra.output_subdir is null: the job writes its .hydra/ files itself (flopsweep.hydrafiles)
        hydra_files=hydra_files(cfg, HydraConfig.instance().cfg, hc.overrides.task),
    )
    try:
        run_cfg = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:  # an interpolation that cannot resolve (${oc.env:UNSET})
        key = getattr(exc, "full_key", None) or "?"
        typed = [value for o in info.overrides for _, k, value in [split_override(o)] if k == key]
        message = (
            f"Invalid config: {key}{'=' + typed[-1] if typed else ''}: {str(exc).splitlines()[0]}. "
            f"Fix: {resolution_fix(exc)}."
        )
        remove_unstarted()  # refused before it started: the folder Hydra made for it (an empty run.log)
        if hc.mode == RunMode.MULTIRUN:
            raise SweepStopped(
                message, note=f"stopped: job {info.job_num} was refused before it ran"
            ) from None
        print(f"flopsweep: {message}", file=sys.stderr)
        sys.exit(2)
    if hc.job.get("chdir"):  # relative file paths name files of the folder the user started in
        from flopsweep.hydrafiles import from_start_folder

        from_start_folder(run_cfg, hc.runtime.cwd)
    # the job's libraries here (torch, pandas, ...), while a signal still ends the process (folder removed)
    # or is held between jobs: one that lands in their import leaves it half-made (their C code swallows it:
    # numpy then "cannot load module more than once per process", the job failed and the sweep ran on); a
    # plan over clusters without DeepSpeed stays torch-free (flopsweep.job.placement.job_libraries)
    from flopsweep.quiet import silence_known_warnings

    silence_known_warnings()  # before the imports: DeepSpeed's "Setting accelerator to CPU" line on import
    for library in job_libraries(run_cfg):
        importlib.import_module(library)

    jobs_starting()  # a signal from here on stops the job's ranks and records it
    try:
        record = run_job(run_cfg, info)
    except RecordExistsError as exc:
        if hc.mode != RunMode.MULTIRUN:  # one line, not Hydra's "Error executing job" block
            print(f"flopsweep: {exc}", file=sys.stderr)
            # a record refused (a re-run, another run's record): 2; its folder or .hydra/ not writable: 1
            sys.exit(1 if isinstance(exc, JobFolderUnwritable) else 2)
        raise RecordRefused(str(exc)) from None
    except NotRecorded as exc:
        if hc.mode != RunMode.MULTIRUN:
            print(f"flopsweep: {exc}", file=sys.stderr)
            sys.exit(1)
        raise JobNotRecorded(str(exc)) from None  # SweepSummary.on_job_end: the line, the summary, exit 1
    status = record["status"]
    if status == "plan":
        if hc.mode != RunMode.MULTIRUN:  # plan_clusters: its own text; else plan_format's view of plan.csv
            # every row invalid (a value from a file or an interpolation): one line, exit 2, as a config error
            path, csv_text = record["plan_file"], record.get("plan_csv")  # csv_text: plan.csv not written
            if not record.get("plan_text") and (refused := plan_refused_line(path, text=csv_text)):
                print(f"flopsweep: {refused}", file=sys.stderr)
                sys.exit(EXIT_CODES["invalid"])
            gpu = plans_gpu(run_cfg.plan_gpu)  # the GPU its hints name
            text = record.get("plan_text") or plan_output(path, run_cfg.plan_format, gpu, text=csv_text)
            print(text, flush=True)
            if not record.get("plan_text"):  # one row per job (plan_clusters counts its own)
                for line in (
                    plan_invalid_line(path, text=csv_text, shown=run_cfg.plan_format == "table"),
                    plan_unfit_line(path, gpu, text=csv_text),
                ):
                    if line:
                        print(line, file=sys.stderr)
            if record.get("unwritten"):  # the plan printed; its file could not be written: path, why, fix
                print(record["unwritten"], file=sys.stderr, flush=True)
            if record.get("nothing"):  # plan_clusters ranked no set-up: why, and a failing exit status
                print(f"flopsweep: {record['nothing']}", file=sys.stderr)
                sys.exit(1)
        return objective.value(record, run_cfg.objective)
    if status != "ok":
        said = record["error"]["message"]  # an invalid config's message says "Invalid config" itself
        message = f"flopsweep: {said if said.startswith('Invalid config') else f'{status}: {said}'}"
        if hc.mode != RunMode.MULTIRUN:
            # A single run reports failure through its exit status; a sweep goes on.
            print(message, file=sys.stderr)
            sys.exit(EXIT_CODES[status])
        # A plan job writes no record to log it: its line, unless it is an invalid job of plan_clusters, whose
        # row the sweep's table names with its line at the end (flopsweep.job.plansweep): said once.
        if run_cfg.plan and status != "invalid":
            print(f"flopsweep: job {info.job_num}: {message.removeprefix('flopsweep: ')}", file=sys.stderr)
        if run_cfg.fail_fast:
            # brief: the job's log line above already says why (flopsweep.job logs every outcome).
            raise SweepStopped(
                f"{message} [recorded in {info.job_dir}]; fail_fast=true stopped the sweep",
                brief=f"fail_fast=true stopped the sweep after job {info.job_num} ({status}, recorded in "
                f"{info.job_dir})",
            )
    return objective.value(record, run_cfg.objective)


def interrupted_message() -> str:
    """What a signal left behind: the rows a plan sweep kept (its table printed first), the last record
    written (a job that was running when the signal came records itself as an error first), or that nothing
    was recorded; for a sweep whose folder exists, the command that finishes it
    (:func:`flopsweep.job.resume.resume_hint`)."""
    from flopsweep.job import LAST_RECORD
    from flopsweep.job.plansweep import interrupted_plan_lines
    from flopsweep.job.resume import SWEEP_DIR, resume_hint

    if planned := interrupted_plan_lines():  # a plan sweep writes no record: what its jobs planned
        for line in planned[:-1]:
            print(line, file=sys.stderr if line.startswith("flopsweep: ") else sys.stdout, flush=True)
        return planned[-1].removeprefix("flopsweep: ")
    hint = resume_hint(sys.argv[1:], SWEEP_DIR["path"])  # a sweep's folder: resume=true finishes it
    if LAST_RECORD["path"] is None:
        if any(arg.lstrip("+").lower() == "plan=true" for arg in sys.argv[1:]):  # a plan records no run
            return "the plan stopped before its table; nothing was written (a plan starts no worker)"
        return f"no run had been recorded yet{hint}"
    return f"the last run is recorded ({LAST_RECORD['status']}) in {LAST_RECORD['path']}{hint}"


if __name__ == "__main__":
    # A log line that cannot be written (a full disk, a read-only job directory) must not print a
    # traceback; the record, or the one line saying why there is none, tells what happened.
    logging.raiseExceptions = False
    # `flopsweep --help | head -3`: a reader that goes away ends the output quietly, not in a
    # BrokenPipeError traceback (Hydra prints --help, --cfg and --info itself): flopsweep.cli.
    # `flopsweep ... >&-`: a closed stdout or stderr is os.devnull, so that every print works (flopsweep.cli).
    standard_streams()  # and both streams guarded against a reader that goes away (flopsweep.streams)
    # Until a job starts, SIGINT and SIGTERM end the process at once with one line, 130 or 143 (nothing
    # is recorded yet; an exception raised inside Hydra's composition was lost or misreported); from the
    # first job on, they stop it and record it (flopsweep.signals). A Slurm task handles SIGTERM itself.
    job_sigterm = (
        signal.getsignal(signal.SIGTERM) if os.environ.get("SUBMITIT_EXECUTOR") else raise_terminated
    )
    # A folder Hydra made for a job that then never started is removed (flopsweep.unstarted).
    stop_before_jobs(
        {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: job_sigterm}, remove_unstarted
    )
    # Hydra refuses a boolean as a group choice: the old activation_checkpointing=true/false
    # become the policies full/none before it parses them (flopsweep.checkpointing).
    # --multi is --multirun to Hydra's parser (argparse's prefixes): spelled out, every check sees it.
    sys.argv[1:] = expand_flag_prefixes(normalize_overrides(sys.argv[1:]))
    argv = sys.argv[1:]
    command_started(argv)  # a folder fix names this command's key (-m: hydra.sweep.dir), free_folder
    if version_asked(argv):  # flopsweep's version, Hydra's and torch's beside it; no config composed
        print(version_line())
        sys.exit(0)
    if (
        completes(argv) and cli.INVOKED_AS
    ):  # -sc install=bash: for flopsweep, not for python (Hydra's argv[0])
        sys.argv[0] = cli.INVOKED_AS
    blank = blank_omp_threads(argv)  # OMP_NUM_THREADS='' dropped before libgomp reads it (its own line)
    problem = omp_threads_line(argv) or refusal(argv)  # OMP_NUM_THREADS=abc: libgomp ignores it
    exists = None if completes(argv) else existing_record_problem(argv)
    if exists and not problem:  # a folder refused: exit 2, as every refusal before launch
        print(f"flopsweep: {printable(exists)}", file=sys.stderr)
        sys.exit(2)
    if problem:  # the line echoes the command line: a control character in it is shown, not obeyed
        print(f"flopsweep: {printable(problem)}", file=sys.stderr)
        sys.exit(2)
    for line in [blank, *option_file_lines(RUN_CONF)]:  # an option file not picked that a pick would refuse
        if line:
            print(line, file=sys.stderr)
    if env_in_tag_warning(argv):  # only for a run that goes ahead: a refusal is its one line
        print(env_in_tag_warning(argv), file=sys.stderr)
    try:
        main()
    except (KeyboardInterrupt, Terminated) as exc:
        remove_unstarted()  # a later job of a sweep interrupted before it started: its folder
        # Say only what is true: a stack trace would hide it.
        print(f"flopsweep: interrupted ({type(exc).__name__}); {interrupted_message()}", file=sys.stderr)
        sys.exit(143 if isinstance(exc, Terminated) else 130)
    finally:  # written and said: a signal in the teardown says so and changes nothing (#801)
        work_done(DONE_LINE)
