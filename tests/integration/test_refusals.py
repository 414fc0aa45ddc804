"""Every command line that ``python run.py`` must refuse before any worker starts: one table,
:data:`REFUSALS`, one slow test that runs each row as a user types it (torchtitan's
``OverrideDefinitions`` style).

A row is a :class:`Refusal`: the overrides, the exit status, what stderr says, and the record (or
none) it leaves. The rows run two at a time in one module fixture (a start of ``run.py`` is mostly
the interpreter importing Hydra, one core each), each into a directory of its own; each row's test
waits for its own run. A new refusal is a new row; a command line that needs files or a second run
first (a planted config, a held lock, a run to resume) stays a test of its own.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT, RUN_PY, records, run_py

from flopsweep.local_gpus import no_gpu_here
from integration.test_slurm import CPU_JOB


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One ``python run.py`` that must be refused before any worker starts.

    Attributes:
        args: the overrides (the run or sweep directory is added).
        sweep: run with ``-m`` into ``hydra.sweep.dir`` (else ``hydra.run.dir``).
        status: the exit status: 1 (Hydra's composition, a launcher, the pool) or 2 (flopsweep's
            validation, the checks before Hydra starts).
        stderr_has: each must be in stderr.
        last_line_has: each must be in stderr's last line.
        line_starts: the one stderr line with ``Invalid config`` starts with this.
        every_line_has: every stderr line holds this (the refusal is all there is).
        lines: stderr has exactly this many lines (None: any number).
        record: ``invalid``: refused by the job's own checks (after Hydra composed): a sweep's job keeps one
            ``invalid`` record of phase ``config``, every metric null; a single run writes nothing (no
            ``metrics.json``, no ``.hydra/``; its folder gone unless its log has lines: session 43,
            ``lifecycle.keeps_refusal``); None: no ``metrics.json``, and no run or sweep directory unless
            ``dir_made``.
        dir_made: with ``record=None``, the run or sweep directory may exist (empty of records).
        default_dir: run in an empty folder without ``hydra.run.dir``/``hydra.sweep.dir``, as a user
            types it: Hydra's default folders (``outputs/<date>/<time>``, ``multirun/<date>/<time>``)
            must not be made there.
    """

    args: tuple[str, ...]
    sweep: bool = False
    status: int = 2
    stderr_has: tuple[str, ...] = ()
    last_line_has: tuple[str, ...] = ()
    line_starts: str | None = None
    every_line_has: str | None = None
    lines: int | None = None
    record: str | None = "invalid"
    dir_made: bool = False
    default_dir: bool = False


def _invalid(args: tuple[str, ...], key: str) -> Refusal:
    return Refusal(args=args, last_line_has=(key, "Fix:"))


def _typo(override: str) -> Refusal:
    return Refusal(
        args=(override,), status=1, stderr_has=(override.split("=")[0].split(".")[-1],), record=None
    )


def _refused(override: str, words: str) -> Refusal:
    """A wrong value flopsweep answers before Hydra starts (``overrides.type_problem``,
    ``option_problem``): one line, exit 2."""
    return Refusal(
        args=(override,),
        status=2,
        stderr_has=(words,),
        line_starts="flopsweep: Invalid config: ",
        lines=1,
        record=None,
    )


def _refused_args(args: tuple[str, ...], words: str) -> Refusal:
    """:func:`_refused` for a value that needs its option beside it (``attention=blocksparse``)."""
    return dataclasses.replace(_refused(args[-1], words), args=args)


def _launcher(override: str, before_hydra: bool = False) -> Refusal:
    """``hydra/launcher=slurm`` with a request that contradicts the job: the launcher plugin refuses
    in one line (``flopsweep: Invalid config: ...``) before it calls sbatch (no cluster needed), and makes no
    sweep directory; ``before_hydra``: the same check run before Hydra
    (``command_line_checks.placement_problem``), exit 2."""
    key = override.split("=")[0]
    job = [a for a in CPU_JOB if a.partition("=")[0] != key]  # the override replaces the job's own value
    return Refusal(
        args=(*job, override),
        sweep=True,
        status=2 if before_hydra else 1,
        line_starts=f"flopsweep: Invalid config: {key}=",  # the launcher's line too, since session 37
        stderr_has=("Fix: set ",),
        lines=1,
        record=None,
    )


POOL = ("hydra/launcher=pool", "device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1")


REFUSALS = {
    # validation: one paragraph, exit 2, no worker (a single run: nothing written)
    # a family's size below 1, a name outside its key's set: before Hydra since session 26 (value_sets)
    "n_head_zero": _refused(
        "model.n_head=0", "model.n_head=0: must be a positive integer. Fix: set model.n_head="
    ),
    "n_layer_zero": _refused("model.n_layer=0", "model.n_layer=0: must be a positive integer"),
    "fault_kind_typo": _refused("fault.kind=oomm", "fault.kind='oomm': must be one of none, oom,"),
    "blocksparse_layout_typo": _refused_args(
        ("attention=blocksparse", "attention.layout=lcoal"), "did you mean attention.layout=local?"
    ),
    "device_sweep_typo": Refusal(
        args=("device=cpu,gpu",),
        sweep=True,
        status=2,
        stderr_has=("device='gpu': must be one of auto, cuda, cpu",),
        line_starts="flopsweep: Invalid config: ",
        lines=1,
        record=None,
    ),
    "every_zero": _refused_args(
        ("activation_checkpointing=every_n", "activation_checkpointing.every=0"),
        "activation_checkpointing.every=0: must be a whole number >= 1",
    ),
    # heads that do not divide: before Hydra since session 24 (model_identity.head_problem)
    "n_embd": _refused("model.n_embd=130", "model.n_embd=130: is not divisible by model.n_head=4"),
    # offload: 70B's 16 bytes per parameter (1.1 TB) on the host of two CPU ranks
    "offload_exceeds_host": _invalid(
        ("device=cpu", "nproc_per_node=2", "backend=fsdp", "backend.cpu_offload=true", "model=llama3.1-70b"),
        "backend.cpu_offload",
    ),
    # the free host memory (at launch, by plan=true's estimate): gpt-tiny's ~3.8 TiB of activations per rank
    "over_free_host_memory": Refusal(
        args=(
            "device=cpu",
            "nproc_per_node=2",
            "backend=fsdp",
            "batch.micro_batch_size=65536",
            "model.seq_len=8192",
        ),
        # a key given, with a value that fits (trial 24: the line named the model alone)
        last_line_has=(
            "(model=gpt-tiny)",
            "2 ranks need about",
            "GiB is free now",
            "(the largest power of two that fits the memory free now and ends within timeout_s=1800 on ",
            "or pick a smaller model",  # device=cuda only where a GPU is visible (#700)
        ),
    ),
    "nvme_without_path": _invalid(("backend=zero3", "backend.offload_optimizer=nvme"), "backend.nvme_path"),
    "path_without_nvme": _invalid(("backend=zero3", "backend.nvme_path=/tmp"), "backend.nvme_path"),
    "memory_budget_eager": _invalid(("activation_checkpointing=memory_budget",), "activation_checkpointing"),
    # session 26: refused only in the job (a job folder made), now before Hydra: value_sets, MIN_BY_KEY
    "zero_stage": _refused_args(
        ("backend=deepspeed", "backend.zero_stage=4"),
        "backend.zero_stage=4: DeepSpeed ZeRO has stages 1, 2 and 3. Fix: set backend.zero_stage=3",
    ),
    "dp_shard_0": _refused("parallel.dp_shard=0", "parallel.dp_shard=0: must be a positive integer, or -1"),
    "dp_shard_minus_2": _refused(
        "parallel.dp_shard=-2", "parallel.dp_shard=-2: must be a positive integer, or -1 for the ranks"
    ),
    "repeat_minus_1": _refused(
        "repeat=-1", "repeat=-1: must be a round of repeats (0 to repeats - 1). Fix: drop"
    ),
    "max_micro_batch_0": _refused_args(
        ("batch=auto", "batch.max_micro_batch_size=0"),
        "batch.max_micro_batch_size=0: must be a positive integer. Fix: set batch.max_micro_batch_size=256",
    ),
    "pp_schedule_case": _refused(
        "parallel.pp_schedule=1f1b", "did you mean parallel.pp_schedule=1F1B? (options are case-sensitive)."
    ),
    "micro_batch_0": _refused(  # a lower bound the value alone decides: before Hydra (session 25)
        "batch.micro_batch_size=0", "batch.micro_batch_size=0: must be a positive integer. Fix: set"
    ),
    "timeout_0": _refused(
        "timeout_s=0", "timeout_s=0: must be a finite number of seconds > 0. Fix: set e.g."
    ),
    "single_2_ranks": _invalid(("backend=single", "nproc_per_node=2"), "backend"),
    "cuda": _invalid(("device=cuda",), "device"),
    "fp16_cpu": _invalid(("precision=fp16", "device=cpu"), "precision"),
    "nproc_two": _invalid(("nproc_per_node=two",), "nproc_per_node"),
    # layouts (issue 23): a layout on a data-parallel backend; TP that does not split the KV heads
    "tp_on_ddp": _invalid(("backend=ddp", "device=cpu", "nproc_per_node=2", "parallel.tp=2"), "parallel.tp"),
    "tp_kv_heads": _invalid(
        ("model=llama-tiny", "backend=fsdp", "device=cpu", "nproc_per_node=4", "parallel.tp=4"), "parallel.tp"
    ),
    # optim.in_backward: a global-norm clip needs every gradient at once; DDP steps after its buckets
    "in_backward_clip": _invalid(("device=cpu", "optim.in_backward=true"), "optim.grad_clip"),
    "in_backward_ddp": _invalid(
        ("device=cpu", "backend=ddp", "nproc_per_node=2", "optim.in_backward=true", "optim.grad_clip=0"),
        "optim.in_backward",
    ),
    "zero2-stage3": Refusal(
        args=("backend=zero2", "backend.zero_stage=3", "device=cpu"),
        line_starts="flopsweep: Invalid config: backend.zero_stage=3: contradicts backend=zero2, "
        "which is ZeRO stage 2.",
    ),
    # composition: Hydra refuses a wrong type or an unknown key or option (exit 1), no record
    "typo_type": _refused("batch.micro_batch_size=abc", "is not a whole number. Fix: "),  # was Hydra's
    "typo_key": _refused("model.n_layers=3", "no such key. Fix: did you mean model.n_layer"),  # was Hydra's
    "typo_option": _refused("backend=zero9", "zero9 is no option of backend"),  # was Hydra's option list
    # session 20's trial: Hydra's grammar (4-5 lines), a sweep without -m ("Ambiguous value", 6 lines),
    # a hydra.* key of another sweeper (7 lines "Could not override"): one line, exit 2, before Hydra
    "grammar_unicode": _refused("tag=ünïcødé", "Fix: quote the value as one string, 'tag=\"ünïcødé\"'"),
    "sweep_without_m": _refused("tag=a,b", "several values are a sweep, one job each"),
    # Hydra's sweep functions: a ConfigLoader traceback (glob beside a plan key), 0 jobs and "0 ok" (a
    # key's glob alone), a traceback (interval), Hydra's five lines (a float range of an int key)
    **{
        f"sweep_function_{name}": Refusal(
            args=(override, *beside),
            sweep=True,
            stderr_has=(words,),
            line_starts=f"flopsweep: Invalid config: {shown}: ",
            lines=1,
            record=None,
        )
        for name, override, beside, shown, words in (
            ("key_glob", "seed=glob(*)", (), "seed=glob(*)", "seed is a key, so the sweep would run no job"),
            ("key_glob_plan", "seed=glob(*)", ("plan=true", "plan_gpu=H100"), "seed=glob(*)", "Fix: list"),
            ("interval", "seed=interval(0,4)", (), "seed=interval(0,4)", "interval() is a range for Optuna"),
            (
                "float_range",
                "seed=range(1.5,3.5,0.5)",
                (),
                "seed=range(1.5,3.5,0.5)",
                "e.g. seed=range(1,4,1).",
            ),
            (
                "params_axis_empty",
                "hydra.sweeper.params.seed=",
                (),
                "hydra.sweeper.params.seed=",
                "gives the sweep axis seed no value",
            ),  # Hydra: an AssertionError traceback
            (
                "params_axis_null_params",
                "hydra.sweeper.params.seed=3",
                (),
                "hydra.sweeper.params.seed=3",
                "Fix: sweep seed itself on the command line: -m seed=3.",
            ),
            (
                "params_axis_not_in_file",
                "+sweep=smoke",
                ("hydra.sweeper.params.seed=3",),
                "hydra.sweeper.params.seed=3",
                "Fix: +hydra.sweeper.params.seed=3.",
            ),  # "not in struct"
            (
                "tuner_float_count",
                "hydra/sweeper=tune",
                ("hydra.sweeper.initial=1e3",),
                "hydra.sweeper.initial=1e3",  # as typed (#1064; was 1000.0)
                "Fix: write it without a point or exponent: hydra.sweeper.initial=1000.",
            ),
        )
    },
    "sweep_of_a_hundred_million_jobs": Refusal(  # Hydra built every combination in memory, for minutes
        args=("seed=range(0,100000)", "model.n_layer=range(1,1000)"),
        sweep=True,
        stderr_has=("the sweep would run 99900000 jobs (100000 x 999), over the bound of 10000",),
        line_starts="flopsweep: Invalid config: seed=range(0,100000): ",
        lines=1,
        record=None,
    ),
    "hydra_key_of_the_tuner": Refusal(
        args=("hydra.sweeper.eta=3", "seed=0,1"),
        sweep=True,
        stderr_has=("belongs to hydra/sweeper=tune, not to hydra/sweeper=basic_batched",),
        line_starts="flopsweep: Invalid config: hydra.sweeper.eta=3: ",
        lines=1,
        record=None,
    ),
    # before Hydra composes (exit 2, one line, no record, no directory); the in-process matrix of these
    # classes is BAD_INPUTS (tests/unit/test_failures.py)
    "key_of_another_option": Refusal(
        args=("backend.zero_stage=2", "device=cpu"),  # a key of backend=deepspeed only
        every_line_has="belongs to",
        stderr_has=("backend.zero_stage",),
        lines=1,
        record=None,
    ),
    "unset_env_interpolation": Refusal(
        args=("tag=${oc.env:FLOPSWEEP_SURELY_UNSET_VAR}", "device=cpu"),
        line_starts="flopsweep: Invalid config: tag=",
        stderr_has=("Fix:",),
        lines=1,
        record=None,
    ),
    "group_null": Refusal(  # Hydra's ValueError traceback before issue 40
        args=("backend=null", "plan=true"), line_starts="flopsweep: Invalid config: ", lines=1, record=None
    ),
    "option_key_null": Refusal(  # a key of the picked option's schema (model=gpt-tiny): Hydra's was 5 lines
        args=("model.name=null", "plan=true"), line_starts="flopsweep: Invalid config: ", lines=1, record=None
    ),
    "model_name_relabel": Refusal(  # session 24: trained gpt-tiny under the 8B's name, exit 0
        args=("device=cpu", "model.name=llama3.1-8b"),
        line_starts="flopsweep: Invalid config: model.name='llama3.1-8b': is the name of model=llama3.1-8b",
        last_line_has=("Fix: pick the option itself: model=llama3.1-8b, and drop model.name.",),
        lines=1,
        record=None,
    ),
    "model_arch_relabel": Refusal(  # session 24: GPT-2 blocks at the 8B's sizes under the Llama name
        args=("model=llama3.1-8b", "model.arch=gpt2", "plan=true"),
        line_starts="flopsweep: Invalid config: model.arch='gpt2': is the family of the model option",
        lines=1,
        record=None,
    ),
    "model_name_sweep": Refusal(  # session 24: two identical jobs under a name of no model
        args=("plan=true", "model.name=a,a"),
        sweep=True,
        line_starts="flopsweep: Invalid config: model.name='a': is no model option's name",
        lines=1,
        record=None,
    ),
    "sweep_preset_and_option": Refusal(  # +sweep=blocksparse-2k sets attention's knobs
        args=("+sweep=blocksparse-2k", "attention=sdpa", "plan=true"),
        sweep=True,
        line_starts="flopsweep: Invalid config: ",
        lines=1,
        record=None,
    ),
    "sort_range": Refusal(
        args=("seed=sort(range(0,3))",), sweep=True, stderr_has=("seed=0,1,2",), record=None
    ),
    "bad_objective": Refusal(
        args=("objective=model_tflops_per_device,nope",),
        sweep=True,
        every_line_has="objective='nope'",
        record=None,
    ),
    "repeats_with_optuna": Refusal(
        args=("repeats=2", "hydra/sweeper=optuna_objective", "device=cpu"),
        sweep=True,
        every_line_has="repeats=2: the rounds come from flopsweep's basic sweeper",
        record=None,
    ),
    # session 21's trial (docs/reliability-2.md): Hydra's 14 lines for a hydra/ group's unknown option; a
    # control character echoed raw into the terminal; a price that is not finite refused by each of 540
    # set-ups (24 lines, exit 1); the tuner's parameter out of range (exit 1, not 2 as every config error)
    "hydra_group_option": Refusal(
        args=("hydra/sweeper=tunex", "seed=0,1"),
        sweep=True,
        stderr_has=("Fix: pick one of basic_batched, optuna_objective, tune, e.g. hydra/sweeper=tune.",),
        line_starts="flopsweep: Invalid config: hydra/sweeper=tunex: tunex is no option of hydra/sweeper",
        lines=1,
        record=None,
    ),
    "control_character_shown_not_obeyed": Refusal(
        args=("tag=a\x1b[31mb",),
        stderr_has=(
            "Invalid config: tag=a\\x1b[31mb: its value holds a control character, \\x1b (character 6)",
            "Fix: remove it",
        ),
        lines=1,
        record=None,
    ),
    # session 22's trial: what Hydra still answered in several lines (exit 1): a group's + forgotten, an
    # unknown flag (argparse's usage block), a config folder elsewhere; a sweep list's trailing comma
    "plus_forgotten": Refusal(
        args=("sweep=smoke",),
        line_starts="flopsweep: Invalid config: sweep=smoke: sweep is a group added with + (no default picks "
        "one). Fix: +sweep=smoke",
        lines=1,
        record=None,
    ),
    "unknown_flag": Refusal(
        args=("--bogus",),
        line_starts="flopsweep: Invalid config: --bogus: is no flag of flopsweep (Hydra's command line). ",
        lines=1,
        record=None,
    ),
    "config_path_elsewhere": Refusal(
        args=("--config-path", "/etc"),
        line_starts="flopsweep: Invalid config: --config-path /etc: is another folder than conf/; ",
        lines=1,
        record=None,
    ),
    "config_dir_missing": Refusal(
        args=("--config-dir", "/nonexistent-flopsweep-configs"),
        line_starts="flopsweep: Invalid config: --config-dir /nonexistent-flopsweep-configs: does not exist",
        lines=1,
        record=None,
    ),
    "trailing_comma": Refusal(
        args=("model=gpt-tiny,",),
        sweep=True,
        line_starts="flopsweep: Invalid config: model=gpt-tiny,: a trailing comma leaves an empty choice. "
        "Fix: model=gpt-tiny",
        lines=1,
        record=None,
    ),
    "plan_clusters_price_not_finite": Refusal(
        args=("plan=true", "plan_clusters=[H100:8]", "cost.usd_per_gpu_hour=inf"),
        line_starts="flopsweep: Invalid config: cost.usd_per_gpu_hour=inf: must be a finite number. Fix:",
        lines=1,
        record=None,  # a plan writes no record; refused before Hydra makes the run's folder (session 23)
    ),
    # session 22's trial: a sweeper without -m ran one plain job, exit 0; a bandwidth of no unit (100gbps
    # was read as 100 GB/s, ~80x a 100 Gb Ethernet)
    "sweeper_without_m": Refusal(
        args=("hydra/sweeper=tune", "device=cpu"),
        line_starts="flopsweep: Invalid config: hydra/sweeper=tune: a sweeper runs only under -m",
        last_line_has=("Fix: add -m (flopsweep -m hydra/sweeper=tune ...).",),
        lines=1,
        record=None,
    ),
    # session 25: nnodes=2's fix named hydra/launcher=slurm; without -m it ended in submitit's traceback
    "launcher_without_m": Refusal(
        args=("hydra/launcher=slurm", "nnodes=2", "device=cpu"),
        line_starts="flopsweep: Invalid config: hydra/launcher=slurm: a launcher runs only under -m",
        last_line_has=("Fix: add -m (flopsweep -m hydra/launcher=slurm ...).",),
        lines=1,
        record=None,
    ),
    "plan_cluster_bandwidth_unit": Refusal(
        args=("plan=true", "plan_clusters=[H100:8x8:100gbps]"),
        line_starts="flopsweep: Invalid config: plan_clusters='H100:8x8:100gbps': 100gbps says neither",
        last_line_has=("write 100GBps for 100 GB/s (gigabytes)", "or 100Gbps for 100 Gb/s (gigabits"),
        lines=1,
        record=None,  # a plan writes no record; refused before Hydra makes the run's folder (session 23)
    ),
    "tuner_parameter": Refusal(
        args=("hydra/sweeper=tune", "device=cpu", "hydra.sweeper.eta=1", "model=gpt-tiny,llama-tiny"),
        sweep=True,
        line_starts="flopsweep: Invalid config: hydra.sweeper.eta=1: must be a whole number of at least 2.",
        lines=1,
        record=None,
    ),
    # session 23's trial: refused in the job, after Hydra had made outputs/<date>/<time>/ (.hydra, an empty
    # run.log) or multirun/<date>/ where the user stood; now before Hydra starts (no folder, exit 2, one line)
    "plan_cluster_count_first": Refusal(
        args=("plan=true", "plan_clusters=[8xH100:100gbps]"),
        line_starts="flopsweep: Invalid config: plan_clusters='8xH100:100gbps': '8xH100' puts the count "
        "before the GPU. Fix: the GPU comes first: H100:8, then a network",
        lines=1,
        record=None,
        default_dir=True,
    ),
    # session 24's trial: fault.rank=1 without fault.kind ran, injecting nothing, and said nothing
    "fault_rank_without_kind": Refusal(
        args=("fault.rank=1",),
        line_starts="flopsweep: Invalid config: fault.rank=1: does nothing without fault.kind",
        last_line_has=("Fix: write backend=ddp fault.kind=raise nproc_per_node=2 fault.rank=1",),
        lines=1,
        record=None,
        default_dir=True,
    ),
    # session 24's trial (flagsio): two of Hydra's commands were its 16-line ValueError traceback
    "cfg_with_multirun": Refusal(
        args=("seed=0,1", "--cfg", "job"),
        sweep=True,
        line_starts="flopsweep: Invalid config: -m and --cfg job: Hydra runs one of --run, --multirun, --cfg",
        last_line_has=("Fix: flopsweep -m seed=0,1 (run the sweep), or flopsweep seed=0 --cfg job",),
        lines=1,
        record=None,
        default_dir=True,
    ),
    # a sweep file's axes (hydra.sweeper.params) count with the command line's: 10 x 1001 jobs
    "sweep_file_axes_over_bound": Refusal(
        args=("+sweep=smoke", "seed=range(0,1001)"),
        sweep=True,
        line_starts="flopsweep: Invalid config: sweep/smoke.yaml (hydra.sweeper.params): ",
        last_line_has=("the sweep would run 10010 jobs",),
        lines=1,
        record=None,
        default_dir=True,
    ),
    # Hydra: "FaultConfig (DictConfig) does not support deletion", a five-line block, exit 1
    "delete_a_key": Refusal(
        args=("~fault.rank",),
        line_starts="flopsweep: Invalid config: ~fault.rank: flopsweep's schema keeps every key",
        last_line_has=(
            "Fix: give the value you want, e.g. fault.rank=0 (its default), or drop ~fault.rank.",
        ),
        lines=1,
        record=None,
        default_dir=True,
    ),
    "plan_clusters_twice": Refusal(  # the job's plandecide.named_clusters, before Hydra
        args=("plan=true", "plan_clusters=[H100-80GB:8,H100-SXM:8]"),
        line_starts="flopsweep: Invalid config: plan_clusters=['H100-80GB:8', 'H100-SXM:8']: names one "
        "cluster twice",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "tuner_budget_multi": Refusal(  # --multi: argparse's prefix of --multirun, which the -m checks missed
        args=("--multi", "hydra/sweeper=tune", "hydra.sweeper.budget_gpu_s=0"),
        line_starts="flopsweep: Invalid config: hydra.sweeper.budget_gpu_s=0: must be a finite number",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "repeats_multir": Refusal(  # was "the rounds are jobs of a sweep. Fix: add -m" beside --multir
        args=("--multir", "repeats=2", "hydra/sweeper=optuna_objective", "device=cpu"),
        line_starts="flopsweep: Invalid config: repeats=2: the rounds come from flopsweep's basic sweeper",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "plan_gpu_unknown": Refusal(  # was exit 0: the plan's one row invalid, its line printed twice
        args=("plan=true", "plan_gpu=H999"),
        line_starts="flopsweep: Invalid config: plan_gpu='H999': is no device of the peak table (H100, "
        "H100-80GB,",
        stderr_has=("A100-80GB", "Fix: use one of those, e.g. plan_gpu="),
        lines=1,
        record=None,
        default_dir=True,
    ),
    "plan_gpu_unknown_in_the_job": Refusal(  # a value Hydra resolves (or a file gives): the job's one line
        args=("plan=true", "plan_gpu=${tag}", "tag=H999"),
        line_starts="flopsweep: Invalid config: plan_gpu='H999': is no device of the peak table (H100, "
        "H100-80GB,",
        lines=1,
        record=None,
        dir_made=True,
    ),
    "searchpath_package": Refusal(
        args=("hydra.searchpath=[pkg://flopsweep]",),
        line_starts="flopsweep: Invalid config: hydra.searchpath=[pkg://flopsweep]: names a Python package, "
        "which Hydra would import",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "searchpath_folder": Refusal(
        args=("+hydra.searchpath=[file://myconf]", "seed=0,1"),
        sweep=True,
        line_starts="flopsweep: Invalid config: +hydra.searchpath=[file://myconf]: adds a folder whose YAML",
        lines=1,
        record=None,
        default_dir=True,
    ),
    # session 23's trial, continued: refused in the job (exit 2 after Hydra had made the folder, or the plan's
    # row invalid, its line printed twice, exit 0); now before Hydra, by the job's own checks
    "calibration_missing_tuner": Refusal(  # was one line, exit 2, and an empty multirun/<date>/<time>/
        args=("hydra/sweeper=tune", "predict.calibration=/nonexistent-flopsweep-calibration"),
        sweep=True,
        line_starts="flopsweep: Invalid config: predict.calibration='/nonexistent-flopsweep-calibration': "
        "does not exist. Fix: give a run's metrics.json or a sweep folder",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "plan_gpu_on_the_cpu": Refusal(  # rules.planned_gpu_on_the_cpu, before Hydra
        args=("plan=true", "plan_gpu=H100", "device=cpu"),
        line_starts="flopsweep: Invalid config: plan_gpu='H100': plans for GPUs, and device=cpu places the "
        "ranks",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "calibration_missing_in_the_job": Refusal(  # a value Hydra resolves: the plan's one row invalid, once
        args=("plan=true", "predict.calibration=${tag}", "tag=/nonexistent-flopsweep-calibration"),
        line_starts="flopsweep: Invalid config: predict.calibration='/nonexistent-flopsweep-calibration': "
        "does not exist.",
        lines=1,
        record=None,
        dir_made=True,
    ),
    **(
        {
            "plan_here_without_a_gpu": Refusal(  # was torch's refusal in the job, outputs/<date>/<time>/ left
                args=("plan=true", "plan_clusters=[here]"),
                line_starts="flopsweep: Invalid config: plan_clusters='here': this machine has no GPU. Fix: "
                "name the GPU: e.g. H100:1x8.",
                lines=1,
                record=None,
                default_dir=True,
            )
        }
        if no_gpu_here()  # a GPU machine plans its own GPUs
        else {}
    ),
    # launchers: refused before the first submission or job (exit 1)
    "slurm_tasks_per_node": _launcher("hydra.launcher.tasks_per_node=3"),
    "slurm_nodes": _launcher("hydra.launcher.nodes=2"),
    "slurm_gpus_per_node": _launcher("hydra.launcher.gpus_per_node=2"),
    "slurm_nproc_auto": _launcher("nproc_per_node=auto", before_hydra=True),
    "slurm_nproc_list": _launcher("nproc_per_node=1,2"),
    "pool_job_bigger_than_pool": Refusal(
        args=(*POOL, "hydra.launcher.slots=[0,1]", "backend=ddp", "nproc_per_node=1,4"),
        sweep=True,
        status=2,
        last_line_has=("a job of this sweep needs 4 devices (nproc_per_node=4); the pool has 2 (0,1). Fix:",),
        record=None,
    ),
    "pool_cpu_without_slots": Refusal(  # session 29: was the launcher's line, exit 1, an empty sweep folder
        args=(*POOL, "seed=0,1"),
        sweep=True,
        line_starts="flopsweep: Invalid config: hydra.launcher.slots=null: no GPU was found to pool",
        lines=1,
        record=None,
        default_dir=True,
    ),
    # session 29's trial: each one line before Hydra, nothing made
    "list_key_swept_by_element": Refusal(
        args=("plan=true", "plan_clusters=[H100:8]", "space.layouts=dp,tp2"),
        sweep=True,
        line_starts="flopsweep: Invalid config: space.layouts=dp,tp2: space.layouts takes a list",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "sweep_value_twice": Refusal(
        args=("device=cpu", "seed=1,1"),
        sweep=True,
        line_starts="flopsweep: Invalid config: seed=1,1: lists 1 more than once",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "resume_swept": Refusal(
        args=("device=cpu", "resume=true,false"),
        sweep=True,
        line_starts="flopsweep: Invalid config: resume=true,false: is swept",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "run_dir_root": Refusal(
        args=("plan=true", "device=cpu", "hydra.run.dir=/"),
        line_starts="flopsweep: Invalid config: hydra.run.dir=/: is the root of the file system",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "group_option_as_a_path": Refusal(
        args=("plan=true", "+sweep=../conf/config"),
        sweep=True,
        line_starts="flopsweep: Invalid config: +sweep=../conf/config: ../conf/config is no option of sweep",
        lines=1,
        record=None,
        default_dir=True,
    ),
    # session 30's trial (docs/reliability-4.md #247-#252): the job's lines, after Hydra had made
    # outputs/<date>/<time>/ with an invalid record; now before Hydra (no folder, exit 2, one line)
    "nproc_per_node_zero": Refusal(
        args=("model=llama-tiny", "device=cpu", "nproc_per_node=0"),
        line_starts="flopsweep: Invalid config: nproc_per_node=0: must be a positive integer",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "unknown_key_added": Refusal(
        args=("model=llama-tiny", "device=cpu", "+bogus=1"),
        line_starts="flopsweep: Invalid config: bogus=1: is not a top-level key of the config",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "model_config_missing": Refusal(
        args=("model=hf", "model.config=nonexistent-config", "device=cpu"),
        line_starts="flopsweep: Invalid config: model.config='nonexistent-config': is neither a shipped",
        lines=1,
        record=None,
        default_dir=True,
    ),
    "plan_objective_not_predicted": Refusal(
        args=("plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]", "objective=hfu"),
        line_starts="flopsweep: Invalid config: objective='hfu': is measured by a run but not predicted",
        lines=1,
        record=None,
        default_dir=True,
    ),
}
"""The refusals of ``python run.py``, by name (the test id). A new refusal is a new row."""


def _run(case: Refusal, where: Path) -> subprocess.CompletedProcess:
    if case.default_dir:  # from an empty folder, Hydra's default output folders
        where.mkdir(parents=True)
        return run_py(*(("-m",) if case.sweep else ()), *case.args, cwd=where, timeout=300)
    directory = f"hydra.sweep.dir={where}" if case.sweep else f"hydra.run.dir={where}"
    return run_py(*(("-m",) if case.sweep else ()), *case.args, directory, timeout=300)


@pytest.fixture(scope="module")
def refused(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[concurrent.futures.Future, Path]]]:
    """The selected rows' runs, two at a time, started when the first row's test asks: ``{name: (a
    future of its CompletedProcess, its run or sweep directory)}``, each row's directory ``out`` in
    a folder of its own."""
    names = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "name" in item.callspec.params
    ]
    base = tmp_path_factory.mktemp("refusals")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = {
            name: (pool.submit(_run, REFUSALS[name], base / name / "out"), base / name / "out")
            for name in names
        }
        yield runs
        for future, _ in runs.values():
            future.cancel()  # after a -x stop: rows not yet started never start


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REFUSALS))
def test_run_py_refuses_before_any_worker(refused, name: str) -> None:
    """Each refusal through ``python run.py`` as a user types it: its exit status and message, no
    traceback, no worker or job launched, and the record (or none) it leaves."""
    case = REFUSALS[name]
    future, where = refused[name]
    proc = future.result()
    output = proc.stdout + proc.stderr
    assert proc.returncode == case.status, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in output
    assert (
        "launching" not in output and "[flopsweep rank" not in proc.stdout and "pool: job" not in proc.stdout
    )
    lines = proc.stderr.strip().splitlines()
    assert all(text in proc.stderr for text in case.stderr_has), proc.stderr[-2000:]
    assert all(text in lines[-1] for text in case.last_line_has), lines[-1]
    if case.lines is not None:
        assert len(lines) == case.lines, proc.stderr[-2000:]
    if case.line_starts is not None:
        [line] = [x for x in lines if "Invalid config" in x]
        assert line.startswith(case.line_starts), line
    if case.every_line_has is not None:
        assert lines and all(case.every_line_has in line for line in lines), lines
    if case.default_dir:  # no outputs/<date>/<time>/ (.hydra, run.log) nor multirun/<date>/ left behind
        assert case.record is None and not list(where.iterdir()), sorted(where.rglob("*"))
    elif case.record is None:
        assert not list(where.parent.rglob("metrics.json"))
        assert case.dir_made or not where.exists(), sorted(where.rglob("*"))
    elif not case.sweep:  # the job's checks refused a single run: nothing written (lifecycle.keeps_refusal)
        assert not list(where.parent.rglob("metrics.json")) and not list(where.parent.rglob(".hydra"))
        assert not where.exists() or [p.name for p in where.iterdir()] == ["run.log"], sorted(
            where.rglob("*")
        )
    else:
        [record] = records(where)
        assert record["status"] == case.record and record["error"]["phase"] == "config"
        assert all(v is None for v in record["metrics"].values())


@pytest.mark.slow
def test_help_is_flopsweeps_own_and_hydra_help_hydras(tmp_path: Path) -> None:
    """``flopsweep --help`` (the console script, from another folder) and ``python run.py --help`` print
    ``conf/hydra/help/flopsweep.yaml``: the groups of conf/ (no ``schema/*``), the docs; ``--hydra-help``
    stays Hydra's. Hydra's generic help said "run is powered by Hydra" and listed ``schema/*``."""
    from integration.test_shared_safety_4 import console_scripts

    script = console_scripts(tmp_path / "bin")["flopsweep"]
    own = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    via_run_py = run_py("--help", timeout=300)
    hydras = run_py("--hydra-help", timeout=300)
    assert own.returncode == via_run_py.returncode == hydras.returncode == 0, own.stderr + via_run_py.stderr
    assert own.stdout == via_run_py.stdout and not own.stderr, own.stderr
    assert own.stdout.startswith("flopsweep: measure training throughput")
    assert "+sweep (added with +): " in own.stdout and "Docs: " in own.stdout and "schema/" not in own.stdout
    assert "powered by Hydra" not in own.stdout
    assert hydras.stdout.startswith("Hydra (") and "== Flags ==" in hydras.stdout


@pytest.mark.slow
@pytest.mark.parametrize("args", [("--help",), ("--cfg", "job")])
def test_output_to_a_reader_that_went_away_ends_quietly(args: tuple[str, ...]) -> None:
    """``flopsweep --help | head -3`` printed a BrokenPipeError traceback (``--cfg job``: through Hydra's
    ``run_and_report``, exit 1). The pipe's reading end is closed before ``run.py`` starts, so that its first
    write meets EPIPE whatever the timing: nothing on stderr, exit 0
    (``flopsweep.streams.ClosedPipeGuard``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, RUN_PY, *args],
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr[-2000:]
