"""A name with a letter read as a digit (``plan_gpu=H2OO``, ``model=llama3.2-lb``) or a digit of another
script (``H٢٠٠``) gets its "did you mean", through the one helper every name's suggestion goes through
(:func:`flopsweep.lookalike.near_names`), and the fix it names is accepted. Reliability row #841
(docs/reliability-12.md)."""

from __future__ import annotations

import pytest

from flopsweep.choices import near_name
from flopsweep.clusters import parse_cluster
from flopsweep.gpu_memory import nearest_gpu_name, typed_gpu_names
from flopsweep.lookalike import fold_name, misread, near_names
from flopsweep.override_schema import near_names as prefixed_near_names
from run import refusal

LETTER_O = "'O' is a letter, not the digit '0'"


def test_a_name_folds_case_letters_read_as_digits_and_other_scripts_digits() -> None:
    assert fold_name("H2OO") == fold_name("h2oo") == fold_name("H٢٠٠") == fold_name("H200") == "h200"
    assert fold_name("llama3.2-lb") == fold_name("Ilama3.2-1b") == fold_name("llama3.2-1b") == "11ama3.2-1b"
    assert len(fold_name("A1OO-4OGB")) == len("A1OO-4OGB")  # one character for one: positions match


@pytest.mark.parametrize(
    ("typed", "meant", "note"),
    [
        ("H2OO", "H200", LETTER_O),
        ("h2oo", "H200", "'o' is a letter, not the digit '0'"),
        ("H1OO", "H100", LETTER_O),
        ("A1OO", "A100-40GB", LETTER_O),  # the stem of a name sold in two sizes: the first of them
        ("H٢٠٠", "H200", "'٢' (U+0662 ARABIC-INDIC DIGIT TWO) is not ASCII '2'"),
        ("H1OO-8OGB", "H100-80GB", LETTER_O),
    ],
)
def test_each_gpu_look_alike_names_the_gpu_meant(typed: str, meant: str, note: str) -> None:
    assert misread(typed, typed_gpu_names()) == (meant, note)
    assert near_name(typed, list(typed_gpu_names())) == meant == nearest_gpu_name(typed)


def test_a_case_slip_or_a_far_name_is_no_misreading() -> None:
    assert misread("h200", typed_gpu_names()) is None  # case alone: said as "options are case-sensitive"
    assert misread("B999", typed_gpu_names()) is None and near_names("zzqx", typed_gpu_names()) == []
    assert misread("Ilama3.2-1b", ["llama3.2-1b"]) == (
        "llama3.2-1b",
        "'I' (U+0049 LATIN CAPITAL LETTER I) is not 'l' (U+006C LATIN SMALL LETTER L)",
    )
    assert prefixed_near_names("llama3.2-lb", ["llama3.2-3b", "llama3.2-1b"], "model=", n=1) == [
        "model=llama3.2-1b"
    ]


@pytest.mark.parametrize(
    ("overrides", "fix"),
    [
        (["plan=true", "plan_gpu=H2OO"], f"Fix: did you mean plan_gpu=H200? ({LETTER_O})."),
        (
            ["plan=true", "plan_gpu=h2oo"],
            "Fix: did you mean plan_gpu=H200? ('o' is a letter, not the digit '0').",
        ),
        (["plan=true", "plan_gpu=A1OO"], f"Fix: did you mean plan_gpu=A100-40GB? ({LETTER_O})."),
        (["plan=true", "plan_gpu=H1OO"], f"Fix: did you mean plan_gpu=H100? ({LETTER_O})."),
        (
            ["plan=true", "plan_gpu=H٢٠٠"],
            "Fix: did you mean plan_gpu=H200? ('٢' (U+0662 ARABIC-INDIC DIGIT TWO)",
        ),
        (["model=llama3.2-lb"], "'l' is a letter, not the digit '1'. Fix: did you mean model=llama3.2-1b?"),
        (["model=Ilama3.2-1b"], "LATIN SMALL LETTER L). Fix: did you mean model=llama3.2-1b?"),
        (["precision=bfl6"], "'l' is a letter, not the digit '1'. Fix: did you mean precision=bf16?"),
        (["precision.name=bfl6"], "Fix: did you mean precision=bf16? ('l' is a letter, not the digit '1')."),
        (
            ["parallel.pp_schedule=lF1B"],
            "Fix: did you mean parallel.pp_schedule=1F1B? ('l' is a letter, not the digit",
        ),
    ],
)
def test_every_key_of_names_with_digits_says_did_you_mean_and_that_fix_is_accepted(
    overrides: list[str], fix: str
) -> None:
    line = refusal(overrides)
    assert line is not None and fix in line and "\n" not in line, line
    meant = line.partition("did you mean ")[2].partition("?")[0]
    assert refusal([*overrides[:-1], meant]) is None, meant


def test_a_cluster_name_with_a_misread_gpu_names_the_cluster_meant_and_it_parses() -> None:
    line = refusal(["plan=true", "plan_clusters=[H2OO:1x8,H100:8x8]"])
    assert line == (
        "Invalid config: plan_clusters='H2OO:1x8': 'H2OO' is no device of the peak table. "
        f"Fix: did you mean H200:1x8? ({LETTER_O})."
    )
    assert parse_cluster("H200:1x8").world_size == 8
    assert refusal(["plan=true", "plan_clusters=[H200:1x8,H100:8x8]"]) is None


def test_a_shipped_hf_configs_misread_name_names_one_that_is_shipped() -> None:
    """``model.config`` (``model=hf``): the refusal's own check, without building the model (transformers)."""
    from flopsweep.config import ConfigError
    from flopsweep.models.hf_files import config_path, is_shipped, load

    with pytest.raises(ConfigError) as refused:
        load("qwen3-l.7b")
    assert refused.value.fix.startswith("did you mean model.config=qwen3-1.7b? Else give")
    assert is_shipped("qwen3-1.7b") and config_path("qwen3-1.7b").is_file()


def test_a_bare_cluster_name_with_a_misread_gpu_gets_a_list_that_is_accepted() -> None:
    """Row #846: ``plan_clusters=H2OO:1x8`` (no brackets) was told ``write a list: plan_clusters=[H2OO:1x8]``,
    itself refused; the list written now names the GPU meant."""
    line = refusal(["plan=true", "plan_clusters=H2OO:1x8"])
    assert line == (
        "Invalid config: plan_clusters='H2OO:1x8': is one name, not a list. Fix: write a list: "
        f"plan_clusters=[H200:1x8] ({LETTER_O})."
    )
    assert refusal(["plan=true", "plan_clusters=[H200:1x8]"]) is None
    assert refusal(["plan=true", "plan_clusters=H100:8"]).endswith(
        "Fix: write a list: plan_clusters=[H100:8]."
    )
