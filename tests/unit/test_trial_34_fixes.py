"""A new user's trial (session 34): a group option's "did you mean" that the rest of the command line
refused, ``model.config``'s missing "did you mean", a 2 MiB ``config.json`` refused as a record, and
a ``config.json`` whose object repeats a key, read silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep.config import ConfigError
from flopsweep.models import hf_files
from flopsweep.overrides import group_choice_problem


def test_a_group_options_example_on_the_cpu_is_a_cpu_option_naming_the_near_one() -> None:
    """``attention=flash device=cpu`` said ``e.g. attention=sdpa-flash``, refused on the CPU."""
    line = group_choice_problem(["attention=flash", "device=cpu"])
    assert line is not None and "e.g. attention=sdpa (sdpa-flash, the nearest name, needs CUDA)" in line, line
    assert "e.g. attention=sdpa-flash (several" in (group_choice_problem(["attention=flash"]) or "")
    cpu = group_choice_problem(["precision=fp16x", "device=cpu"])
    assert cpu is not None and "e.g. precision=bf16 (fp16, the nearest name, needs CUDA)" in cpu, cpu
    assert "e.g. attention=sdpa (several" in (group_choice_problem(["attention=sdp", "device=cpu"]) or "")
    assert group_choice_problem(["attention=sdpa", "device=cpu"]) is None  # the example itself passes


def test_a_near_shipped_name_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigError) as caught:
        hf_files.load("qwen3-moe-tiy")
    line = str(caught.value)
    assert "Fix: did you mean model.config=qwen3-moe-tiny? Else give a config.json path" in line, line
    assert hf_files.load("qwen3-moe-tiny").data["model_type"]  # the name it suggests reads
    with pytest.raises(ConfigError, match=r"Fix: give a config.json path or its folder, or a shipped name: "):
        hf_files.load("zzzzzz")


def test_a_config_json_over_the_limit_names_a_config_files_bound(tmp_path: Path) -> None:
    """Was: ``over the 1048576 byte limit of a record. Fix: give a readable config.json.``"""
    big = tmp_path / "config.json"
    big.write_text(json.dumps({"model_type": "llama", "pad": "x" * (2 << 20)}))
    with pytest.raises(ConfigError) as caught:
        hf_files.load(str(big))
    size = big.stat().st_size
    assert str(caught.value) == (
        f"Invalid config: model.config='{big}': is {size:,} bytes, over flopsweep's limit for a config.json "
        "(1,048,576 bytes, 1 MiB; a Hugging Face config.json is a few KiB). Fix: point model.config at the "
        "model's own config.json (or its folder), not its weights, tokenizer or index file, or give a "
        "shipped name, e.g. qwen3-tiny."
    )
    assert hf_files.load("qwen3-tiny").raw  # the fix's example reads


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_config_json_that_repeats_a_key_is_refused_naming_it(tmp_path: Path, where: str) -> None:
    """``json.loads`` kept the last ``hidden_size`` silently."""
    text = (hf_files.SHIPPED / "qwen3-tiny.json").read_text().rstrip().rstrip("}")
    extra = (
        ', "hidden_size": 7}' if where == "top" else ', "rope_scaling": {"type": "linear", "type": "yarn"}}'
    )
    path = tmp_path / "config.json"
    path.write_text(text + extra)
    key = "hidden_size" if where == "top" else "type"
    with pytest.raises(ConfigError) as caught:
        hf_files.load(str(path))
    assert str(caught.value) == (
        f"Invalid config: model.config='{path}': gives the key '{key}' twice in one object (JSON would keep "
        f"the last silently). Fix: give a model's config.json with '{key}' once."
    )
    path.write_text(text + "}")
    assert hf_files.load(str(path)).data == json.loads(text + "}")  # once each: read as before
