"""Session 35's new-user trial (docs/reliability-5.md #321-#326): the pool launcher's refusal at exit 2 with
``device=auto`` too, a tuner given nothing to tune, torch's exit-time FakeTensor lines, Hydra's shell
completion and a bad ``OMP_NUM_THREADS``. The search keys of the axis that does not grow (#321) are
``tests/unit/test_key_needs.py``'s. In process: the command lines run in
``tests/integration/test_new_user_35.py``."""

from __future__ import annotations

import logging
import logging.config

import pytest

from flopsweep.cli import omp_threads_problem
from flopsweep.flags import completes, completion_problem
from flopsweep.override_schema import CONF, read_conf_yaml
from flopsweep.pool import cpu_pool_problem


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


NO_GPU = (
    "Invalid config: hydra.launcher.slots=null: no GPU was found to pool (device={}). Fix: give the pool's "
    "devices, e.g. hydra.launcher.slots=[0,1] (device=cpu: each job gets slots of its own)."
)


def test_the_pool_without_a_gpu_is_refused_before_hydra_whatever_the_device() -> None:
    """#322: ``-m hydra/launcher=pool seed=0,1`` on a machine without a GPU: the launcher's line, exit 1
    (``device=auto``), where ``device=cpu`` got the same line before Hydra, exit 2. Now both before Hydra,
    when the GPUs counted are none; a GPU, a slot list, ``CUDA_VISIBLE_DEVICES`` or a sweep file (which may
    give the slots) leaves it to the launcher."""
    argv = ["-m", "hydra/launcher=pool", "seed=0,1"]
    assert cpu_pool_problem(argv, environ={}, detected=lambda: 0) == NO_GPU.format("auto")
    assert cpu_pool_problem([*argv, "device=auto"], environ={}, detected=lambda: 0) == NO_GPU.format("auto")
    assert cpu_pool_problem([*argv, "device=cuda"], environ={}, detected=lambda: 0) == NO_GPU.format("cuda")
    assert cpu_pool_problem([*argv, "device=cpu"], environ={}) == NO_GPU.format("cpu")
    assert cpu_pool_problem(argv, environ={}, detected=lambda: 2) is None
    assert cpu_pool_problem(argv, environ={}) is None  # not asked: the launcher's
    assert cpu_pool_problem([*argv, "hydra.launcher.slots=[0,1]"], environ={}, detected=lambda: 0) is None
    assert cpu_pool_problem(argv, environ={"CUDA_VISIBLE_DEVICES": "0"}, detected=lambda: 0) is None
    assert cpu_pool_problem([*argv, "+sweep=smoke"], environ={}, detected=lambda: 0) is None
    from hydra_plugins.flopsweep_pool import detect_gpus

    if detect_gpus() == 0:  # this machine, through run.py's checks: the same line as device=cpu's
        assert refusal(argv) == NO_GPU.format("auto")


TUNE_LINE = (
    "Invalid config: hydra/sweeper=tune: one set-up, nothing to tune (no sweep axis, no space.* list). "
    "Fix: add sweep axes (backend=ddp,fsdp) or space.* lists, or run it plainly (repeats=3 for an interval)."
)


@pytest.mark.parametrize("extra", [[], ["model=llama-tiny", "nproc_per_node=2", "backend=ddp"]])
def test_a_tuner_with_nothing_to_tune_is_refused(extra: list[str]) -> None:
    """#323: ``-m hydra/sweeper=tune device=cpu`` ran its one set-up 3 times and named it the winner."""
    assert refusal(["-m", "hydra/sweeper=tune", "device=cpu", *extra]) == TUNE_LINE


@pytest.mark.parametrize("axis", ["seed=range(0,1)", "seed=choice(0)"])
def test_an_axis_of_one_value_is_nothing_to_tune_either(axis: str) -> None:
    """The re-trial of #323: ``seed=range(0,1)`` passed as an axis and ran 3 jobs of one set-up."""
    assert refusal(["-m", "hydra/sweeper=tune", "device=cpu", axis]) == TUNE_LINE


@pytest.mark.parametrize(
    "given",
    [
        ["backend=ddp,fsdp"],
        ["space.backends=[ddp,fsdp]"],
        ["+sweep=smoke"],
        ["hydra.sweeper.params.seed=0,1"],
        ["seed=range(0,2)"],
    ],
)
def test_a_tuner_with_an_axis_a_space_or_a_sweep_file_is_not_refused_for_it(given: list[str]) -> None:
    from hydra_plugins.flopsweep_tune import nothing_to_tune_problem

    assert nothing_to_tune_problem(["-m", "hydra/sweeper=tune", "device=cpu", *given]) is None
    assert nothing_to_tune_problem(["-m", "device=cpu"]) is None  # the basic sweeper: no tuner
    assert refusal(["--cfg", "job", "hydra/sweeper=tune", "device=cpu"]) is None  # prints it: nothing tuned


def test_torch_logs_no_fake_tensor_stats_at_exit_under_the_jobs_logging() -> None:
    """#324: Ctrl-C or SIGTERM as the first job started: torch's atexit hook
    (``torch._subclasses.fake_tensor.dump_cache_stats``) logged ``FakeTensor cache stats`` at INFO after
    flopsweep's last line, Hydra's job logging having set the root logger to INFO. ``run.py`` holds that
    logger at WARNING, which the job's logging config (applied after it) keeps."""
    import torch._subclasses.fake_tensor as fake_tensor

    import run

    job = read_conf_yaml(f"{CONF}/hydra/job_logging/flopsweep.yaml")
    job["handlers"].pop("file")
    job["root"]["handlers"] = ["console"]
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    try:
        logging.config.dictConfig(job)
        assert root.level == logging.INFO  # Hydra's job log: what let the lines through
        root.addHandler(Keep())
        fake_tensor.dump_cache_stats()
        assert run.QUIET_AT_EXIT == ("torch._subclasses.fake_tensor",)
        assert [r.getMessage() for r in seen if r.name.startswith("torch")] == []
        assert logging.getLogger("torch._subclasses.fake_tensor").getEffectiveLevel() == logging.WARNING
    finally:
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])


@pytest.mark.parametrize(
    "argv", [["--shell-completion", "install=bash"], ["-sc", "install=zsh"], ["-sc", "uninstall=fish"]]
)
def test_shell_completion_passes_to_hydra(argv: list[str]) -> None:
    """#325: ``flopsweep --shell-completion install=bash`` (Hydra's documented form) was refused as a config
    key (``install=bash: no such key``). Its words are no overrides: Hydra answers them."""
    assert completes(argv) and refusal(argv) is None
    assert completes(["--shell-comp", "install=bash"])  # a prefix, as Hydra's parser reads it
    assert not completes(["install=bash"])


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (
            ["--shell-completion"],
            "Invalid config: --shell-completion no subcommand: takes one of install=SHELL",
        ),
        (
            ["-sc", "install=bash", "seed=1"],
            "Invalid config: --shell-completion install=bash seed=1: takes one of",
        ),
        (["-sc", "install=tcsh"], "Invalid config: install=tcsh: 'tcsh' is no shell of Hydra's completion"),
        (["-m", "-sc", "install=bash"], "Invalid config: -m and -sc: Hydra runs one of"),
    ],
)
def test_shell_completion_hydra_would_answer_with_a_traceback_is_one_line(
    argv: list[str], start: str
) -> None:
    """#325: bare ``--shell-completion`` was Hydra's ``ValueError: Expecting one subcommand`` traceback."""
    line = refusal(argv)
    assert line is not None and line.startswith(start) and "\n" not in line, line
    if "-m" not in argv:
        assert line.endswith('Fix: eval "$(flopsweep -sc install=bash)" (or zsh, fish) in the shell.'), line


def test_a_query_without_comp_line_is_one_line() -> None:
    """``-sc query=bash`` typed by hand: Hydra's ``KeyError: 'COMP_LINE'`` traceback; the installed function
    sets it."""
    line = completion_problem(["-sc", "query=bash"], environ={})
    assert line == (
        "Invalid config: query=bash: completes the line in COMP_LINE, which is not set (the installed "
        'completion sets it). Fix: eval "$(flopsweep -sc install=bash)" (or zsh, fish) in the shell, then '
        "press Tab after flopsweep."
    )
    assert completion_problem(["-sc", "query=bash"], environ={"COMP_LINE": "flopsweep mod"}) is None


@pytest.mark.parametrize("value", ["abc", "0", "-1", "2.5", "4,x", "٣", "1 2"])
def test_omp_num_threads_openmp_cannot_read_is_refused(value: str) -> None:
    """#326: ``OMP_NUM_THREADS=abc``: libgomp's ``Invalid value`` line and each rank at torch's default
    (2 ranks x 2 threads on 2 cores, where unset gives 1 each); flopsweep said nothing."""
    assert omp_threads_problem({"OMP_NUM_THREADS": value}) == (
        f"OMP_NUM_THREADS={value!r}: is no positive whole number of threads (OpenMP would ignore it and each "
        "rank take torch's default). Fix: unset OMP_NUM_THREADS (each CPU rank takes its share of the "
        "cores), or set it to a positive integer such as OMP_NUM_THREADS=1."
    )


@pytest.mark.parametrize(
    "environ", [{}, {"OMP_NUM_THREADS": ""}, {"OMP_NUM_THREADS": "4"}, {"OMP_NUM_THREADS": "4,2"}]
)
def test_omp_num_threads_openmp_reads_passes(environ: dict[str, str]) -> None:
    assert omp_threads_problem(environ) is None
