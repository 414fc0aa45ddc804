"""A fix that names a value runs as written (trial 24, a fresh user's second round): each refusal's
``Fix:`` is taken and checked to pass, composed with Hydra and planned as the job plans it (the helpers
of :mod:`unit.test_key_needs`), for the class of each:

- a key of another option names a real option of the group (``model=llama-tiny``, not the family's
  registry name ``model=llama``): :func:`flopsweep.override_schema.picks`;
- a non-ASCII look-alike in an option name or a key gets the ASCII one's "did you mean", every group:
  :mod:`flopsweep.lookalike`;
- a plan whose space yields nothing names the ``space.*`` key and a value that ranks a set-up: a rule's
  fix in the space's lists (:func:`flopsweep.dropped.space_fix`), the reason whose fix leads out of the
  space (``space.layouts=[ep2]`` on a dense model: an MoE model, not ``backend=fsdp``), and
  ``space.min_headroom`` (:func:`flopsweep.dropped.headroom_fix`)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from flopsweep.dropped import OVER_MEMORY, headroom_fix, nothing_line
from flopsweep.lookalike import CONFUSABLES, ascii_lookalike
from flopsweep.options import OPTION_SCHEMAS, owners
from flopsweep.override_schema import option_files, option_kind
from flopsweep.overrides import shown_options
from flopsweep.text import percent
from run import refusal
from unit.test_key_needs import CPU, _planned, _runs

# --- 1. a fix names options that compose ---------------------------------------------------------


def _foreign_keys() -> list[tuple[str, str, str, str]]:
    """One ``(group, owning kind, key, value)`` per option kind that has keys of its own, with the key's
    default as a user would type it (scalars only)."""
    out = []
    for group, kinds in OPTION_SCHEMAS.items():
        for kind, schema in kinds.items():
            for f in dataclasses.fields(schema):
                if owners(group, f.name) != [kind] or f.default is dataclasses.MISSING:
                    continue
                if isinstance(f.default, bool):
                    out.append((group, kind, f.name, str(f.default).lower()))
                    break
                if isinstance(f.default, int | float | str) and str(f.default):
                    out.append((group, kind, f.name, str(f.default)))
                    break
    return out


FOREIGN = _foreign_keys()


def _picked(line: str, group: str) -> list[str]:
    """The options of ``group`` a fix line names (``pick model=llama-tiny (or llama3.2-1b, ...)``)."""
    m = re.search(
        rf"pick (?:a model option: |the option itself: )?{re.escape(group)}="
        r"([\w./-]*[\w-])(?: \(or ([^)]*)\))?",
        line,
    )
    assert m, line
    return [m.group(1), *[n.strip() for n in (m.group(2) or "").replace("...", "").split(",") if n.strip()]]


def test_every_kind_with_keys_of_its_own_is_covered() -> None:
    kinds = {(g, k) for g, k, _, _ in FOREIGN}
    assert {("model", "llama"), ("model", "hf"), ("backend", "deepspeed")} <= kinds  # gpt2: the base keys
    assert ("attention", "blocksparse") in kinds and ("activation_checkpointing", "every_n") in kinds


@pytest.mark.parametrize(
    ("group", "kind", "key", "value"), FOREIGN, ids=[f"{g}.{k}" for g, _, k, _ in FOREIGN]
)
def test_a_key_of_another_option_names_real_options_and_the_first_runs(
    hydra_compose, tmp_path: Path, group: str, kind: str, key: str, value: str
) -> None:
    """Trial 24: ``model=gpt-tiny model.n_kv_head=2`` said "pick model=llama", which is no option. Every
    key owned by one option kind, on an option of another kind: before Hydra (the command line's
    check) and after (``+``, the schema's check), every option the fix names is a file of conf/ of that
    kind, and the first, with the key, passes the checks and plans ``ok`` on the CPU (a GPU-only option
    is checked to pass the checks before Hydra)."""
    other = next(o for o in option_files(group) if option_kind(group, o) != kind and "/" not in o)
    line = refusal([*CPU, f"{group}={other}", f"{group}.{key}={value}"])
    assert line is not None and f"{group}.{key}: belongs to " in line and "\n" not in line, line
    named = _picked(line, group)
    assert all(n in option_files(group) and option_kind(group, n) == kind for n in named), (line, named)
    assert f"{group}={kind} " not in line.replace(f"{group}={named[0]}", "") or kind in option_files(group)
    plus = _planned(hydra_compose, [f"{group}={other}", f"+{group}.{key}={value}"], tmp_path)
    assert plus["status"] == "invalid" and _picked(plus["reason"], group)[0] == named[0], plus["reason"]
    fixed = [f"{group}={named[0]}", f"{group}.{key}={value}"]
    assert refusal([*CPU, *fixed]) is None, refusal([*CPU, *fixed])
    if (group, named[0]) not in {("precision", "fp8"), ("precision", "fp8-rowwise")}:  # fp8 needs a GPU
        _runs(hydra_compose, [*NEEDS.get(named[0], []), *fixed], tmp_path)


NEEDS = {"memory_budget": ["compile=true"]}
"""What an option needs of its own to plan (its own refusal names it: the memory budget is the compiler's)."""


def test_the_first_option_named_is_the_nearest_in_size(hydra_compose, tmp_path: Path) -> None:
    """The trial's line, and a large model's: the option of that family nearest in size comes first."""
    line = refusal([*CPU, "model=gpt-tiny", "model.n_kv_head=2"])
    assert line.endswith("Fix: drop the override, or pick model=llama-tiny (or llama3.2-1b, llama3.2-3b, "
                         "llama3.1-8b, ...)."), line  # fmt: skip
    assert "model=llama," not in line and "model=llama " not in line
    big = refusal([*CPU, "model=gpt-6.7b", "model.ffn_dim=2048"])
    assert _picked(big, "model")[0] == "llama3.1-8b", big


def test_a_did_you_mean_of_another_options_key_names_a_real_option(hydra_compose, tmp_path: Path) -> None:
    line = refusal([*CPU, "model.n_kv_hed=2"])
    assert "did you mean model.n_kv_head? It is a key of the llama options of model" in line, line
    pick = _picked(line, "model")[0]
    _runs(hydra_compose, [f"model={pick}", "model.n_kv_head=2"], tmp_path)


def test_a_model_arch_set_by_hand_names_a_model_option(hydra_compose, tmp_path: Path) -> None:
    """``model.arch=lama`` suggested ``model.arch=gpt2``, refused on a llama option as set by hand."""
    for arch in ("lama", "llama"):
        row = _planned(hydra_compose, ["model=gpt-tiny", f"model.arch={arch}"], tmp_path)
        assert row["status"] == "invalid" and "model.arch=" not in row["reason"].split("Fix:")[1], row[
            "reason"
        ]
        pick = _picked(row["reason"], "model")[0]
        assert pick in option_files("model"), row["reason"]
        _runs(hydra_compose, [f"model={pick}"], tmp_path)


# --- 4. look-alikes -----------------------------------------------------------------------------------

GROUPS = [
    "model",
    "attention",
    "backend",
    "precision",
    "batch",
    "activation_checkpointing",
    "hydra/launcher",
    "hydra/sweeper",
]
BACK = {v: k for k, v in CONFUSABLES.items() if k.islower() or not v.isalpha()}


def _disguised(name: str) -> str | None:
    """``name`` with its last letter that has a look-alike replaced by it (``llama-tiny`` ->
    ``llama-tinу``)."""
    for i in range(len(name) - 1, -1, -1):
        if name[i] in BACK:
            return name[:i] + BACK[name[i]] + name[i + 1 :]
    return None


def _meant(line: str) -> str:
    """The override a look-alike's "did you mean" names: alone, or last of the whole line where it needs
    more (``flopsweep -m device=cpu hydra/launcher=pool? (... it needs -m)``)."""
    m = re.search(r"Fix: did you mean (?:flopsweep (?:\S+ )*)?(\S+)\?(?: \(.*\))?$", line)
    assert m, line
    return m.group(1)


@pytest.mark.parametrize("group", GROUPS)
def test_a_look_alike_in_any_groups_option_gets_the_ascii_options_did_you_mean(group: str) -> None:
    """Trial 24: ``model=llama-tinу`` (a Cyrillic ``у``) was told to quote it, then, quoted, got the
    option list with no "did you mean". Every option of every group, disguised, bare and quoted: one
    line naming the character, and a "did you mean" of the option that passes the checks."""
    for name in shown_options(group):
        fake = _disguised(name)
        if fake is None:
            continue
        for typed in (f"{group}={fake}", f"{group}='{fake}'"):
            line = refusal([*CPU, typed])
            assert line is not None and "looks like ASCII" in line and "U+" in line, (typed, line)
            assert _meant(line) == f"{group}={name}", (typed, line)
            if not group.startswith("hydra/"):
                assert refusal([*CPU, _meant(line)]) is None


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("model=llama-tinу", ["model=llama-tiny"]),
        ("backend=ｆｓｄｐ", ["backend=fsdp"]),
        ("precision='fp３２'", ["precision=fp32"]),
        ("activation_checkpointing=fu‐ll", None),  # a hyphen inside a name no option has: not meant
        ("steps.mеasure=3", ["steps.measure=3"]),
        ("batch.micrо_batch_size=2", ["batch.micro_batch_size=2"]),
    ],
)
def test_the_trials_look_alikes_run_as_suggested(hydra_compose, tmp_path: Path, typed: str, meant) -> None:
    line = refusal([*CPU, typed])
    assert line is not None and "\n" not in line, line
    if meant is None:
        assert "did you mean" not in line, line
        return
    assert _meant(line) == meant[0], line
    _runs(hydra_compose, meant, tmp_path)


def test_a_free_string_keeps_its_characters() -> None:
    """``tag=ünï`` is a label: the fix quotes it, no look-alike is meant."""
    line = refusal(["tag=ünï"])
    assert "quote the value" in line and "did you mean" not in line, line
    assert ascii_lookalike("日本", ["ri"]) is None and ascii_lookalike("gpt-tiny", ["gpt-tiny"]) is None


# --- 2 and 3. a plan whose space yields nothing --------------------------------------------------------


def _decide(hydra_compose, tmp_path: Path, args: list[str]) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", *args]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


_FIXES = re.compile(r"(space\.\w+=\[[^\]]*\]|plan_clusters=\[[^\]]*\]|model=hf model\.config=[\w.-]+)")


def _alternatives(line: str) -> list[list[str]]:
    """The overrides of each alternative of a nothing line's fix (``, or ``), the first example of each."""
    out = []
    for alt in line.split("Fix: ", 1)[1].split(", or "):
        m = _FIXES.search(alt)
        if m:
            out.append(m.group(1).split())
    return out


def _replaced(args: list[str], fix: list[str]) -> list[str]:
    keys = {f.partition("=")[0] for f in fix}
    return [a for a in args if a.partition("=")[0] not in keys] + fix


SMALL = ["space.checkpointing=[none]", "space.micro_batches=[2]"]


@pytest.mark.parametrize(
    ("args", "said", "n"),
    [
        (  # the trial: EP on a dense model said "backend=fsdp"
            ["model=llama3.1-8b", "plan_clusters=[H100:8]", "space.layouts=[ep2]", *SMALL],
            "needs a mixture-of-experts model",
            2,
        ),
        (["plan_clusters=[H100:8]", "space.layouts=[tp8]", *SMALL], "does not divide model.n_head=4", 1),
        (["plan_clusters=[H100:8]", "space.layouts=[pp4]", *SMALL], "does not divide model.n_layer=2", 1),
        (["plan_clusters=[H100:8]", "space.layouts=[tp2]", "space.backends=[ddp]", *SMALL], "runs on", 2),
        (["plan_clusters=[H100:8]", "space.backends=[single]", *SMALL], "runs at most 1 rank", 2),
        (["plan_clusters=[A100-80GB:8]", "space.precisions=[fp8]", *SMALL], "fp8 needs a CUDA GPU", 1),
    ],
    ids=["ep-dense", "tp-heads", "pp-layers", "tp-ddp", "single-8", "fp8-a100"],
)
def test_a_space_refused_by_the_rules_names_its_lists_and_each_fix_ranks(
    hydra_compose, tmp_path: Path, args: list[str], said: str, n: int
) -> None:
    """Every set-up refused by the rules: the line gives the reason to fix first (not one whose fix
    names set-ups the space lists, refused too), its fix in ``space.*`` terms (no ``set parallel.ep=1``,
    which the space sets), and each alternative, applied, ranks a set-up."""
    out = _decide(hydra_compose, tmp_path, args)
    if out.get("status") == "invalid":  # every layout refused for the model: one line, before planning (#620)
        line = out["error"]["message"]
        assert line.startswith("Invalid config: space.layouts=") and "\n" not in line, line
    else:
        line = out["nothing"]
    assert said in line and "(with space.*" not in line and "backend=fsdp" not in line.split("Fix: ")[1], line
    assert not re.search(r"Fix: .*set parallel\.", line), line
    alts = _alternatives(line)
    assert len(alts) == n, (line, alts)
    for fix in alts:
        again = _decide(hydra_compose, tmp_path, _replaced(args, fix))
        assert "nothing" not in again and again["best"][0]["status"] == "ok", (fix, again)


def test_a_headroom_that_prunes_everything_is_named_with_a_value_that_keeps_some(
    hydra_compose, tmp_path: Path
):
    """Trial 24: ``space.min_headroom=0.999`` said "over 0% of 79.6 GiB" and "Fix: none found", without
    the key. The line names it and a value; that value ranks a set-up."""
    args = ["model=llama3.2-1b", "plan_clusters=[H100:8]", "space.min_headroom=0.999", *SMALL]
    line = _decide(hydra_compose, tmp_path, args)["nothing"]
    assert "over 0.1% of 79.6 GiB (H100; space.min_headroom=0.999)" in line and "none found" not in line, line
    m = re.search(
        r"Fix: lower space\.min_headroom: .* (space\.min_headroom=[\d.]+) keeps (\d+) of them", line
    )
    assert m and int(m.group(2)) >= 1, line
    again = _decide(hydra_compose, tmp_path, _replaced(args, [m.group(1)]))
    assert "nothing" not in again and again["best"][0]["status"] == "ok"
    assert sum(r["status"] == "ok" for r in again["best"]) >= 1


def _over(peak: float, headroom: float, capacity: float = 80.0) -> str:
    share = f"{percent(1 - headroom)} of {capacity:.3g} GiB"
    figures = f"estimated {peak:.3g} GiB per rank, over {share}"
    return f"{OVER_MEMORY}: {figures} (H100; space.min_headroom={headroom:g})"


def test_the_headroom_value_keeps_one_and_is_named_where_it_is_the_cause() -> None:
    """The tuner's reasons carry the same figures: a headroom above the default is named first (the
    default where it keeps one, else the largest of 2 decimals); at the default it replaces only a fix
    that found none; nothing fits at any headroom: not named."""
    assert headroom_fix([_over(40, 0.6), _over(70, 0.6)])[0].endswith(
        "space.min_headroom=0.1 keeps 2 of them"
    )
    text, _ = headroom_fix([_over(76, 0.1), _over(79, 0.1)])
    assert "space.min_headroom=0.04 keeps 1 of them" in text and 76 * 1.005 <= (1 - 0.04) * 80
    assert headroom_fix([_over(81, 0.0)]) is None
    tune = nothing_line([_over(40, 0.6)], who="tune", headline="h", fix="F")
    assert "Fix: lower space.min_headroom: 0.6 leaves the estimate 40% of the memory" in tune, tune
    assert tune.endswith(
        "; space.min_headroom=0.1 keeps 1 of them, or " + nothing_line.__globals__["CAUSE_FIXES"][OVER_MEMORY]
    )
    default = nothing_line([_over(79, 0.1)], who="plan", headline="h", fix="F")
    assert (
        "min_headroom=0.0" not in default and "lower space.min_headroom" not in default.split("Fix: ")[1][:30]
    )
    none = nothing_line(
        [_over(76, 0.1)], who="plan", headline="h", fix="F", fixes={OVER_MEMORY: "none found: x"}
    )
    assert none.endswith(
        "space.min_headroom=0.04 keeps 1 of them (less left free than the default 0.1: the estimate may miss)"
    )


@pytest.mark.parametrize(
    ("share", "said"), [(0.999, "99.9%"), (0.001, "0.1%"), (0.9, "90%"), (0.0304, "3.04%"), (0, "0%")]
)
def test_a_share_shows_its_digits(share: float, said: str) -> None:
    assert percent(share) == said


def test_a_global_batch_the_micro_batches_cannot_split_is_given_one_every_layout_takes(
    hydra_compose, tmp_path: Path
) -> None:
    """``batch.global_batch_size=4 space.micro_batches=[8]`` on 8 GPUs said "a multiple of 8"; 8 was then
    refused on the data-parallel set-ups as no multiple of 8 x 8 = 64. The example is micro batch x
    ranks, which every data-parallel degree divides; it ranks a set-up."""
    args = ["plan_clusters=[H100:8]", "batch.global_batch_size=4", "space.micro_batches=[8]", SMALL[0]]
    line = _decide(hydra_compose, tmp_path, args)["nothing"]
    m = re.search(
        r"Fix: set batch\.global_batch_size to a multiple of 8 x the data-parallel ranks, "
        r"e\.g\. batch\.global_batch_size=(\d+)$",
        line,
    )
    assert m, line
    again = _decide(hydra_compose, tmp_path, _replaced(args, [f"batch.global_batch_size={m.group(1)}"]))
    assert "nothing" not in again and again["best"][0]["status"] == "ok"


# --- 4. a bound's fix and a choice's typo name a value that runs (trial 25) -------------------------


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        ("steps.measure=0", "set steps.measure=1."),
        ("steps.warmup=-1", "set steps.warmup=0."),
        ("batch.micro_batch_size=0", "set batch.micro_batch_size=1."),
        ("batch.grad_accum=0", "set batch.grad_accum=1."),
        ("model.seq_len=0", "set e.g. model.seq_len=2048 (tokens)."),
        (
            "loss.chunk_tokens=-1",
            "set a chunk of tokens, e.g. loss.chunk_tokens=4096, or loss.chunk_tokens=0 (the whole logits).",
        ),
        (
            "cost.usd_per_gpu_hour=-1",
            "set e.g. cost.usd_per_gpu_hour=2.5 (your price per GPU-hour), or cost.usd_per_gpu_hour=null.",
        ),
        ("budget.tokens=-1", "set e.g. budget.tokens=15e12, or budget.tokens=null."),
    ],
)
def test_a_bounds_fix_names_the_key_and_each_value_it_names_passes(typed: str, fix: str) -> None:
    """The fixes "set steps.measure>=1" and "set e.g. 2.5, or null" could not be pasted."""
    line = refusal([typed, "device=cpu"])
    assert line is not None and line.endswith(f"Fix: {fix}"), line
    named = re.findall(r"\b([a-z_]+\.[a-z_]+=[\w.+-]+)", fix)
    assert named and all(n.startswith(typed.partition("=")[0] + "=") for n in named)
    for value in named:
        assert refusal([value.rstrip("."), "device=cpu"]) is None, value


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        (
            "objective=usd_per_mtok",
            "did you mean objective=usd_per_million_tokens cost.usd_per_gpu_hour=2.5 or",
        ),
        ("objective=budget_day", "did you mean objective=budget_days budget.tokens=15e12 or"),
        ("objective=mfuu", "did you mean objective=mfu or objective=mfu_fp8?"),
    ],
)
def test_an_objective_typo_gets_the_nearest_figures_not_all_35(typed: str, meant: str) -> None:
    line = refusal([typed, "device=cpu"])
    assert line is not None and "\n" not in line and f"Fix: {meant}" in line, line
    assert "iteration_time_s_cv" not in line  # the whole list was the fix
    first = meant.removeprefix("did you mean ").split(" or ")[0].rstrip("?").split()
    assert refusal([*first, "device=cpu"]) is None


def test_a_choice_typo_gets_did_you_mean_and_one_with_none_near_lists_the_choices() -> None:
    from flopsweep.choices import require_choice
    from flopsweep.config import ConfigError

    with pytest.raises(ConfigError) as info:
        require_choice("fault.kind", "oomm", ("none", "oom", "raise"))
    assert str(info.value).endswith("Fix: did you mean fault.kind=oom?")
    with pytest.raises(ConfigError) as info:
        require_choice("fault.kind", "zzz", ("none", "oom", "raise"))
    assert str(info.value).endswith("Fix: pick one of those, e.g. fault.kind=none.")
    assert refusal(["fault.kind=oom", "device=cpu"]) is None
