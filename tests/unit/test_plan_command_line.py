"""Session 23's command-line fixes of a plan and the tuner: the keys a refusal inside the job used to
answer (after Hydra had made the run's folder: ``outputs/<date>/<time>/`` with ``.hydra`` and an empty
``run.log``, or an empty ``multirun/<date>/``) are refused before Hydra starts
(``flopsweep.plan_command_line.command_line_problem``, ``hydra_plugins.flopsweep_tune.command_line_problem``),
with
the lines the job gives; the GPU names a refusal lists are those a user types
(``flopsweep.gpu_memory.typed_gpu_names``).

In process: the command lines themselves run in ``tests/integration/test_refusals.py`` (rows
``plan_cluster_count_first``, ``plan_gpu_unknown``, ``tuner_budget_multi``, ...).
"""

from __future__ import annotations

import pytest

from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError
from flopsweep.gpu_memory import planned_gpu_bytes, typed_gpu_names
from flopsweep.plan_command_line import command_line_problem
from hydra_plugins.flopsweep_tune import PARAMETERS, TuneSweeper, parameter_problem
from hydra_plugins.flopsweep_tune import command_line_problem as tuner_problem


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def _line(text: str) -> str:
    """What ``parse_cluster(text)`` refuses it with."""
    with pytest.raises(ConfigError) as caught:
        parse_cluster(text)
    return str(caught.value)


# --- plan_clusters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        "8xH100:100gbps",
        "H999:8",
        "H100:8x8:100gbps",
        "H100:8x8:40GBPS",
        "H100",
        "H100:12",
        "A100:8",
        "H100:0x8",
    ],
)
def test_each_plan_clusters_entry_is_refused_before_hydra_with_the_jobs_line(entry):
    """The job parsed the list and refused it in one line, after Hydra had made the run's folder. Each
    entry is parsed before Hydra now: the same line (``parse_cluster``'s), first of the list or not, in a
    sweep of lists."""
    line = _line(entry)
    assert line.startswith(f"Invalid config: plan_clusters='{entry}': ") and "Fix: " in line
    assert command_line_problem(["plan=true", f"plan_clusters=[{entry}]"]) == line
    assert refusal(["plan=true", f"plan_clusters=[H100:8,{entry}]"]) == line
    assert refusal(["-m", "plan=true", f"plan_clusters=[H100:8],[H200:8,{entry}]"]) == line


def test_what_only_the_job_can_check_is_left_to_it(monkeypatch):
    """``here`` on a machine that may have a GPU asks torch, in the job (no check before Hydra imports
    it); an interpolation is resolved by Hydra; good names pass."""
    monkeypatch.setattr("flopsweep.local_gpus.no_gpu_here", lambda: False)  # a GPU machine's answer
    assert (
        command_line_problem(["plan=true", "plan_clusters=[here,H100:8x8:ib400,H200:64,A100-80GB:1x8]"])
        is None
    )
    assert command_line_problem(["plan=true", "plan_clusters=[here:2x8,'${tag}']", "tag=H999:8"]) is None
    assert refusal(["plan=true", "plan_clusters=[H100:8x8,H200:1x8:320Gbps]", "plan_gpu=H100-80GB"]) is None


def test_here_on_a_machine_without_a_gpu_is_refused_before_hydra_with_the_jobs_line(monkeypatch):
    """``plan_clusters=[here]`` without a GPU was refused in the job (torch: none), after Hydra had made
    ``outputs/<date>/<time>/``. Where no GPU device file exists and ``nvidia-smi`` lists none
    (``local_gpus.no_gpu_here``, torch-free), the same line before Hydra: ``parse_cluster``'s with this
    machine's ``("", 0)``, as the job's ``this_machine`` gives it without a GPU."""
    from flopsweep.job.plandecide import named_clusters

    with pytest.raises(ConfigError) as caught:
        parse_cluster("here:2x8", ("", 0))  # the job's, torch finding no GPU
    line = str(caught.value)
    assert line == (
        "Invalid config: plan_clusters='here:2x8': this machine has no GPU. Fix: name the GPU: e.g. H100:1x8."
    )
    monkeypatch.setattr("flopsweep.local_gpus.no_gpu_here", lambda: True)  # this machine's answer, below
    assert command_line_problem(["plan=true", "plan_clusters=[H100:8,here:2x8]"]) == line
    assert refusal(["-m", "plan=true", "plan_clusters=[H100:8],[here:2x8]"]) == line
    assert named_clusters(["here:2x8"], before_hydra=True) == []  # here unknown: the job's


def test_no_gpu_here_is_said_only_where_torch_finds_none():
    """``no_gpu_here`` (device files, ``nvidia-smi``) never says "no GPU" where torch finds one: the
    refusal before Hydra is the job's, never a GPU machine's false one."""
    from flopsweep.local_gpus import no_gpu_here, this_machine

    if no_gpu_here():
        assert this_machine() == ("", 0)
        assert refusal(["plan=true", "plan_clusters=[here]"]).endswith(
            "this machine has no GPU. Fix: name the GPU: e.g. H100:1x8."
        )
    else:
        assert refusal(["plan=true", "plan_clusters=[here]"]) is None


def test_an_empty_entry_beside_others_is_refused_as_the_job_refuses_it():
    line = command_line_problem(["plan=true", "plan_clusters=[H100:8,'']"])
    said = "holds an empty name. Fix: drop it: plan_clusters=[H100:8]."
    assert line == f"Invalid config: plan_clusters=['H100:8', '']: {said}"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["plan_clusters=[H100:8,H100:8]"],
            "plan_clusters=['H100:8', 'H100:8']: names H100:1x8:ib400 twice.",
        ),
        (
            ["plan_clusters=[H100-80GB:8,H100-SXM:8]"],
            "plan_clusters=['H100-80GB:8', 'H100-SXM:8']: names one cluster twice: H100-80GB:1x8",
        ),
        (
            ["plan_clusters=[H100:2x8,H100:2x8:ib400]"],
            "plan_clusters=['H100:2x8', 'H100:2x8:ib400']: names H100:2x8:ib400 twice.",
        ),
        (
            ["plan_clusters=[H100:8]", "space.top=0"],
            "space.top=0: must be at least 1. Fix: set e.g. space.top=5.",
        ),
        (
            ["plan_clusters=[H100:8]", "space.backends=[ddp,nope]"],
            "space.backends=[ddp,nope]: nope is not",  # as typed, not Python's ['ddp', 'nope']
        ),
        (
            ["plan_clusters=[H100:8]", "space.micro_batches=[0]"],
            "space.micro_batches=[0]: needs micro batches",
        ),
        (
            ["plan_clusters=[H100:8]", "space.min_headroom=1.5"],
            "space.min_headroom=1.5: is a share in [0, 1).",
        ),
        (["-m", "plan_clusters=[H100:8]", "space.top=5,0"], "space.top=0: must be at least 1."),
    ],
)
def test_the_plans_other_checks_of_its_clusters_and_space_come_before_hydra_too(hydra_compose, argv, said):
    """The job's checks of a ranking plan (``plandecide.checked``): one cluster twice, a ``space.*`` value;
    before Hydra now, the same line the job gives for the composed config."""
    from flopsweep.job.plandecide import checked

    flags = [a for a in argv if a == "-m"]
    argv = [*flags, "plan=true", *(a for a in argv if a != "-m")]
    line = command_line_problem(argv)
    assert line.startswith(f"Invalid config: {said}"), line
    assert refusal(argv) == line
    if not flags:
        with pytest.raises(ConfigError) as caught:
            checked(hydra_compose(argv))
        assert str(caught.value) == line


def test_a_default_network_replaced_by_predict_inter_node_gbps_is_another_cluster():
    """As the job places them (``plandecide.same_as``): ``H100:2x8`` takes ``predict.inter_node_gbps``,
    ``H100:2x8:ib400`` keeps its named 40 GB/s."""
    argv = ["plan=true", "plan_clusters=[H100:2x8,H100:2x8:ib400]"]
    assert command_line_problem(argv) is not None
    assert command_line_problem([*argv, "predict.inter_node_gbps=10"]) is None


@pytest.mark.parametrize(
    ("entry", "fix"),
    [
        ("8xH100", "H100:8"),
        ("8xH100:ib400", "H100:8:ib400"),
        ("16xH200:2x8", "H200:2x8"),
        ("8xH100:100gbps", "H100:8, then a network if any (ib400, 40GBps, 320Gbps)"),
    ],
)
def test_a_count_before_the_gpu_is_named_with_the_name_to_write(entry, fix):
    """``8xH100:100gbps`` said "gives no size" (the GPU part was ``8xH100``): the GPU comes first, a name that
    parses (its wrong network left out)."""
    line = _line(entry)
    assert line == (
        f"Invalid config: plan_clusters='{entry}': '{entry.split(':')[0]}' puts the count before the GPU. "
        f"Fix: the GPU comes first: {fix}."
    )
    parse_cluster(fix.split(",")[0])


# --- plan_gpu and the GPU names -----------------------------------------------------------------------


def test_the_gpu_names_listed_are_those_users_type_and_each_is_taken():
    """The list named the table's rows (``H100-SXM``, ``A100``: refused without a size); now every name listed
    is one ``plan_gpu=`` and a cluster name take, the sizes users type among them."""
    names = typed_gpu_names()
    assert {
        "H100",
        "H100-80GB",
        "H200",
        "A100-40GB",
        "A100-80GB",
        "H100-PCIe",
        "MI300X",
        "RTX-6000-Ada",
    } <= set(names)
    assert "A100" not in names and len(names) == len(set(names))  # A100 comes in 40 and 80 GB
    for name in names:
        planned_gpu_bytes(name, None)
        parse_cluster(f"{name}:8")
        assert command_line_problem(["plan=true", f"plan_gpu={name}"]) is None, name


@pytest.mark.parametrize("argv", [["plan=true", "plan_gpu=H999"], ["-m", "plan=true", "plan_gpu=H100,H999"]])
def test_an_unknown_plan_gpu_is_one_line_before_hydra_listing_the_names(argv):
    """Was: the plan's one row invalid, the line printed twice (the table's reason, then the count), exit 0.
    Now one line before Hydra starts (``run.py``: exit 2); a bad ``plan_clusters`` GPU was already exit 2."""
    line = refusal(argv)
    assert line.startswith(
        "Invalid config: plan_gpu='H999': is no device of the peak table (H100, H100-80GB, "
    )
    assert f"({', '.join(typed_gpu_names())})" in line and "Fix: use one of those, e.g. plan_gpu=" in line
    fix = line.rsplit("e.g. ", 1)[1].rstrip(".")  # session 38's fresh user: a name to type, accepted
    assert fix.startswith("plan_gpu=") and refusal(["plan=true", fix]) is None
    with pytest.raises(ConfigError) as caught:  # the job's line, for a value from a file
        planned_gpu_bytes("H999", None)
    assert str(caught.value) == line


def test_a_gpu_of_several_sizes_needs_one_unless_the_memory_is_given():
    assert "A100 comes in more than one memory size" in command_line_problem(["plan=true", "plan_gpu=A100"])
    assert command_line_problem(["plan=true", "plan_gpu=A100", "plan_gpu_memory_gib=40"]) is None
    assert "is no device" in command_line_problem(["plan_gpu=H999", "plan_gpu_memory_gib=40"])
    line = command_line_problem(["plan=true", "plan_gpu_memory_gib=0"])
    assert line.startswith("Invalid config: plan_gpu_memory_gib=0: must be a positive number of GiB")
    assert command_line_problem(["plan=true", "plan_gpu=''"]) is None  # unset, as null
    assert command_line_problem(["plan=true", "plan_gpu=${tag}", "tag=H999"]) is None  # the job's


# --- cost and budget ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("cost.usd_per_gpu_hour=inf", "cost.usd_per_gpu_hour=inf: must be a finite number. Fix: set "),
        ("cost.usd_per_gpu_hour=nan", "cost.usd_per_gpu_hour=nan: must be a finite number."),
        ("budget.tokens=1e400", "budget.tokens=1e400: must be a finite number."),  # as typed (#400)
        ("cost.usd_per_gpu_hour=-1", "cost.usd_per_gpu_hour=-1: must be >= 0 US dollars."),
        ("budget.tokens=0", "budget.tokens=0: must be a whole number of tokens >= 1."),
        ("cost.usd_per_gpu_hour=abc", "cost.usd_per_gpu_hour='abc': is not a number."),
        ("-m cost.usd_per_gpu_hour=1,inf", "cost.usd_per_gpu_hour=inf: must be a finite number."),
    ],
)
def test_a_price_or_budget_out_of_range_is_refused_before_hydra(override, said):
    """``cost.usd_per_gpu_hour=inf`` was refused in the job (one line, but the run's folder left behind)."""
    line = refusal([*override.split(), "plan=true", "plan_clusters=[H100:8]"])
    assert line.startswith(f"Invalid config: {said}"), line


def test_a_good_price_passes_quoted_or_not():
    for value in ("2.5", "'2.5'", "0", "null", "${oc.env:PRICE,2}"):
        assert command_line_problem([f"cost.usd_per_gpu_hour={value}", "budget.tokens=15e12"]) is None, value


# --- the tuner ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("param", "value"),
    [("budget_gpu_s", "0"), ("budget_gpu_s", "-5"), ("budget_gpu_s", "nan"), ("budget_gpu_s", "abc"),
     ("initial", "0"), ("eta", "1"), ("finalists", "2.5"), ("memory_gib", "0"), ("memory_gib", "inf")],
)  # fmt: skip
def test_a_tuner_parameter_out_of_range_is_refused_before_hydra_makes_the_sweep_folder(param, value):
    """``hydra.sweeper.budget_gpu_s=0`` was the sweeper's refusal, after Hydra had made ``multirun/<date>/``.
    Now the same line before Hydra starts (``TuneSweeper._problem``, the sweeper's own check)."""
    override = f"hydra.sweeper.{param}={value}"
    line = refusal(["-m", "hydra/sweeper=tune", override, "device=cpu"])
    assert line.startswith(f"Invalid config: hydra.sweeper.{param}=") and "Fix: set hydra.sweeper." in line
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_override(override).value()
    # TuneSweeper._problem: the sweeper's own, the value as typed (#1064)
    assert line == parameter_problem(**{param: parsed}, typed=[override])
    assert refusal(["--multi", "hydra/sweeper=tune", override]) == line  # a prefix of --multirun too


@pytest.mark.parametrize("param", ["initial", "eta", "finalists", "max_batch_size"])
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1e3", "=1e3: is a whole number written as a float. Fix: write it without a point or exponent: "),
        ("4.0", "=4.0: is a whole number written as a float. Fix: write it without a point or exponent: "),
        ("2.5", "=2.5: must be a whole number"),
        ("'8'", "='8': must be a whole number"),  # no schema: nothing converts the string
        ("true", "=true: must be a whole number"),
        ("[8]", "=[8]: must be a whole number"),
        ("1e30", "=1e30: must be at most 2147483647. Fix: set hydra.sweeper."),
        ("3000000000", "=3000000000: must be at most 2147483647. Fix: set hydra.sweeper."),
    ],
)
def test_every_tuner_count_is_checked_for_type_wholeness_and_range(param, value, said):
    """``hydra.sweeper.initial=1e3`` was taken as 1000 (a float where a count is meant, while every
    typed key of the run's config is told to write the int); ``eta=1e30`` as a 31-digit int. Each
    count of the tuner is held to the same type, whole-ness and bounds, by the same function before
    Hydra (``run.py``) and in the sweeper (``TuneSweeper._problem``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = f"hydra.sweeper.{param}={value}"
    parsed = OverridesParser.create().parse_override(override).value()
    line = parameter_problem(**{param: parsed}, typed=[override])  # as typed (#1064)
    assert line is not None and line.startswith(f"Invalid config: hydra.sweeper.{param}{said}"), line
    assert "\n" not in line and " Fix: " in line
    if "written as a float" in said:
        assert line.endswith(f"hydra.sweeper.{param}={int(float(value))}.")
        assert parameter_problem(**{param: int(float(value))}) is None  # the fix passes
    if param != "max_batch_size":  # hydra_keys' own line for the basic sweepers' batch size comes first
        assert refusal(["-m", "hydra/sweeper=tune", override]) == line


@pytest.mark.parametrize(
    ("param", "value", "said"),
    [
        ("budget_gpu_s", "1e300", "=1e300: must be at most 1e12."),
        ("budget_gpu_s", "'100'", "='100': must be a finite number above 0."),
        ("budget_gpu_s", "true", "=true: must be a finite number above 0."),
        ("memory_gib", "1e13", "=1e13: must be at most 1e12."),
        ("memory_gib", "abc", "=abc: must be a finite number above 0."),  # as typed (#1064)
        ("budget_gpu_s", "inf", "=inf: must be a finite number above 0."),
        ("budget_gpu_s", "null", "=null: must be a finite number above 0."),
    ],
)
def test_every_tuner_amount_is_checked_for_type_and_range(param, value, said):
    line = refusal(["-m", "hydra/sweeper=tune", f"hydra.sweeper.{param}={value}"])
    assert line is not None and line.startswith(f"Invalid config: hydra.sweeper.{param}{said} Fix: "), line
    for fine in ("1e3", "2.5", "100"):
        assert refusal(["-m", "hydra/sweeper=tune", f"hydra.sweeper.{param}={fine}", "seed=0,1"]) is None


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("space.micro_batches=[2,1e3]", "[2,1e3]: 1e3 is a whole number written as a float. "
         "Fix: write it without a point or exponent: space.micro_batches=[2,1000]."),
        ("space.micro_batches=[2,1e3,1.5]", "[2,1e3,1.5]: 1.5 is not a whole number."),
        ("space.micro_batches=[1e400]", "[1e400]: 1e400 is not a whole number."),  # OverflowError traceback
        ("space.micro_batches=[1e30]", "[1e30]: lists a micro batch beyond batch.micro_batch_size's bound"),
        ("space.micro_batches=[nan]", "[nan]: nan is not a whole number."),
        ("space.micro_batches=[true]", "[true]: true is not a whole number."),  # as typed, not [True]
        ("space.micro_batches=['abc']", "['abc']: 'abc' is not a whole number."),
        ("space.top=1e3", "1e3: is a whole number written as a float."),
        ("space.top=true", "true: is not a whole number."),
        ("space.min_headroom=1e400", "1e400: is a share in [0, 1)."),
    ],
)  # fmt: skip
def test_every_tuner_space_number_is_checked_for_type_wholeness_and_range(override, said):
    """``space.micro_batches=[1e400]`` stopped run.py with an ``OverflowError`` traceback
    (``Space.from_config``'s ``int(inf)``); ``[1e3]`` was "not a whole number", which 1000 is.
    ``space.micro_batches=['2']`` and ``space.top='3'`` are taken: OmegaConf converts them to the typed
    key's ints, as the composed config shows."""
    key = override.partition("=")[0]
    line = refusal(["-m", "hydra/sweeper=tune", override])
    assert line is not None and line.startswith(f"Invalid config: {key}={said}"), line
    assert "\n" not in line and " Fix: " in line


def test_quoted_numbers_of_the_tuners_space_are_the_typed_keys_ints(hydra_compose):
    overrides = ["space.micro_batches=['2','4']", "space.top='3'"]
    assert refusal(["-m", "hydra/sweeper=tune", *overrides]) is None
    cfg = hydra_compose(overrides)
    assert (list(cfg.space.micro_batches), cfg.space.top) == ([2, 4], 3)


def test_good_or_unknowable_tuner_parameters_are_left_to_the_sweeper():
    assert set(PARAMETERS) <= set(TuneSweeper.__init__.__code__.co_varnames)
    good = ["hydra.sweeper.budget_gpu_s=100", "hydra.sweeper.eta=3", "hydra.sweeper.memory_gib=null"]
    assert tuner_problem(["-m", "hydra/sweeper=tune", *good]) is None
    assert tuner_problem(["-m", "hydra/sweeper=tune", "hydra.sweeper.budget_gpu_s=${oc.env:B,0}"]) is None
    assert (
        tuner_problem(["-m", "hydra/sweeper=tune", "hydra.sweeper.eta=1,3"]) is None
    )  # a sweep: the sweeper's
    assert tuner_problem(["-m", "hydra.sweeper.budget_gpu_s=0"]) is None  # not the tuner: hydra_keys' line
    assert "belongs to hydra/sweeper=tune" in refusal(["-m", "seed=0,1", "hydra.sweeper.budget_gpu_s=0"])


def test_a_tune_sweeper_imported_at_collection_builds_after_hydras_plugin_scan(hydra_compose):
    """This module imports ``TuneSweeper`` at collection; the first compose of a session (the fixture's)
    asks Hydra for its plug-ins, whose scan runs ``basic_sweeper`` and ``hydra_plugins.flopsweep_tune``
    again in place: building the class imported before it failed with "super(type, obj): obj must be an
    instance or subtype of type" (``BasicSweeper.__init__``'s ``super(BasicSweeper, self)``). The scan now
    runs before collection (``tests/conftest.py``): the class imported here is the one Hydra found."""
    from hydra._internal.core_plugins import basic_sweeper
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    hydra_compose(["plan=true"])  # a compose first, as the tests before this one do
    sweepers = Plugins.instance().discover(Sweeper)  # the scan, had nothing run it yet
    sweeper = TuneSweeper(eta=3, max_batch_size=2)
    assert isinstance(sweeper, basic_sweeper.BasicSweeper)
    assert (sweeper.eta, sweeper.max_batch_size, sweeper._problem()) == (3, 2, None)
    assert TuneSweeper in sweepers


# --- predict.calibration, plan_gpu with device=cpu -----------------------------------------------------


def test_a_calibration_path_that_cannot_be_read_is_the_jobs_line_before_hydra(tmp_path, monkeypatch):
    """``-m hydra/sweeper=tune predict.calibration=BAD`` left an empty ``multirun/<date>/<time>/``, and
    ``plan=true`` an invalid row printed twice, exit 0. A path that does not exist, is a link (to a record or
    a folder) or is neither a file nor a folder is refused before Hydra with the job's own line
    (``calibration_files.check_calibration_path``, which ``calibration_records`` calls first); a record, a
    folder, null and an interpolation pass (what a file or folder holds is the job's to read)."""
    import os

    from flopsweep.calibration_files import calibration_records

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep").mkdir()
    (tmp_path / "metrics.json").write_text("{}")
    os.symlink("metrics.json", tmp_path / "record-link")
    os.symlink("sweep", tmp_path / "folder-link")
    os.mkfifo(tmp_path / "fifo")
    said = {
        "missing": f"does not exist ({tmp_path / 'missing'})",
        "record-link": "is a symbolic link (not followed: name the record or folder it points to)",
        "folder-link": "is a symbolic link (not followed: name the record or folder it points to)",
        "fifo": "is a FIFO, not a record or a folder",
        "/dev/null": "is a character device, not a record or a folder",
    }
    for path, why in said.items():
        with pytest.raises(ConfigError) as caught:
            calibration_records(path)  # the job's
        line = str(caught.value)
        assert (
            line
            == f"Invalid config: predict.calibration='{path}': {why}. Fix: give a run's metrics.json or a "
            "sweep folder that holds some, or null."
        )
        assert command_line_problem(["plan=true", f"predict.calibration={path}"]) == line
        assert refusal(["-m", "hydra/sweeper=tune", f"predict.calibration={path}"]) == line
        assert refusal(["-m", f"predict.calibration=sweep,{path}"]) == line  # each value of a sweep
    for good in ("null", "${oc.env:CAL,null}"):
        assert command_line_problem([f"predict.calibration={good}"]) is None, good
    for held in ("metrics.json", "sweep"):  # what they hold is read too, as the job reads it (#250)
        with pytest.raises(ConfigError) as caught:
            calibration_records(held)
        assert command_line_problem([f"predict.calibration={held}"]) == str(caught.value)


def test_plan_gpu_with_device_cpu_is_the_rules_line_before_hydra(hydra_compose):
    """``plan=true plan_gpu=H100 device=cpu`` was the plan's row invalid, its line printed twice, exit 0:
    now :func:`flopsweep.rules.planned_gpu_on_the_cpu`'s line before Hydra, for either key, any value of a
    sweep; a run (``plan=false``) and ``device=auto`` pass (the rule's own cases)."""
    from flopsweep.rules import planned_gpu_on_the_cpu

    for override in ("plan_gpu=H100", "plan_gpu_memory_gib=80"):
        args = ["plan=true", override, "device=cpu"]
        with pytest.raises(ConfigError) as caught:
            planned_gpu_on_the_cpu(hydra_compose(args))
        assert command_line_problem(args) == str(caught.value)
        assert command_line_problem(["-m", "plan=true", override, "device=cuda,cpu"]) == str(caught.value)
        assert command_line_problem([override, "device=cpu"]) is None  # a run: a warning, the job's
        assert command_line_problem(["plan=true", override, "device=auto"]) is None


def test_a_single_plan_whose_row_is_invalid_is_its_line_once(hydra_compose, tmp_path):
    """A value no check before Hydra sees (``predict.calibration=${tag}``): the single plan's one row is
    invalid; ``run.py`` prints its reason alone, once, exit 2 (``planprint.plan_refused_line``), not the
    table with the reason as its footnote and again below it, exit 0. A row that is not invalid: None."""
    import csv

    from flopsweep.job import JobInfo, plan_job
    from flopsweep.job.planprint import plan_refused_line
    from flopsweep.job.plantable import PLAN_COLUMNS

    args = ["plan=true", "predict.calibration=${tag}", "tag=/nonexistent-flopsweep-calibration"]
    record = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))
    row = record["plan"]
    assert row["status"] == "invalid" and not (tmp_path / "plan.csv").exists()  # refused: nothing written
    line = plan_refused_line(str(tmp_path / "plan.csv"), text=record["plan_csv"])
    assert line == row["reason"] and line.startswith(
        "Invalid config: predict.calibration='/nonexistent-flopsweep-calibration': does not exist."
    )
    path = tmp_path / "two.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(
            [{"job": 0, "status": "invalid", "reason": row["reason"]}, {"job": 1, "status": "ok"}]
        )
    assert plan_refused_line(str(path)) is None


def test_more_clusters_than_the_bound_are_refused_before_hydra_and_in_the_job() -> None:
    """Trial 24: 40 clusters took 37 s (each planned over the whole space). More than
    ``clusters.MAX_PLAN_CLUSTERS`` are refused in one line before Hydra, and in the job for a list from
    a file (``named_clusters``); the fix's first list passes, and so does the bound itself."""
    import re

    from flopsweep.clusters import MAX_PLAN_CLUSTERS
    from flopsweep.job.plandecide import named_clusters

    names = [f"H100:{n}x8" for n in range(1, 2 * MAX_PLAN_CLUSTERS + 9)]
    line = refusal(["plan=true", f"plan_clusters=[{','.join(names)}]"])
    assert line is not None and "\n" not in line, line
    assert line.startswith("Invalid config: plan_clusters='[H100:1x8,H100:2x8,H100:3x8,...] (40 clusters)': ")
    assert f"over the bound of {MAX_PLAN_CLUSTERS}" in line and "-m 'plan_clusters=[A,B],[C,D]'" in line
    first = re.search(r"e\.g\. the first: (plan_clusters=\[[^\]]*\])", line).group(1)
    assert first.count(",") == MAX_PLAN_CLUSTERS - 1 and refusal(["plan=true", first]) is None
    with pytest.raises(ConfigError) as caught:
        named_clusters(names)
    assert str(caught.value) == line
    assert len(named_clusters(names[:MAX_PLAN_CLUSTERS])) == MAX_PLAN_CLUSTERS


@pytest.mark.parametrize("value", ["", "-1", " -1,0"])
def test_here_with_every_gpu_hidden_is_refused_before_hydra(monkeypatch, value: str) -> None:
    """Trial 24: ``CUDA_VISIBLE_DEVICES=""`` on a GPU host: torch finds no GPU, and ``here`` was refused
    only in the job (the device files exist). The variable hides them all, so ``no_gpu_here`` says so
    without torch and the line, the job's own (``parse_cluster`` with ``("", 0)``), comes before Hydra,
    naming the variable and unsetting it as the other fix."""
    from flopsweep.local_gpus import gpus_hidden, no_gpu_here

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert gpus_hidden() == f"CUDA_VISIBLE_DEVICES={value!r}" and no_gpu_here()
    with pytest.raises(ConfigError) as caught:
        parse_cluster("here", ("", 0))  # the job's, torch finding none
    line = str(caught.value)
    assert line == (
        f"Invalid config: plan_clusters='here': this machine has no GPU this process may use "
        f"(CUDA_VISIBLE_DEVICES={value!r} hides them all). Fix: name the GPU: e.g. H100:1x8, "
        "or unset CUDA_VISIBLE_DEVICES."
    )
    assert refusal(["plan=true", "plan_clusters=[H100:8,here]"]) == line
    for shown in ("0", "1,0", "GPU-5d4c"):  # some GPU shown: torch's to count, in the job
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", shown)
        assert gpus_hidden() is None
    assert gpus_hidden({"HIP_VISIBLE_DEVICES": ""}) == "HIP_VISIBLE_DEVICES=''"


@pytest.mark.parametrize(
    ("swept", "fix"),
    [
        ("plan_format=csv,json", "Fix: give it one value, e.g. plan_format=csv."),
        ("plan_format=choice(table,csv)", "Fix: give it one value, e.g. plan_format=csv."),
        ("plan=true,false", "Fix: give it one value: plan=true, or drop it to measure."),
    ],
)
def test_a_swept_plan_or_plan_format_is_refused_before_hydra(swept: str, fix: str) -> None:
    """``-m plan=true plan_format=csv,json`` printed each job's rows twice, as one table (session 24's
    trial): ``plan`` and ``plan_format`` take one value a sweep, refused in one line naming the key, the
    value and the fix; one value of each passes."""
    key, _, value = swept.partition("=")
    line = command_line_problem(["-m", "plan=true", "plan_clusters=[H100:8]", swept])
    assert line.startswith(f"Invalid config: {key}='{value}': is swept: ") and line.endswith(fix)
    assert command_line_problem(["-m", "plan=true", "plan_format=csv", "model=llama3.2-1b,gpt-1.3b"]) is None


@pytest.mark.parametrize(
    ("entry", "fix", "fixed"),
    [
        (
            "A100:8",
            "name the size: plan_clusters=[A100-80GB:8] (or A100-40GB).",
            ["A100-80GB:8", "A100-40GB:8"],
        ),
        (
            "A100:2x8:ib200",
            "name the size: plan_clusters=[A100-80GB:2x8:ib200] (or A100-40GB).",
            ["A100-80GB:2x8:ib200"],
        ),
        ("H100-94GB:8", "name a device sold so: plan_clusters=[H100-SXM:8] (or H100-NVL).", ["H100-NVL:8"]),
    ],
)
def test_a_cluster_of_a_gpu_sold_in_several_sizes_is_told_the_entry_to_write(entry, fix, fixed):
    """The fix named plan_gpu=A100-80GB or plan_gpu_memory_gib=, neither read beside plan_clusters: the
    same refusal came back. The entry with the size passes."""
    line = command_line_problem(["plan=true", f"plan_clusters=[{entry}]"])
    assert line is not None and "\n" not in line and line.endswith(f"Fix: {fix}"), line
    assert command_line_problem(["plan=true", f"plan_clusters=[{entry}]", "plan_gpu=A100-80GB"]) == line
    for entry in fixed:
        assert command_line_problem(["plan=true", f"plan_clusters=[{entry}]"]) is None
