"""Session 31: refusals of the plan's and the tuner's keys that came after Hydra made a folder, or not at
all (docs/reliability-4.md, rows 259 on): a CPU plan of a YAML model with ``model.*`` overrides, a sweep
file that sets a key the space decides by an option pick or an axis, a ``parallel`` mapping beside a
space, and ``batch=auto`` beside the tuner's ``space.*``. Each is :func:`run.refusal`'s one line, before
Hydra; ``tests/integration/test_refusals_31.py`` runs them as a user types them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from flopsweep import hostmem
from flopsweep.local_gpus import no_gpu_here
from flopsweep.plan_command_line import command_line_problem, cpu_plan_problem
from flopsweep.sweep_file_keys import values_problem
from run import refusal
from tests.unit.test_conf_files import _conf
from tests.unit.test_sweep_file_keys import HEAD, _checks

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = pytest.mark.skipif(not no_gpu_here(), reason="a GPU is here: the plan is of it")


@NO_GPU
def test_a_cpu_plan_with_model_overrides_is_the_jobs_line_before_hydra(hydra_compose) -> None:
    """``plan=true model=llama3.1-8b model.n_layer=40``: the job's own line (``plan.resolve`` on the
    composed config, this machine's memory), before Hydra; the override is merged as Hydra merges it
    (the last of a key wins, a quoted number is the int key's number), and one that makes the model
    fit passes."""
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, resolve

    argv = ["plan=true", "model=llama3.1-8b", "model.n_layer=40"]
    host = hostmem.total_bytes()
    if host is None or host > 140 * 2**30:
        pytest.skip("this machine holds the model's 145.7 GiB of states")
    with pytest.raises(ConfigError) as job:
        resolve(hydra_compose(argv), Environment(cpu_count=2, host_memory_bytes=host))
    assert "take at least 145.7 GiB" in str(job.value)
    assert refusal(argv) == cpu_plan_problem(argv)
    assert str(job.value).replace("'llama3.1-8b'", "llama3.1-8b with model.n_layer=40") == refusal(argv)
    assert cpu_plan_problem(["plan=true", "model=llama3.1-8b", "model.n_layer=2", "model.n_layer=40"]) == (
        refusal(argv)
    )
    assert cpu_plan_problem([*argv[:2], "model.n_layer='40'"]) == refusal(argv)
    assert refusal(["plan=true", "model=llama3.1-8b", "model.n_layer=2"]) is None
    assert refusal([*argv, "plan_gpu=H100"]) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["plan=true", "model=hf", "model.config=mistral-7b-v0.1"],  # counted with torch: the job's
        ["-m", "plan=true", "model=llama3.1-8b", "model.n_layer=2,40"],  # a sweep: each job's
        ["plan=true", "model=llama3.1-8b", "model.n_layer=${seed}"],
        ["plan=true", "model=llama3.1-8b", "+model.n_layer=40"],  # existing_key_add_problem's line
        ["plan=true", "model=llama3.1-8b", "model.bogus=3"],  # type_problem's line
    ],
)
def test_a_cpu_plan_the_command_line_cannot_size_is_left_to_the_job(argv: list[str]) -> None:
    assert cpu_plan_problem(argv) is None


SPACES = {
    "plan": ["plan=true", "plan_clusters=[H100:8]"],
    "tune": ["hydra/sweeper=tune", "space.backends=[ddp,fsdp]"],
}
READERS = {"plan": "a plan over plan_clusters", "tune": "a tuning sweep over space.*"}


@pytest.mark.parametrize("space", list(SPACES))
@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "hydra:\n  sweeper:\n    params:\n      batch.micro_batch_size: 1,2,4\n",
            "batch.micro_batch_size=1,2,4: {reader} takes it from space.micro_batches (each set-up sets its "
            "own batch.micro_batch_size). Fix: drop batch.micro_batch_size and give it as "
            "space.micro_batches=[1,2,4].",
        ),
        (
            "defaults:\n  - override /backend: ddp\n",
            "backend=ddp: {reader} takes it from space.backends (each set-up sets its own backend). "
            "Fix: drop backend and give it as space.backends=[ddp].",
        ),
        (
            'hydra:\n  sweeper:\n    params:\n      parallel: "{tp:2},{dp_shard:-1}"\n',
            "parallel.tp=2: {reader} takes it from space.layouts (each set-up sets its own parallel.tp). "
            "Fix: drop parallel.tp and give it as space.layouts=[tp2].",
        ),
    ],
    ids=["micro-batch-axis", "backend-pick-alone", "parallel-axis"],
)
def test_a_sweep_files_pick_or_axis_of_a_key_the_space_decides_is_refused_naming_the_file(
    tmp_path: Path, space: str, text: str, said: str
) -> None:
    """A sweep file's plain values were checked with the command line; its option picks and axes of a
    key the space decides were not when it had no plain value, nor an axis of a key that is no group
    (the plan repeated its rows, exit 0; the tuner refused after Hydra, or crossed the axis with its
    space)."""
    conf = _conf(tmp_path, {"sweep/mine.yaml": HEAD + text})
    for group, option in (("backend", "ddp"), ("backend", "fsdp")):
        (conf / group).mkdir(exist_ok=True)
        (conf / group / f"{option}.yaml").write_text(f"name: {option}\n")
    line = values_problem(["-m", "+sweep=mine", *SPACES[space]], _checks(), str(conf))
    assert line == "Invalid config: conf/sweep/mine.yaml: " + said.format(reader=READERS[space])
    assert values_problem(["-m", "+sweep=mine", "plan=true"], _checks(), str(conf)) is None


@pytest.mark.parametrize("space", list(SPACES))
def test_every_shipped_sweep_file_beside_a_space_is_refused_naming_the_file_and_a_key(space: str) -> None:
    """Each ``conf/sweep`` file sets a key the space decides (its backend, precision or micro batch, by a
    pick, a plain value or an axis): beside ``plan_clusters`` or a tuning ``space.*`` its line names the
    file and that key."""
    names = sorted(p.stem for p in (ROOT / "conf" / "sweep").glob("*.yaml"))
    for name in names:
        line = refusal(["-m", f"+sweep={name}", *SPACES[space]])
        assert line is not None and line.startswith(f"Invalid config: sweep/{name}.yaml: "), (name, line)
        assert "\n" not in line and " Fix: " in line, line
        assert re.search(r": [\w./]+=\S+: (a plan|a tuning sweep)", line), line


@pytest.mark.parametrize("batch", ["auto", "auto/max16"], ids=["auto", "auto-max16"])
def test_batch_auto_beside_the_tuners_space_is_refused_and_its_fix_passes(batch: str) -> None:
    """``-m hydra/sweeper=tune device=cpu model=gpt-tiny batch=auto 'space.micro_batches=[1,2]'`` ran
    each set-up's search and measured both at micro batch 256, then named the winner
    ``batch.micro_batch_size=2`` (exit 0). Now one line; its fix (the list alone) passes, and so does
    ``batch=auto`` in a tuning sweep over Hydra's axes (no ``space.*``: each job searches its own)."""
    tune = ["-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny"]
    line = refusal([*tune, f"batch={batch}", "space.micro_batches=[1,2]"])
    assert line == (
        f"Invalid config: batch={batch}: a tuning sweep over space.* gives each set-up its micro batch from "
        f"space.micro_batches, which batch={batch} replaces with the largest that fits (each set-up measured "
        f"there, ranked under the micro batch it was given). Fix: drop batch={batch} and list the micro "
        "batches: space.micro_batches=[1,2,4,8], or drop the space.* overrides to tune the sweep's axes "
        f"with batch={batch}."
    )
    assert refusal([*tune, "space.micro_batches=[1,2,4,8]"]) is None
    assert refusal([*tune, f"batch={batch}", "backend=ddp,fsdp"]) is None


def test_batch_auto_with_a_cap_beside_plan_clusters_is_refused_as_batch_auto() -> None:
    """``batch=auto/max16`` is ``batch=auto`` with a cap (the ready-made sweeps' pick): a plan over
    clusters refused ``batch=auto`` and took ``auto/max16``, exit 0."""
    line = command_line_problem(["plan=true", "plan_clusters=[H100:8]", "batch=auto/max16"])
    assert line is not None and line.startswith(
        "Invalid config: batch=auto/max16: a plan over plan_clusters cannot use it (it predicts each set-up"
    )
    assert "Fix: drop batch=auto/max16 and list them: space.micro_batches=[1,2,4,8]" in line
    assert command_line_problem(["plan=true", "plan_clusters=[H100:8]", "batch=fixed"]) is None


@pytest.mark.parametrize("space", list(SPACES))
def test_a_parallel_mapping_beside_a_space_is_read_as_its_degrees(space: str) -> None:
    """``'parallel={tp:2}'`` beside a space passed (``parallel.tp=2`` was refused): each set-up sets its
    own degrees. A mapping of the defaults (``{dp_shard:-1}``) is no conflict."""
    argv = ["-m", *SPACES[space]]
    assert refusal([*argv, "parallel={tp:2}"]) == (
        f"Invalid config: parallel.tp=2: {READERS[space]} takes it from space.layouts (each set-up sets its "
        "own parallel.tp). Fix: drop parallel.tp and give it as space.layouts=[tp2]."
    )
    assert refusal([*argv, "parallel={dp_shard:-1,dp_replicate:1}"]) is None


NEW_LINES = (
    "takes it from space.",
    "cannot use it",
    "gives each set-up its micro batch",
    "on the CPU the fp32",
    "ranks set-ups measured on one model",
)
"""What the refusals of the keys beside a space (and of a CPU plan) say: a documented command line that
draws one must be documented as refused."""

_OVERRIDE = re.compile(r"(-m|[+~]{0,2}[A-Za-z_][\w./@-]*=.*|~[A-Za-z_][\w.]*)")
_TOUCHES = re.compile(r"\+?sweep=|plan=|plan_clusters=|hydra/sweeper=|space\.|batch=|model[.=]|parallel")


def _documented_command_lines() -> list[tuple[str, list[str], str]]:
    """``(page, argv, its paragraph)`` of each command line of README.md and docs/*.md that touches the
    plan's, the tuner's, a sweep file's or the model's keys: a ``flopsweep ...`` or ``python run.py ...``
    line, or a code span of overrides alone (``plan=true 'plan_clusters=[H100:8]'``)."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for paragraph in re.split(r"\n\s*\n|\n(?=\s*(?:\d+\.|-) )", page.read_text()):
            joined = paragraph.replace("\\\n", " ")
            for code in re.findall(r"`([^`\n]+)`", joined) + joined.splitlines():
                m = re.search(r"(?:^|\s)(?:flopsweep|python run\.py)\s+(.*)$", code.strip())
                text = re.split(r" #| \| | && | > | 2>", m.group(1) if m else code.strip())[0]
                try:
                    argv = shlex.split(text)
                except ValueError:
                    continue
                if (
                    argv
                    and all(_OVERRIDE.fullmatch(a) for a in argv)
                    and any(_TOUCHES.match(a) for a in argv)
                ):
                    out.append((page.name, argv, paragraph))
    return out


def test_the_documented_command_lines_are_refused_only_where_the_docs_say_so() -> None:
    """Nothing the docs show working is refused by these checks: each documented command line that
    touches their keys (273 on 2026-12-06, 111 passing: each drew the same line before session 31's checks
    but the refused examples of rows 259 and 261) draws one of their lines only where its paragraph says it
    is refused."""
    found = _documented_command_lines()
    assert len(found) > 100
    for page, argv, paragraph in found:
        line = refusal(argv)
        if line is not None and any(said in line for said in NEW_LINES):
            assert re.search(r"refused|Invalid config|Fix:|Was:", paragraph), (page, argv, line)


TUNE_CPU = ["-m", "hydra/sweeper=tune", "device=cpu", "model=gpt-tiny"]


@pytest.mark.parametrize("space", list(SPACES))
def test_search_model_largest_beside_a_space_is_refused_and_its_fix_passes(
    tmp_path: Path, space: str
) -> None:
    """``-m hydra/sweeper=tune device=cpu model=gpt-tiny search.model=largest 'space.backends=[ddp]'``
    passed: each job grew its own model, then the tuner ranked set-ups measured on different models. A
    sweep file's ``search: {model: largest}`` is the same line, naming the file; the fix (drop it) passes."""
    argv = [*TUNE_CPU, "space.backends=[ddp]"] if space == "tune" else ["-m", *SPACES[space]]
    line = command_line_problem([*argv, "search.model=largest"])
    assert line is not None and line.startswith("Invalid config: search.model=largest: "), line
    assert "\n" not in line and "Fix: drop search.model=largest" in line
    if space == "tune":
        assert line == (
            "Invalid config: search.model=largest: a tuning sweep over space.* ranks set-ups measured on one "
            "model, which search.model=largest replaces with the largest each set-up fits (each job grows "
            "its own model). Fix: drop search.model=largest to tune model=gpt-tiny."
        )
    assert refusal(argv) is None
    conf = _conf(tmp_path, {"sweep/mine.yaml": HEAD + "search:\n  model: largest\n"})
    filed = values_problem(["-m", "+sweep=mine", *argv], _checks(), str(conf))
    assert filed == "Invalid config: conf/sweep/mine.yaml: " + line.removeprefix("Invalid config: ")


BAD_VALUES = [
    ("parallel.tp=null", "parallel.tp=null", "space.layouts=[dp,tp2]"),
    ("parallel.tp=2.0", "parallel.tp=2.0", "space.layouts=[dp,tp2]"),
    ("parallel.tp=abc", "parallel.tp=abc", "space.layouts=[dp,tp2]"),
    ("parallel={tp:0}", "parallel.tp=0", "space.layouts=[dp,tp2]"),
    ("batch.micro_batch_size=0", "batch.micro_batch_size=0", "space.micro_batches=[1,2,4,8]"),
    ("batch.micro_batch_size=abc", "batch.micro_batch_size=abc", "space.micro_batches=[1,2,4,8]"),
    (
        "batch.micro_batch_size=${steps.measure}",
        "batch.micro_batch_size=${steps.measure}",
        "space.micro_batches=[1,2,4,8]",
    ),
    ("parallel.tp=${steps.measure}", "parallel.tp=${steps.measure}", "space.layouts=[dp,tp2]"),
    ("parallel={tp:${steps.measure}}", "parallel.tp=${steps.measure}", "space.layouts=[dp,tp2]"),
]


@pytest.mark.parametrize("space", list(SPACES))
@pytest.mark.parametrize(("override", "shown", "fix"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_key_the_space_decides_is_refused_whatever_its_value_with_a_fix_that_passes(
    space: str, override: str, shown: str, fix: str
) -> None:
    """Beside a space, ``parallel.tp=null`` suggested ``space.layouts=[tpnull]`` (``2.0``: ``[tp2.0]``,
    ``batch.micro_batch_size=0``: ``[0]``), and an interpolation (``${steps.measure}``) passed, exit 0,
    the set-ups ignoring it. Now each is refused; the fix names no invalid value, and it passes."""
    argv = ["-m", *SPACES[space]]
    line = refusal([*argv, override])
    key = shown.partition("=")[0]
    space_key = fix.partition("=")[0]
    assert line == (
        f"Invalid config: {shown}: {READERS[space]} takes it from {space_key} (each set-up sets its own "
        f"{key}). Fix: drop {key} and list the set-ups' values in {space_key}, e.g. {fix}."
    )
    assert refusal([*argv, fix]) is None


@pytest.mark.parametrize("space", list(SPACES))
def test_a_sweep_files_interpolated_micro_batch_beside_a_space_is_refused(tmp_path: Path, space: str) -> None:
    """A sweep file's ``batch: {micro_batch_size: ${steps.measure}}`` beside ``plan_clusters`` passed,
    exit 0; now the command line's line, naming the file."""
    conf = _conf(tmp_path, {"sweep/mine.yaml": HEAD + "batch:\n  micro_batch_size: ${steps.measure}\n"})
    line = values_problem(["-m", "+sweep=mine", *SPACES[space]], _checks(), str(conf))
    assert line is not None and line.startswith(
        "Invalid config: conf/sweep/mine.yaml: batch.micro_batch_size=${steps.measure}: "
    ), line
    assert "e.g. space.micro_batches=[1,2,4,8]" in line


@NO_GPU
def test_a_cpu_plans_refusal_names_the_model_overrides_and_no_model_given() -> None:
    """``plan=true model=llama3.1-8b model.n_layer=40`` said ``model='llama3.1-8b'`` of 145.7 GiB (the
    YAML's model is 119.7); and ``model=gpt-tiny model.n_layer=100000`` was told to pick gpt-tiny."""
    host = hostmem.total_bytes()
    if host is None or host > 140 * 2**30:
        pytest.skip("this machine holds the model's 145.7 GiB of states")
    line = cpu_plan_problem(["plan=true", "model=llama3.1-8b", "model.n_layer=2", "model.n_layer='40'"])
    assert line is not None and line.startswith(
        "Invalid config: model=llama3.1-8b with model.n_layer=40: on the CPU the fp32 weights, gradients and "
        "AdamW states of 1 rank take at least 145.7 GiB"
    ), line
    assert line.endswith("or pick a smaller model (e.g. model=gpt-tiny).")
    tiny = cpu_plan_problem(["plan=true", "model=gpt-tiny", "model.n_layer=100000"])
    assert tiny is not None and tiny.startswith("Invalid config: model=gpt-tiny with model.n_layer=100000: ")
    assert "model=gpt-tiny)" not in tiny and tiny.endswith("or pick smaller model.* values.")
    alone = cpu_plan_problem(["plan=true", "model=llama3.1-8b"])
    assert alone is not None and alone.startswith("Invalid config: model='llama3.1-8b': ")


MAPPINGS = [
    ("parallel={TP:2}", "Invalid config: parallel.TP=2: no such key. Fix: did you mean "),
    ("parallel={tp:abc}", "Invalid config: parallel.tp='abc': is not a whole number. Fix: "),
    ("steps={warmupp:2}", "Invalid config: steps.warmupp=2: no such key. Fix: did you mean steps.warmup? "),
    ("predict={nope:2}", "Invalid config: predict.nope=2: no such key. Fix: "),
    ("parallel={tp:0}", "Invalid config: parallel.tp=0: must be a positive integer. Fix: set parallel.tp=1."),
    ("steps={warmup:-1}", "Invalid config: steps.warmup=-1: must be >= 0. Fix: set steps.warmup=0."),
]


@pytest.mark.parametrize(("mapping", "said"), MAPPINGS, ids=[m for m, _ in MAPPINGS])
def test_a_sections_mapping_is_checked_as_its_keys_before_hydra(mapping: str, said: str) -> None:
    """``plan=true model=gpt-tiny 'parallel={TP:2}'`` (``{tp:abc}``, ``steps={warmupp:2}``,
    ``predict={nope:2}``) drew Hydra's 7-8 lines; ``{tp:0}`` and ``steps={warmup:-1}`` the job's line
    after Hydra made outputs/. Now each key of the mapping is checked as ``parallel.tp=0`` is."""
    from flopsweep.mapping_overrides import read_as_keys
    from flopsweep.overrides import type_problem
    from flopsweep.value_sets import value_set_problem

    argv = ["plan=true", "model=gpt-tiny", mapping]
    keyed = read_as_keys(argv)
    assert keyed[:2] == argv[:2] and len(keyed) == 3 and keyed[2].startswith(mapping.partition("=")[0] + ".")
    line = refusal(argv)
    assert line is not None and line.startswith(said), line
    assert line == (type_problem(keyed) or value_set_problem(keyed)) or "did you mean" in line
    assert type_problem(argv) is None and value_set_problem(argv) is None


def test_a_mapping_of_valid_keys_and_a_groups_mapping_are_left_as_they_are() -> None:
    from flopsweep.mapping_overrides import read_as_keys

    assert refusal(["plan=true", "model=gpt-tiny", "steps={warmup:2,measure:3}"]) is None
    assert read_as_keys(["steps={warmup:2,measure:3}", "parallel={tp:1},{tp:2}", "+parallel={tp:1}"]) == [
        "steps.warmup=2",
        "steps.measure=3",
        "parallel={tp:1},{tp:2}",
        "+parallel={tp:1}",
    ]
    assert read_as_keys(["model={n_layer:2}", "steps={}"]) == ["model={n_layer:2}", "steps={}"]
