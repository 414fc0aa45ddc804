"""Session 22's trial of the command line: Hydra's flags and a group's ``+`` (``flopsweep.flags``), control
characters and an empty sweep choice (``flopsweep.override_grammar``), a device as ``hydra.run.dir``, the
analysis's ``--output`` folder and ``--notebook`` name, and ``flopsweep --help`` (``conf/hydra/help``).

Each refusal is one line before Hydra starts; where the line gives a command as its fix, the test runs that
fix through the same checks (and Hydra's parser or compose) to show it is the right one. In process: the
command lines themselves run in ``tests/integration/test_refusals.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import analysis_cli as _analysis

from flopsweep.cli import CHECKOUT, help_section
from flopsweep.flags import (
    expand_flag_prefixes,
    flag_problem,
    group_prefix_problem,
    hydra_flags_parser,
    is_multirun,
    searchpath_problem,
)
from flopsweep.hydrafiles import output_folder_problem
from flopsweep.override_grammar import control_character_problem, syntax_problem
from flopsweep.overrides import CONF, NEVER_SUGGESTED, known_keys
from flopsweep.sweep_file_keys import without_m_problem

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def _fix(line: str) -> str:
    return line.rsplit("Fix: ", 1)[1]


# --- flags -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "starts", "fix"),
    [
        (["--bogus"], "Invalid config: --bogus: is no flag of flopsweep", "drop it (flopsweep --help lists"),
        (["--multi-run", "seed=0,1"], "Invalid config: --multi-run: is no flag", "write --multirun."),
        (
            ["--steps.measure=3"],
            "Invalid config: --steps.measure=3: is no flag",
            "an override has no dashes: ",
        ),
        (
            ["--cfg", "jb"],
            "Invalid config: --cfg/-c: invalid choice: 'jb'",
            "give one of them, e.g. --cfg job.",
        ),
        (["-mx"], "Invalid config: --multirun/-m: ignored explicit argument 'x'", "write --multirun alone"),
        (["--package"], "Invalid config: --package/-p: expected one argument", "e.g. --package model."),
    ],
)
def test_a_flag_hydra_refuses_is_one_line_naming_the_flag_and_the_fix(argv, starts, fix):
    """Hydra printed argparse's usage block (9 lines) ending ``run.py: error``, exit 2."""
    line = refusal(argv)
    assert line is not None and line.startswith(starts) and fix in _fix(line), line
    assert "\n" not in line and "usage:" not in line


def test_the_fix_of_an_override_given_dashes_is_taken():
    line = refusal(["--steps.measure=3"])
    assert _fix(line) == "an override has no dashes: steps.measure=3."
    assert refusal(["steps.measure=3"]) is None


def test_overrides_on_both_sides_of_a_flag_get_the_flags_first():
    """``a=1 -m b=2``: argparse reads one run of overrides and refused ``b=2`` as unrecognized."""
    line = refusal(["seed=0,1", "-m", "tag=x"])
    assert line.startswith("Invalid config: tag=x: an override after a flag is not read"), line
    fixed = _fix(line).removeprefix("put the flags first: ").split()
    assert fixed == ["flopsweep", "-m", "seed=0,1", "tag=x"]
    args = hydra_flags_parser().parse_args(fixed[1:])
    assert args.multirun and args.overrides == ["seed=0,1", "tag=x"]
    assert refusal(fixed[1:]) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--hydra-help"],
        ["-m", "seed=0,1"],
        ["--multirun", "seed=0,1"],
        ["--cfg", "job"],
        ["--cfg=hydra", "--resolve"],
        ["--info", "defaults"],
        ["-i"],
        ["--config-name", "config"],
        ["--config-path", "conf"],
        ["--config-path", str(CONF)],
        ["--config-dir", str(CONF)],
        ["-c", "job", "-p", "model"],
        ["--shell-completion", "install=bash"],  # bare: no subcommand, refused (test_new_user_35)
    ],
)
def test_hydras_own_flags_pass(argv):
    assert flag_problem(argv) is None and refusal(argv) is None


@pytest.mark.parametrize(
    ("flag", "value", "state"),
    [
        ("--config-path", "/etc", "is another folder than conf/"),
        ("--config-path", "pkg://somepackage.conf", "names a Python package, which Hydra would import"),
        ("--config-dir", "/nonexistent-config-dir", "does not exist"),
        ("--config-dir", "/etc/hostname", "is a file, not a folder"),
        ("-cd", "/etc", "is another folder than conf/"),
    ],
)
def test_a_config_folder_other_than_conf_is_refused_in_one_line(flag, value, state):
    """``--config-path /etc``: "Cannot find primary config", the search path and the ``HYDRA_FULL_ERROR``
    hint (9 lines, exit 1); ``--config-dir /missing``: "Additional config directory ... not found"."""
    line = refusal([flag, value, "device=cpu"])
    long = {"-cd": "--config-dir"}.get(flag, flag)
    assert line.startswith(
        f"Invalid config: {long} {value}: {state}; flopsweep reads its configs from {CONF}"
    )
    assert _fix(line).startswith(f"drop {long}; put your own option or sweep file in conf/")


def test_a_config_dir_that_is_a_link_to_conf_is_conf(tmp_path):
    (tmp_path / "conf").symlink_to(CONF)
    assert flag_problem(["--config-dir", str(tmp_path / "conf")]) is None
    (tmp_path / "other").mkdir()
    assert "is another folder than conf/" in flag_problem(["--config-dir", str(tmp_path / "other")])


def test_a_rerun_pickle_is_refused():
    """``--experimental-rerun FILE`` unpickles FILE (code); flopsweep writes no config.pickle."""
    line = refusal(["--experimental-rerun", "/tmp/x/.hydra/config.pickle"])
    assert line.startswith("Invalid config: --experimental-rerun /tmp/x/.hydra/config.pickle: loads a pickle")
    assert "Fix: drop it" in line


@pytest.mark.parametrize("prefix", ["--multi", "--multir", "--mu"])
def test_a_prefix_of_multirun_is_multirun_to_every_check(prefix, tmp_path):
    """argparse reads ``--multi`` as ``--multirun`` (``allow_abbrev``), so Hydra ran a sweep where the
    checks before it saw none: ``--multi tag=a,b`` was refused as "a sweep without -m", ``--multi
    repeats=2`` as "add -m", and a sweep into a run's folder passed the single run's check. Spelled out,
    as Hydra's parser reads it."""
    from run import existing_record_problem

    assert expand_flag_prefixes([prefix, "tag=a,b"]) == ["--multirun", "tag=a,b"]
    assert is_multirun([prefix]) and hydra_flags_parser().parse_known_args([prefix])[0].multirun
    for argv in (["tag=a,b"], ["repeats=2"], ["hydra/sweeper=tune", "device=cpu", "backend=ddp,fsdp"]):
        assert refusal(argv) is not None, argv  # a sweep's overrides without -m
        assert refusal([prefix, *argv]) is None, argv
    (tmp_path / "metrics.json").write_text("{}")
    assert existing_record_problem([f"hydra.run.dir={tmp_path}"]) is not None
    assert existing_record_problem([prefix, f"hydra.run.dir={tmp_path}"]) is None


def test_only_a_prefix_of_one_flag_is_spelled_out():
    """A prefix of several flags (``--conf``), of none, an override and ``--`` stay as written: Hydra's parser
    refuses the first two, in one line each."""
    argv = ["--conf", "x", "--bogus", "--", "tag=--multi", "--config-n=config", "--cf", "job"]
    assert expand_flag_prefixes(argv) == [
        "--conf", "x", "--bogus", "--", "tag=--multi", "--config-name=config", "--cfg", "job"
    ]  # fmt: skip
    assert not is_multirun(["tag=--multi", "--multi-run"])
    assert refusal(["--conf", "x"]).startswith("Invalid config: ambiguous option: --conf could match")
    assert refusal(["--multi-run"]).endswith("Fix: write --multirun.")


@pytest.mark.parametrize(
    ("override", "state"),
    [
        ("hydra.searchpath=[pkg://mine.conf]", "names a Python package, which Hydra would import"),
        ("hydra.searchpath=[file://myconfs]", "adds a folder whose YAML Hydra would read as configs"),
        ("+hydra.searchpath=[file:///tmp/x]", "adds a folder whose YAML Hydra would read"),
        ("++hydra.searchpath=[pkg://x,file://y]", "names a Python package"),
        ("hydra.searchpath.0=file://x", "adds a folder"),
        ("hydra.searchpath[0]=file://x", "adds a folder"),
        ("~hydra.searchpath", "changes where Hydra searches for configs"),
    ],
)
def test_a_config_search_path_is_refused_as_a_config_folder_is(override, state):
    """``hydra.searchpath`` puts a folder (read from the working directory when relative) or a package
    (imported) before conf/, as ``--config-dir`` would: refused the same way, one line, before Hydra."""
    line = refusal([override, "device=cpu"])
    assert line == searchpath_problem([override])
    assert line.startswith(f"Invalid config: {override}: {state}") and "\n" not in line
    assert f"flopsweep reads its configs from {CONF} alone" in line
    assert _fix(line).startswith(f"drop {override}; put your own option or sweep file in conf/")
    assert searchpath_problem(["hydra.run.dir=x", "tag=hydra.searchpath=[pkg://x]", "-m"]) is None


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("hydra.searchpathx=1", None),
        ("hydra.output_subdri=x", None),
        ("repeatt=1", "repeats"),
        ("--experimental-rerunx", None),
        ("hydra.job.chdri=true", "hydra.job.chdir"),  # a key that is taken is still named
        ("--multirn", "--multirun"),
    ],
)
def test_a_did_you_mean_never_names_a_key_or_flag_that_is_refused(typo, meant):
    """``hydra.searchpathx=1`` was told "did you mean hydra.searchpath?", itself refused (so are
    ``hydra.output_subdir``, ``repeat`` and ``--experimental-rerun``, :data:`NEVER_SUGGESTED`): each typo's
    line names none of them, lists none among the keys taken, and still names the nearest key taken."""
    line = refusal([typo, "device=cpu"])
    assert line.startswith(f"Invalid config: {typo}") and "\n" not in line
    fix = _fix(line)
    named = set(re.findall(r"[-\w.]+", fix.replace(", ", " ")))
    assert not named & NEVER_SUGGESTED, fix
    assert not {k.rpartition(".")[2] for k in NEVER_SUGGESTED if k.startswith("hydra.")} & named, fix
    if meant is not None:
        assert f"did you mean {meant}" in fix or f"write {meant}" in fix, fix
    for refused in NEVER_SUGGESTED - {"repeat"}:  # refused indeed (repeat=5: the job's, test_repeats.py)
        given = f"{refused}=f" if refused.startswith("-") else f"{refused}=5"
        assert refusal([given, "device=cpu"]).startswith(f"Invalid config: {refused}"), given


def test_stdout_whose_reader_went_away_takes_the_rest_quietly(tmp_path):
    """``flopsweep --help | head -3``: Hydra's ``print`` met BrokenPipeError, a traceback (``--cfg job``:
    through Hydra's ``run_and_report``). The guard points the descriptor at os.devnull at the first such
    write, as the Python docs advise, and takes every later write and flush; before that, writes go
    through."""
    import io

    from flopsweep.streams import ClosedPipeGuard

    read, write = os.pipe()
    stream = io.TextIOWrapper(os.fdopen(write, "wb", buffering=0), encoding="utf-8", write_through=True)
    guard = ClosedPipeGuard(stream)
    guard.write("first\n")
    assert os.read(read, 100) == b"first\n" and not guard.closed
    os.close(read)  # the reader went away
    guard.write("x" * 100_000)
    guard.writelines(["more\n"] * 3)
    print("and more", file=guard, flush=True)
    guard.flush()
    assert guard.closed
    assert os.path.samestat(os.fstat(stream.fileno()), os.stat(os.devnull))
    assert guard.encoding == "utf-8" and not guard.isatty()  # the rest is the stream's
    stream.close()


# --- a group's + -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "why", "fix"),
    [
        (["sweep=smoke"], "sweep is a group added with + (no default picks one)", "+sweep=smoke"),
        (["-m", "sweep=smoke,backends"], "sweep is a group added with +", "+sweep=smoke,backends"),
        (["++sweep=smoke"], "sweep is a group added with +", "+sweep=smoke"),
        (["+model=gpt-125m"], "model is picked by the defaults already (model=gpt-tiny", "model=gpt-125m"),
        (["++backend=ddp"], "backend is picked by the defaults already (backend=single", "backend=ddp"),
        (["~sweep"], "no sweep is picked, so there is none to remove", "drop ~sweep"),
    ],
)
def test_a_groups_plus_forgotten_or_extra_is_one_line_with_the_override_to_write(
    argv, why, fix, hydra_compose
):
    """``sweep=smoke``: Hydra's "Could not override 'sweep'. No match in the defaults list", its
    ``HYDRA_FULL_ERROR`` hint, exit 1; ``+model=...``: "Multiple values for model"."""
    override = argv[-1]
    line = refusal(argv)
    assert line == f"Invalid config: {override}: {why}{line.split(why, 1)[1]}", line
    assert _fix(line) == fix
    assert group_prefix_problem([override]) == line
    if override != "~sweep":
        with pytest.raises(Exception):  # noqa: B017, PT011 - Hydra's own refusal, whatever its class
            hydra_compose.config([override])
    if "," not in fix and not fix.startswith("drop"):
        hydra_compose.config([fix])  # the fix composes
        if fix.startswith("+sweep="):  # a sweep file of axes runs them only under -m (reliability-6.md #350)
            assert refusal([fix]) == without_m_problem([fix], CONF)
            fix = f"-m {fix}"
        assert refusal(fix.split()) is None


def test_an_option_of_a_group_added_with_plus_is_suggested_with_its_plus():
    line = refusal(["sweep=smok"])
    assert "smok is no option of sweep" in line and line.endswith("e.g. -m +sweep=smoke.")  # a sweep needs -m
    assert refusal(["backend=zero9"]).endswith("(several, one job each: -m backend=a,b).")
    assert "+backend" not in refusal(["backend=zero9"])


# --- control characters, an empty choice --------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "shown", "at", "part"),
    [
        ("hydra.run.dir=/tmp/x\x1b[31m\nx", "\\x1b", 21, "value"),
        ("tag=a\nb", "\\n", 6, "value"),
        ("tag='a\tb'", "\\t", 7, "value"),
        ("tag=\u202eabc", "\\u202e", 5, "value"),
        ("ta\x1bg=1", "\\x1b", 3, "key"),
        ("tag=a\u00a0b", "\\xa0", 6, "value"),
    ],
)
def test_a_control_character_is_named_and_its_fix_is_to_remove_it(override, shown, at, part):
    """``hydra.run.dir=$'/tmp/x\\x1b[31m\\nx'`` said ``Fix: close the [`` (the grammar saw a bracket)."""
    line = control_character_problem([override])
    assert line is not None and refusal([override]) == line
    said = {"\\x1b": "a control character", "\\n": "a line break", "\\t": "a tab"}.get(shown, "an invisible")
    assert f"its {part} holds {said}" in line and f", {shown}" in line and f"(character {at})" in line
    escape = shown == "\\x1b"  # only ESC starts a sequence a terminal obeys (#460: not said of a tab)
    assert ("terminal would obey" in line) == escape
    assert _fix(line) == ("remove it (and any escape sequence it starts)" if escape else "remove it") + (
        f" from the {part}."
    )
    assert "close the" not in line and "quote the value" not in line


@pytest.mark.parametrize(
    ("override", "where", "fix"),
    [
        ("model=gpt-tiny,", "a trailing comma leaves", "model=gpt-tiny"),
        ("model=,gpt-tiny", "a leading comma leaves", "model=gpt-tiny"),
        ("model=gpt-tiny,,llama-tiny", "two commas in a row leave", "model=gpt-tiny,llama-tiny"),
        ("seed=0,1,", "a trailing comma leaves", "seed=0,1"),
        ("tag='a,b',", "a trailing comma leaves", "tag='a,b'"),
    ],
)
def test_an_empty_choice_in_a_sweep_list_is_named_and_dropped(override, where, fix):
    """``-m model=gpt-tiny,`` said ``Fix: quote the value ... 'model="gpt-tiny,"'``, which would then be
    refused as an unknown model."""
    line = refusal(["-m", override])
    assert line == f"Invalid config: {override}: {where} an empty choice. Fix: {fix}", line
    assert refusal(["-m", fix]) is None and syntax_problem([fix]) is None


def test_a_comma_inside_brackets_is_the_grammars():
    line = syntax_problem(["model.n_layer=[1,2,]"])
    assert "Hydra's override grammar cannot read it" in line and "empty choice" not in line


# --- a device as the run's folder; the analysis's outputs ---------------------------------------------


def test_a_device_is_never_the_users_to_remove_a_file_of_theirs_may_be(tmp_path):
    line = output_folder_problem("hydra.run.dir", os.devnull)
    beside = "Fix: choose another hydra.run.dir, e.g. hydra.run.dir=/dev/null-2."  # #845: a folder named
    assert "is a character device" in line and line.endswith(beside)
    assert "remove" not in line
    mine = tmp_path / "afile"
    mine.write_text("")
    line = output_folder_problem("hydra.run.dir", str(mine))
    assert line.endswith(
        f"Fix: remove {mine} if it is yours, or choose another hydra.run.dir, e.g. hydra.run.dir={mine}-2."
    )
    assert refusal([f"hydra.run.dir={os.devnull}"]).endswith(beside)


def test_an_output_under_a_file_says_the_file_is_no_folder(capsys, tmp_path):
    """``--output afile/x.csv`` said ``cannot write afile: File exists`` (exit 1)."""
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "x.csv"
    code, out, err = _analysis(capsys, SWEEP, "--format", "csv", "--output", target)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert err == (
        f"python -m analysis: error: --output {target}: its folder {tmp_path / 'afile'} is a regular file, "
        "not a folder. Fix: name a file in a folder you can write, e.g. report.csv\n"
    )
    assert (tmp_path / "afile").read_text() == ""


def test_an_output_where_no_file_can_be_made_has_a_fix(capsys):
    """``--output /proc/self/foo.csv`` said ``cannot write ...: No such file or directory``, no fix."""
    code, out, err = _analysis(capsys, SWEEP, "--output", "/proc/self/foo.csv")
    assert code == 2 and not out and err.count("\n") == 1, err
    assert "--output /proc/self/foo.csv: its folder /proc/self cannot take a file (" in err
    assert "Fix: name a file in a folder you can write" in err


@pytest.mark.parametrize(
    ("name", "fix"), [("x.txt", "x.ipynb"), ("report", "report.ipynb"), ("a.md", "a.ipynb")]
)
def test_a_notebook_name_must_end_in_ipynb(capsys, tmp_path, name, fix):
    """``--notebook x.txt`` was executed and written as a notebook Jupyter would not list."""
    code, out, err = _analysis(capsys, SWEEP, "--notebook", tmp_path / name)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert f"argument --notebook: {tmp_path / name}: a notebook's name ends in .ipynb" in err
    assert f"Fix: --notebook {tmp_path / fix}" in err and "starting a kernel" not in err
    assert not (tmp_path / name).exists()


# --- flopsweep --help ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def help_text(hydra_compose) -> str:
    """The template of ``conf/hydra/help/flopsweep.yaml`` as Hydra's ``app_help`` reads it (resolved:
    ``run.py``'s ``flopsweep_help`` resolver registered), less Hydra's ``$FLAGS`` substitution."""
    import run  # noqa: F401 - registers the flopsweep_help resolver

    return str(hydra_compose.config([], hydra=True).hydra.help.template)


def test_the_help_lists_the_user_groups_not_the_schema(help_text):
    """Hydra's help listed ``schema/*`` (the typed bases) beside the groups, said ``run is powered by
    Hydra`` and named no docs."""
    assert help_text.startswith("flopsweep: measure training throughput")
    assert "schema/" not in help_text and "powered by Hydra" not in help_text
    groups = sorted(p.name for p in Path(CONF).iterdir() if p.is_dir() and p.name != "hydra")
    for group in groups:
        head = f"+{group} (added with +)" if group == "sweep" else f"{group} (default "
        assert f"\n  {head}" in help_text, group
    assert "model (default gpt-tiny): gpt-1.3b," in help_text and "smoke" in help_text
    assert f"Docs: {CHECKOUT / 'docs'} (usage.md" in help_text
    assert "$" not in help_text  # string.Template would refuse a stray dollar sign
    assert max(len(line) for line in help_text.splitlines()) <= 110


def test_the_helps_keys_are_keys_and_its_examples_run(help_text):
    """Every ``KEY=`` the help names is a key of the schema (or Hydra's ``hydra.run.dir``, ...), and each
    example command passes every check before Hydra starts."""
    keys_part = help_text.split("== Main keys", 1)[1].split("== Examples", 1)[0]
    named = set(re.findall(r"(?<![\w.])([a-z_]+(?:\.[a-z_]+)*)=", keys_part))
    assert {"device", "nproc_per_node", "batch.micro_batch_size", "plan", "hydra.sweep.dir"} <= named
    assert {k for k in named if not k.startswith("hydra.")} <= known_keys(), named - known_keys()
    examples = [line.split("#")[0].split() for line in help_text.split("== Examples ==")[1].splitlines()]
    runs = [e[1:] for e in examples if e and e[0] == "flopsweep"]
    assert len(runs) == 4
    for argv in runs:
        assert refusal(argv) is None, argv
    assert any(e and e[0] == "flopsweep-analysis" for e in examples)


def test_help_section_names_its_sections():
    assert help_section("docs") == str(CHECKOUT / "docs")
    with pytest.raises(ValueError, match="no section 'nope'"):
        help_section("nope")


def test_the_help_names_every_launcher_sweeper_and_plan_key(help_text):
    """The help had no ``plan_clusters`` and no ``basic``/``slurm_local`` launcher: every launcher and
    sweeper a user can pick (the YAML files of conf/hydra/ and of the plug-ins, Hydra's ``basic``) and
    every plan key of the schema is named, so that a new one cannot be left out."""
    import dataclasses

    from flopsweep.config import RunConfig

    groups = help_text.split("== Main keys")[0]
    for group in ("launcher", "sweeper"):
        files = [
            *Path(CONF, "hydra", group).glob("*.yaml"),
            *CHECKOUT.glob(f"hydra_plugins/*/conf/hydra/{group}/*.yaml"),
        ]
        names = {f.stem for f in files} | ({"basic"} if group == "launcher" else set())
        part = groups.split(f"hydra/{group}: ", 1)[1].split("\n  hydra/", 1)[0]
        listed = {n.strip() for n in re.sub(r"\([^)]*\)", "", " ".join(part.split())).split(",")}
        assert listed == names, group
        assert len(names) >= (4 if group == "launcher" else 3)
    keys = help_text.split("== Main keys")[1].split("== Examples")[0]
    plan_keys = [f.name for f in dataclasses.fields(RunConfig) if f.name.startswith("plan")]
    assert {"plan", "plan_gpu", "plan_clusters", "plan_gpu_memory_gib", "plan_format"} <= set(plan_keys)
    for key in plan_keys:
        assert f"{key}=" in keys, key


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["-m", "seed=0,1", "--cfg", "job"], "-m and --cfg job"),
        (["--info", "-m"], "--info and -m"),
        (["--cfg", "job", "--multirun"], "--cfg job and --multirun"),
        (["-m", "--info", "defaults", "backend=ddp,fsdp"], "-m and --info defaults"),
        (["--cfg=hydra", "-r"], "--cfg=hydra and -r"),
    ],
)
def test_two_of_hydras_commands_are_one_line_with_each_alone_as_the_fix(argv, shown):
    """Hydra answered these with a 16-line ``ValueError`` traceback ("Only one of --run, --multirun, --cfg,
    --info and --shell_completion can be specified"); each fix passes every check before Hydra."""
    line = refusal(argv)
    assert line is not None and line.startswith(f"Invalid config: {shown}: Hydra runs one of"), line
    fixes = re.findall(r"flopsweep ([^()]*) \(", _fix(line))
    assert len(fixes) == 2, line
    for fix in fixes:
        assert refusal(fix.split()) is None, fix
        assert (
            len({a for a in fix.split() if a in ("-m", "--multirun", "--cfg", "--cfg=hydra", "--info", "-r")})
            == 1
        )


@pytest.mark.parametrize(
    ("arg", "odd", "meant"),
    [
        ("—multirun", "U+2014 EM DASH", "--multirun"),
        ("−m", "U+2212 MINUS SIGN", "-m"),
        ("–cfg", "U+2013 EN DASH", "--cfg"),
    ],
)
def test_a_flag_typed_with_a_unicode_dash_is_named_with_its_ascii_form(
    arg: str, odd: str, meant: str
) -> None:
    """Trial 24b: ``flopsweep —multirun ...`` and ``−m`` reached Hydra's override grammar (its
    ``LexerNoViableAltException``, six lines, exit 1). Now one line naming the character and the flag
    meant, before Hydra."""
    line = flag_problem([arg, "model=llama-tiny"])
    assert line is not None and "\n" not in line
    assert odd in line and line.endswith(f"Fix: write {meant}")
    assert flag_problem(["-m", "model=llama-tiny"]) is None
    assert flag_problem(["tag=—x"]) is None  # a value's dash is the value's
