"""The new-user trial of session 20: command lines Hydra refused in four to eight lines, exit 1, with
no fix that fits: an override its grammar cannot read (``tag=ünïcødé``, ``model.n_layer=[2``), a
sweep without ``-m`` (``tag=a,b``: "Ambiguous value"), and a ``hydra.*`` key no schema has
(``hydra.sweeper.inital=3``, ``hydra.sweeper.eta=3`` with the basic sweeper, ``hydra.job.chdri``:
"Could not override ... To append to your config use +"). In this process: the refusals are the
functions ``run.py`` calls before Hydra starts; ``test_refusals.py`` runs some as a user types them.
"""

from __future__ import annotations

import shlex

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from flopsweep.hydra_keys import hydra_key_problem, option_keys
from flopsweep.override_grammar import syntax_problem
from flopsweep.override_multirun import (
    MAX_SWEEP_JOBS,
    sweep_size_problem,
    sweep_without_m_problem,
    sweeper_without_m_problem,
)

PARSER = OverridesParser.create()


def _one_line(line: str | None, override: str) -> str:
    assert line is not None
    assert line.startswith(f"Invalid config: {override}: ") and "\n" not in line and " Fix: " in line, line
    return line


def _parses(override: str) -> object:
    """Hydra's parse of one override (raises as Hydra would)."""
    return PARSER.parse_overrides([override])[0]


@pytest.mark.parametrize(
    ("override", "reason", "fixed", "value"),
    [
        ("tag=ünïcødé", "character 5, 'ü', cannot stand there unquoted", "'tag=\"ünïcødé\"'", "ünïcødé"),
        ("tag=日本", "character 5, '日'", "'tag=\"日本\"'", "日本"),
        ('tag="unterminated', "character 5", "'tag=\"unterminated\"'", "unterminated"),
        ("tag='open", "character 5", "\"tag='open'\"", "open"),
        ("tag=it's", "character 7", "'tag=\"it'\\''s\"'", "it's"),
        ("tag=x)", "extraneous input ')'", "'tag=\"x)\"'", "x)"),
        ("model.n_layer=2=3", "mismatched input '='", "'model.n_layer=\"2=3\"'", "2=3"),
        ("model.n_layer=[2", "no viable alternative at input '[2'", "model.n_layer=[2]", [2]),
        ("a b=3", "character 2, ' '", "tag=mine", "mine"),
        ("modèle=x", "character 4, 'è'", "tag=mine", "mine"),  # a key: ASCII only
    ],
)
def test_an_override_hydras_grammar_cannot_read_is_one_line_whose_fix_parses(
    override: str, reason: str, fixed: str, value: object
) -> None:
    """Each input is one Hydra's own parser refuses; the line names it, what the parser found, and a
    fix that, once the shell has taken its quotes, Hydra parses to the value meant."""
    with pytest.raises(Exception, match="."):
        _parses(override)
    line = _one_line(syntax_problem(["plan=true", override]), override)
    assert f"Hydra's override grammar cannot read it ({reason}" in line
    fix = line.split(" Fix: ", 1)[1]
    assert fixed in fix, fix
    [typed] = shlex.split(fixed)
    assert _parses(typed).value() == value


@pytest.mark.parametrize(
    "argv",
    [
        ["model=llama-tiny", "device=cpu"],
        ["-m", "+sweep=smoke", "hydra.sweep.dir=multirun/smoke"],
        ["plan=true", "plan_gpu=H100-80GB", "model=llama3.1-8b"],
        ["-m", "backend=ddp,fsdp,deepspeed", "nproc_per_node=2", "device=cpu"],
        ["tag=a b", 'tag="ünï"', "tag=${oc.env:USER,x}", "tag="],
        ["-m", "seed=range(0,3)", "precision=glob(fp*,exclude=fp8*)", "space.layouts=[dp,tp2]"],
        ["--config-name", "config", "--cfg", "job", "-m", "tag=a,b"],
    ],
)
def test_what_the_readme_and_the_grammar_allow_passes(argv: list[str]) -> None:
    assert syntax_problem(argv) is None and sweep_without_m_problem(argv) is None


@pytest.mark.parametrize(
    ("override", "quoted"),
    [
        ("tag=a,b", "'tag=\"a,b\"'"),
        ("backend=ddp,fsdp", None),  # a group takes one option: no string to quote
        ("model.n_layer=2,4", None),  # numbers
        ("seed=range(3)", None),
        ("+sweep=smoke,backends", None),
    ],
)
def test_a_sweep_without_m_is_one_line_naming_m(override: str, quoted: str | None) -> None:
    """Hydra's "Ambiguous value for argument" block (six lines, exit 1)."""
    assert _parses(override).is_sweep_override()
    line = _one_line(sweep_without_m_problem(["plan=true", override]), override)
    assert f"Fix: add -m (flopsweep -m {override} ...)" in line
    assert ("quote it: " in line) == (quoted is not None)
    if quoted:
        [typed] = shlex.split(line.split("quote it: ", 1)[1].rstrip("."))
        assert typed == shlex.split(quoted)[0] and not _parses(typed).is_sweep_override()
    for fine in (["-m", override], ["--multirun", override], ["hydra.sweeper.params.seed=0,1"]):
        assert sweep_without_m_problem(fine) is None


@pytest.mark.parametrize(
    "override",
    ["hydra/sweeper=tune", "hydra/sweeper=optuna_objective", "+hydra/sweeper=basic", "hydra/sweeper='tune'"],
)
def test_a_sweeper_without_m_is_one_line_naming_m(override: str) -> None:
    """``flopsweep hydra/sweeper=tune device=cpu`` ran one plain job, exit 0: Hydra starts a sweeper only
    under -m. Refused in one line, as a sweep axis without -m is (``run.refusal``: exit 2)."""
    import run

    argv = [override, "device=cpu"]
    line = sweeper_without_m_problem(argv)
    assert line == (
        f"Invalid config: {override}: a sweeper runs only under -m (without it Hydra runs one plain job "
        f"and the sweeper never starts). Fix: add -m (flopsweep -m {override} ...)."
    )
    from flopsweep.overrides import sweeper_extra_problem

    assert run.refusal(argv) == (sweeper_extra_problem(argv) or line)  # optuna not installed: that first
    for fine in (
        ["-m", *argv],
        ["--multirun", *argv],
        ["hydra/sweeper=basic_batched", "device=cpu"],
        ["device=cpu"],
    ):
        assert sweeper_without_m_problem(fine) is None
    # plan=true beside the tuner: the plan's own refusal, not "add -m" (which would not pass either)
    assert "Fix: drop plan=true" in run.refusal(["plan=true", "hydra/sweeper=tune"])
    assert "tunex is no option of hydra/sweeper" in run.refusal(["hydra/sweeper=tunex"])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["-m", "hydra/sweeper=tune", "hydra.sweeper.inital=3"],
            "hydra.sweeper.inital=3: hydra/sweeper=tune has no key inital. "
            "Fix: did you mean hydra.sweeper.initial?",
        ),
        (
            ["-m", "hydra/sweeper=tune", "hydra.sweeper.memory_gb=3"],
            "Fix: did you mean hydra.sweeper.memory_gib?",
        ),
        (
            ["-m", "hydra.sweeper.eta=3", "seed=0,1"],
            "hydra.sweeper.eta belongs to hydra/sweeper=tune, not to hydra/sweeper=basic_batched "
            "(the sweeper this command line runs). Fix: add hydra/sweeper=tune, or drop the override.",
        ),
        (
            ["-m", "hydra.launcher.timeout_min=3", "seed=0,1"],
            "belongs to hydra/launcher=pool or hydra/launcher=slurm",
        ),
        (
            ["-m", "hydra/launcher=slurm", "hydra.launcher.timout_min=3"],
            "hydra/launcher=slurm has no key timout_min. Fix: did you mean hydra.launcher.timeout_min?",
        ),
        (
            ["-m", "hydra/launcher=pool", "hydra.launcher.slot=[0]"],
            "Fix: did you mean hydra.launcher.slots?",
        ),
        (
            ["-m", "hydra.launcher.parallel_jobs=2", "seed=0,1"],
            "belongs to hydra/launcher=slurm_local, not to hydra/launcher=basic",
        ),
        (["hydra.job.chdri=true"], "hydra.job has no key chdri. Fix: did you mean hydra.job.chdir?"),
        (["hydra.run.dri=x"], "Fix: did you mean hydra.run.dir?"),
        (["hydra.jbo.chdir=true"], "hydra has no key jbo. Fix: did you mean hydra.job?"),
    ],
)
def test_a_hydra_key_no_schema_has_is_one_line_naming_the_key_meant(argv: list[str], words: str) -> None:
    override = next(a for a in argv if a.startswith("hydra."))
    line = _one_line(hydra_key_problem(argv), override)
    assert words in line, line


def test_the_keys_a_hydra_line_proposes_are_the_options_own() -> None:
    """The tuner's keys are its YAML's; the basic sweeper's Hydra's ``BasicSweeperConf``; Slurm's
    hydra-submitit-launcher's ``SlurmQueueConf`` and the plug-in's YAML."""
    tuner = {"budget_gpu_s", "initial", "eta", "finalists", "memory_gib", "params"}
    assert tuner <= option_keys("sweeper", "tune")
    assert {"max_batch_size", "params"} <= option_keys("sweeper", "basic_batched")
    assert "eta" not in option_keys("sweeper", "basic_batched")
    assert {"timeout_min", "partition", "array_parallelism", "setup"} <= option_keys("launcher", "slurm")
    assert {"slots", "devices", "timeout_min", "grace_s"} <= option_keys("launcher", "pool")
    assert option_keys("launcher", "basic") == {"_target_"}
    assert {"parallel_jobs", "timeout_min"} <= option_keys("launcher", "slurm_local")
    assert option_keys("sweeper", "no-such-sweeper") is None


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "hydra/sweeper=tune", "hydra.sweeper.initial=3", "seed=0,1"],
        ["-m", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.array_parallelism=2"],
        ["-m", "hydra/launcher=pool", "hydra.launcher.slots=[0,1]", "hydra.launcher.grace_s=5"],
        ["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=3"],
        [
            "-m",
            "hydra/launcher=slurm_local",
            "hydra.launcher.parallel_jobs=2",
            "hydra.launcher.timeout_min=3",
        ],
        ["hydra.job.chdir=false", "hydra.run.dir=x", "hydra.verbose=true", "hydra.job.env_set.FOO=1"],
        ["hydra.job_logging.root.level=DEBUG", "hydra.callbacks.mine._target_=x", "hydra.help.app_name=x"],
        ["-m", "+sweep=tuning", "hydra.sweeper.initial=3"],  # a sweep file may pick the tuner
        ["--config-name", "mine", "hydra.sweeper.eta=3"],
        ["-m", "+hydra.sweeper.brand_new=1", "hydra/sweeper=optuna_objective", "hydra.sweeper.n_trials=3"],
    ],
)
def test_hydra_keys_the_picked_options_have_pass(argv: list[str]) -> None:
    assert hydra_key_problem(argv) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["-m", "seed=range(0,100000)", "model.n_layer=range(1,1000)"],
            "seed=range(0,100000): the sweep would run 99900000 jobs (100000 x 999), over the bound of "
            "10000. Fix: give seed fewer values",
        ),
        (["-m", "seed=range(0,10001)"], "10001 jobs (10001)"),
        (
            ["-m", "seed=range(0,100)", "model.n_layer=1,2", "repeats=100"],
            "20000 jobs (100 x 2 x repeats=100)",
        ),
        (["-m", "seed=range(0,3000)", "precision=glob(*)"], "15000 jobs (3000 x 5)"),  # the glob's options
    ],
)
def test_a_sweep_of_more_than_the_bound_is_one_line_before_hydra_expands_it(
    argv: list[str], words: str
) -> None:
    """Hydra's basic sweeper built all 99,900,000 combinations in memory before the first job (over
    five minutes, silent). Counted without expanding a range."""
    line = _one_line(sweep_size_problem(argv), argv[1])
    assert words in line, line


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", f"seed=range(0,{MAX_SWEEP_JOBS})"],
        ["-m", "optim.lr=range(0.1,1.0,0.1)", "seed=range(0,100)"],
        ["seed=range(0,100000)"],  # no -m: sweep_without_m_problem's
        ["-m", "hydra/sweeper=optuna_objective", "seed=range(0,100000)", "optim.lr=range(0.1,1,0.00001)"],
    ],
)
def test_a_sweep_within_the_bound_or_an_optuna_study_passes(argv: list[str]) -> None:
    assert sweep_size_problem(argv) is None


def test_a_tag_over_256_characters_is_refused_before_hydra_and_by_validation() -> None:
    """A 100,000-character ``tag`` made every plan line 100 KB (the overrides column) and went into
    every record; a sweep's values are each checked, not their sum."""
    from flopsweep.checks import check_bounds
    from flopsweep.config import ConfigError, RunConfig
    from flopsweep.limits import MAX_TAG_CHARS
    from run import tag_problem

    line = tag_problem(["plan=true", "tag=" + "a" * 100_000])
    assert line == (
        "Invalid config: tag='aaaaaaaaaaaaaaa...(100000 characters): is 100000 characters, over the bound of "
        "256 (it is copied into every record and line). Fix: shorten the tag to at most 256 characters."
    )
    assert tag_problem(["-m", "tag=" + ",".join(["x" * MAX_TAG_CHARS] * 3)]) is None
    assert "is 300 characters" in tag_problem(["-m", f"tag=x,{'y' * 300}"])
    assert tag_problem([f'tag="{"z" * MAX_TAG_CHARS}"']) is None  # the quotes are Hydra's, not the tag's
    check_bounds(RunConfig(tag="t" * MAX_TAG_CHARS))
    with pytest.raises(ConfigError) as info:
        check_bounds(RunConfig(tag="t" * (MAX_TAG_CHARS + 1)))
    assert info.value.key == "tag" and "over the bound of 256" in str(info.value)


def test_a_plan_format_that_is_no_format_is_refused() -> None:
    """``plan=true plan_format=nope`` printed JSON, exit 0 (only ``plan_clusters`` checked the key)."""
    from flopsweep.checks import validate
    from flopsweep.config import ConfigError, RunConfig
    from flopsweep.plan_command_line import command_line_problem

    line = command_line_problem(["plan=true", "plan_format=nope"])
    assert line == (
        "Invalid config: plan_format='nope': must be one of table, csv, json. "
        "Fix: pick one of those, e.g. plan_format=table."
    )
    assert "plan_format='csv,nope': is swept" in command_line_problem(
        ["-m", "plan_format=csv,nope"]
    )  # one value
    assert command_line_problem(["plan_format=json"]) is None
    with pytest.raises(ConfigError) as info:
        validate(RunConfig(plan=True, plan_format="nope"))
    assert info.value.key == "plan_format"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["-m", "hydra.sweeper.params=5", "seed=0,1"], "hydra.sweeper.params is set one axis at a time"),
        (["-m", 'hydra.sweeper.params={seed:"0,1"}'], "on the command line (-m seed=0,1)"),  # 45 lines
        (["-m", "hydra/sweeper=tune", "hydra.sweeper.params=5"], "one axis at a time"),  # AttributeError
        (["-m", "hydra.sweeper.max_batch_size=-1", "seed=0,1"], "a whole number of at least 1"),  # assert
        (["-m", "hydra.sweeper.max_batch_size=abc", "seed=0,1"], "Fix: drop it (flopsweep sets it"),
    ],
)
def test_a_basic_sweepers_params_or_batch_its_code_cannot_take_is_one_line(
    argv: list[str], words: str
) -> None:
    """Hydra's basic sweeper reads them unchecked: ``max_batch_size=-1`` an ``AssertionError``,
    ``params`` a mapping OmegaConf's merge traceback (the default is null), under the tuner ``params=5``
    an ``AttributeError``."""
    override = next(a for a in argv if a.startswith("hydra.sweeper."))
    assert words in _one_line(hydra_key_problem(argv), override)
    for fine in (
        "hydra.sweeper.params=null",
        "hydra.sweeper.max_batch_size=4",
        "hydra.sweeper.max_batch_size=null",
    ):
        assert hydra_key_problem(["-m", fine, "seed=0,1"]) is None, fine


def test_the_tuners_counts_written_as_floats_are_told_the_int_to_write() -> None:
    """``hydra.sweeper.eta=1e9`` passed the check (a whole number) and reached ``range()`` as a float:
    a ``TypeError`` traceback; then it was made an int, unlike every typed key of the run's config
    (``steps.measure=4.0``: "a whole number written as a float", the int to write). Now the tuner's
    counts are told the same, before any job (``TuneSweeper._problem``, first in ``sweep``)."""
    from hydra_plugins.flopsweep_tune import TuneSweeper

    tuner = TuneSweeper(initial=4.0, eta=1e9, finalists=2.0)
    assert tuner._problem() == (
        "Invalid config: hydra.sweeper.initial=4.0: is a whole number written as a float. "
        "Fix: write it without a point or exponent: hydra.sweeper.initial=4."
    )
    assert "hydra.sweeper.eta=1000000000.0: is a whole number written as a float" in (
        TuneSweeper(eta=1e9)._problem()
    )
    assert TuneSweeper(initial=4, eta=10**9, finalists=2)._problem() is None
    assert "hydra.sweeper.eta=2.5: must be a whole number" in TuneSweeper(eta=2.5)._problem()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["-m", "hydra/launcher=slurm", "hydra.launcher.timeout_min=abc"],
            "hydra.launcher.timeout_min=abc: is not a whole number. Fix: set hydra.launcher.timeout_min=60 "
            "(hydra/launcher=slurm's), or drop the override.",
        ),
        (
            ["-m", "hydra/launcher=slurm", "hydra.launcher.mem_gb=1.5"],
            "set hydra.launcher.mem_gb to a whole number",
        ),
        (["-m", "hydra/launcher=slurm", "hydra.launcher.stderr_to_stdout=maybe"], "is not true or false"),
        (["-m", "hydra/launcher=slurm", "hydra.launcher.setup=5"], "is not a list. Fix: write a list"),
        (["-m", "hydra/launcher=slurm", "hydra.launcher.partition=[a,b]"], "is not one text value"),
        (["-m", "hydra/launcher=slurm_local", "hydra.launcher.parallel_jobs=abc"], "parallel_jobs=1 (hydra/"),
        (  # a re-trial (session 35): Slurm lost every job, each recorded after the sweep waited (#328)
            ["-m", "hydra/launcher=slurm_local", "hydra.launcher.timeout_min=0"],
            "hydra.launcher.timeout_min=0: each job's time limit in minutes must be above 0. Fix: set "
            "hydra.launcher.timeout_min=60, or drop the override.",
        ),
        (
            ["-m", "hydra/launcher=slurm", "hydra.launcher.mem_gb=-1"],
            "must be above 0. Fix: set hydra.launcher.mem_gb=",
        ),
    ],
)
def test_a_launcher_value_its_schema_cannot_take_is_one_line(argv: list[str], words: str) -> None:
    """hydra-submitit-launcher's typed keys: Hydra's six lines ("Error merging override ... could not be
    converted to Integer", ``full_key``, ``object_type=SlurmQueueConf``); the fix's example is the
    option's YAML value, which Hydra takes."""
    override = argv[-1]
    line = _one_line(hydra_key_problem(argv), override)
    assert words in line, line
    if "Fix: set " in line and "=" in line.split("Fix: set ", 1)[1].split()[0]:
        example = line.split("Fix: set ", 1)[1].split()[0]
        assert hydra_key_problem([*argv[:-1], example]) is None, example


def test_a_whole_number_written_as_a_float_is_told_so_with_the_int_to_write() -> None:
    """``model.n_layer=1e3`` said ``model.n_layer=1000.0: is not a whole number``, which 1000 is; the
    typed key takes no float, so the fix writes the int, which passes. The line echoes the value as
    typed (``1e3``, trial 24: ``1e12`` was echoed as ``1000000000000.0``)."""
    from flopsweep.overrides import type_problem

    for typed, written in (
        ("model.n_layer=1e3", "model.n_layer=1000"),
        ("steps.measure=4.0", "steps.measure=4"),
    ):
        line = _one_line(type_problem([typed]), typed)
        assert line.endswith(
            f"is a whole number written as a float. Fix: write it without a point or exponent: {written}."
        )
        assert type_problem([written]) is None
    assert "is not a whole number" in type_problem(["model.n_layer=2.5"])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["-m", "hydra/sweeper=tune", "plan=true", "backend=ddp,fsdp"],
            "Invalid config: plan=true: the tuner (hydra/sweeper=tune) measures runs, and a plan runs none",
        ),
        (["-m", "plan=True", "repeats=3", "seed=0,1"], "Invalid config: repeats=3: a plan runs nothing"),
    ],
)
def test_plan_beside_what_measures_runs_is_one_line(argv: list[str], words: str) -> None:
    """``-m hydra/sweeper=tune plan=true`` read every set-up as failed ("no record: cannot read the
    file"), "no winner", exit 0; ``-m plan=true repeats=3`` planned each job three times, alike."""
    from run import plan_conflict_problem

    line = plan_conflict_problem(argv)
    assert line is not None and line.startswith(words) and "Fix: drop " in line and "\n" not in line
    for fine in (
        ["-m", "plan=true", "repeats=1", "seed=0,1"],
        ["-m", "plan=false", "repeats=3", "hydra/sweeper=tune"],
        ["-m", "hydra/sweeper=tune", "repeats=3", "backend=ddp,fsdp"],
    ):
        assert plan_conflict_problem(fine) is None, fine


def test_plan_with_repeats_without_m_names_both_fixes() -> None:
    """``plan=true repeats=3`` without ``-m`` was told to add ``-m``, then refused again for the plan
    (a re-trial in session 32): the plan's line comes first and says the rounds need ``-m``."""
    from run import refusal

    line = refusal(["plan=true", "repeats=3", "model=gpt-tiny"])
    assert line.endswith(
        "Fix: drop repeats=, or drop plan=true to run the rounds (with -m: they are a sweep's jobs)."
    )
    with_m = refusal(["-m", "plan=true", "repeats=3", "model=gpt-tiny"])
    assert with_m.endswith("Fix: drop repeats=, or drop plan=true to run the rounds.")


@pytest.mark.parametrize(
    ("override", "reason", "fix"),
    [
        (
            "plan_clusters=[H100:8,]",
            "(a trailing comma leaves an empty item",
            "drop the trailing comma: plan_clusters=[H100:8]",
        ),
        (
            "plan_clusters=[,H100:8]",
            "(a leading comma leaves",
            "drop the leading comma: plan_clusters=[H100:8]",
        ),
        (
            "plan_clusters=[H100:8,,H200:8]",
            "(two commas in a row leave",
            "drop a comma: plan_clusters=[H100:8,H200:8]",
        ),
        (
            "plan_clusters=[,H100:8,,H200:8,]",
            "(extra commas leave empty items",
            "drop the extra commas: plan_clusters=[H100:8,H200:8]",
        ),
        (
            "plan_clusters=[H100：8,]",
            "'：' (U+FF1A FULLWIDTH COLON) looks like ASCII ':'; a trailing comma",
            "did you mean plan_clusters=[H100:8]?",
        ),
        (
            "plan_clusters=[H100：8]",
            "'：' (U+FF1A FULLWIDTH COLON) looks like ASCII ':')",
            "did you mean plan_clusters=[H100:8]?",
        ),
        (
            "plan_clusters=［H100:8］",
            "'［' (U+FF3B FULLWIDTH LEFT SQUARE BRACKET) looks like ASCII '['",
            "did you mean plan_clusters=[H100:8]?",
        ),
        (
            "plan_clusters=[H100:８，H200:8]",
            "'８' (U+FF18 FULLWIDTH DIGIT EIGHT)",
            "did you mean plan_clusters=[H100:8,H200:8]?",
        ),
    ],
)
def test_an_empty_item_or_look_alike_punctuation_in_a_list_gets_the_list_meant(override, reason, fix) -> None:
    """The advice was to quote the value, which plan_clusters then refused as one string, whose fix
    nested the list again ("plan_clusters=[[H100:8,]]"): a loop. The fix is the list meant, which
    Hydra reads and the checks before Hydra pass."""
    from run import refusal

    line = _one_line(syntax_problem(["plan=true", override]), override)
    assert reason in line and line.endswith(f"Fix: {fix}"), line
    meant = fix.rpartition(" ")[2].rstrip("?")
    assert isinstance(_parses(meant).value(), list)
    assert refusal(["plan=true", meant]) is None


@pytest.mark.parametrize("value", ['"[H100:8,]"', '"[H100：8]"', "'[H100:8]'"])
def test_a_quoted_list_is_told_to_drop_its_quotes(value: str) -> None:
    """The quoted form the old advice gave ('plan_clusters="[H100:8,]"'): its fix wrapped it in a list."""
    from run import refusal

    line = refusal(["plan=true", f"plan_clusters={value}"])
    assert line is not None and "\n" not in line
    assert "is one string, not a list" in line and line.endswith("Fix: plan_clusters=[H100:8].")
    assert refusal(["plan=true", "plan_clusters=[H100:8]"]) is None


@pytest.mark.parametrize(
    ("argv", "override", "key"),
    [
        (["+steps.measure=3", "device=cpu"], "+steps.measure=3", "steps.measure"),
        (["-m", "+steps.measure=3", "device=cpu"], "+steps.measure=3", "steps.measure"),
        (["+model.n_layer=3", "device=cpu"], "+model.n_layer=3", "model.n_layer"),  # the default option's
        (["model=llama-tiny", "+model.n_kv_head=1"], "+model.n_kv_head=1", "model.n_kv_head"),
        (["-m", "+seed=1,2"], "+seed=1,2", "seed"),
    ],
)
def test_a_plus_on_a_key_that_exists_is_one_line_before_hydra(argv, override, key) -> None:
    """Hydra said "Could not append to config. An item is already at 'steps.measure'" in five lines."""
    from run import refusal

    line = _one_line(refusal(argv), override)
    bare = override.removeprefix("+")
    assert line == f"Invalid config: {override}: {key} already exists; + adds only new keys. Fix: {bare}"
    assert refusal([bare if a == override else a for a in argv]) is None  # the fix as written


@pytest.mark.parametrize("argv", [["++steps.measure=3"], ["+sweep=smoke", "-m"], ["+hydra.job.env_set.X=1"]])
def test_a_plus_that_adds_or_sets_is_not_refused_as_existing(argv) -> None:
    from flopsweep.override_schema import existing_key_add_problem

    assert existing_key_add_problem(argv) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (  # Hydra: the sweeper's constructor's TypeError ("unexpected keyword argument 'foo'"), exit 1
            ["-m", "hydra/sweeper=tune", "+hydra.sweeper.foo=1"],
            "hydra/sweeper=tune has no key foo. Fix: hydra/sweeper=tune takes budget_gpu_s, eta,",
        ),
        (["-m", "hydra/sweeper=tune", "++hydra.sweeper.foo=1"], "hydra/sweeper=tune has no key foo."),
        (
            ["-m", "hydra/sweeper=tune", "+hydra.sweeper.intial=2"],
            "has no key intial. Fix: did you mean hydra.sweeper.initial?",
        ),
        (["-m", "+hydra.sweeper.eta=3", "seed=0,1"], "belongs to hydra/sweeper=tune, not to"),
        (["-m", "+hydra.launcher.foo=1", "seed=0,1"], "hydra/launcher=basic has no key foo. Fix:"),
        (["-m", "hydra/launcher=pool", "+hydra.launcher.slot=[0]"], "did you mean hydra.launcher.slots?"),
        (  # Hydra: "Could not append to config. An item is already at 'hydra.sweeper.initial'"
            ["-m", "hydra/sweeper=tune", "+hydra.sweeper.initial=2"],
            "hydra.sweeper.initial already exists; + adds only new keys. Fix: hydra.sweeper.initial=2",
        ),
    ],
)
def test_an_added_key_the_sweeper_or_launcher_lacks_is_one_line(argv: list[str], words: str) -> None:
    """A new user's trial (session 27): ``+hydra.sweeper.foo=1`` reached the sweeper's constructor,
    Hydra's "Error in call to target ... TypeError" in four lines, exit 1, while ``hydra.sweeper.intial=2``
    got a did-you-mean before Hydra. ``+``/``++`` keys of the picked sweeper or launcher now get the same
    line, through ``run.py``'s refusal as well (exit 2)."""
    from run import refusal

    override = next(a for a in argv if a.lstrip("+").startswith("hydra."))
    assert words in _one_line(hydra_key_problem(argv), override)
    assert refusal(argv) == hydra_key_problem(argv)


@pytest.mark.parametrize(
    ("override", "fix"),
    [
        ("hydra.sweeper.budget_gpu_s=1,2", "give one value, e.g. hydra.sweeper.budget_gpu_s=1 (one sweep"),
        ("hydra.sweeper.budget_gpu_s=range(1,3)", "e.g. hydra.sweeper.budget_gpu_s=1 "),
        ("hydra.sweeper.eta=choice(2,3)", "give one value, e.g. hydra.sweeper.eta=VALUE"),
        ("hydra.verbose=true,false", "e.g. hydra.verbose=true "),
        ("hydra.job.chdir=glob(*)", "give one value"),
        ("+hydra.sweeper.foo=1,2", "e.g. +hydra.sweeper.foo=1 "),
        ("hydra.sweeper.params.seed=0,1", "sweep seed itself on the command line: -m seed=0,1."),
    ],
)
def test_a_sweep_of_a_hydra_key_is_one_line_naming_the_key_and_one_value(override: str, fix: str) -> None:
    """Hydra sweeps no ``hydra.*`` key: it stopped with "Sweeping over Hydra's configuration is not
    supported" and its ``HYDRA_FULL_ERROR`` hint, exit 1 (a trial's ``hydra.sweeper.budget_gpu_s=1,2``).
    Refused before Hydra, whatever the sweeper, the config or ``+sweep=``; the fix gives one value."""
    from run import refusal

    for argv in (
        ["-m", "hydra/sweeper=tune", override],
        ["-m", override, "seed=0,1"],
        ["-m", "+sweep=tuning", override],
        ["-m", "--config-name", "mine", override],
    ):
        line = _one_line(hydra_key_problem(argv), override)
        assert "Hydra sweeps the job's config only, not its own hydra.* keys" in line and fix in line
    assert refusal(["-m", "hydra/sweeper=tune", override]) == line
    fixed = fix.split("e.g. ", 1)[1].split(" ")[0] if "e.g. " in fix and "VALUE" not in fix else None
    if fixed and not fixed.startswith("+"):  # the one value passes
        assert hydra_key_problem(["-m", "hydra/sweeper=tune", fixed]) is None
