"""Session 39 (docs/reliability-9.md #483): a ``model=hf`` file without ``head_dim`` is built as
``transformers``' config class builds it (Qwen3's 128 whatever the width, Mistral's hidden/heads); where
that differs from ``hidden_size / num_attention_heads`` the run says so in one line (its log and its
record's ``warnings``), and the memory estimate counts the heads the model has (it had counted
hidden/heads: 32-wide heads for a model of 128-wide ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from flopsweep.models import hf  # noqa: E402
from flopsweep.models.hf import HFConfig  # noqa: E402
from flopsweep.models.hf_shape import head_dim_note  # noqa: E402

SHIPPED = Path(hf.SHIPPED)


def _file(tmp_path: Path, shipped: str, name: str, **changes: object) -> str:
    """A copy of a shipped config.json with ``changes`` (None: the key removed)."""
    data = json.loads((SHIPPED / f"{shipped}.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    data["_name_or_path"] = name
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


def _checked(path: str) -> HFConfig:
    cfg = HFConfig(config=path)
    hf.check(cfg)
    return cfg


def test_a_qwen3_file_without_head_dim_is_said_and_built_with_its_class_default(tmp_path: Path) -> None:
    cfg = _checked(_file(tmp_path, "qwen3-tiny", "nohd", head_dim=None))
    line = hf.head_dim_note(cfg)
    assert line == (
        "hf_head_dim: the file gives no head_dim, and transformers' Qwen3Config builds head_dim=128 (its "
        "default), not hidden_size/num_attention_heads=128/4: 4 heads x 128 = 512-wide attention beside a "
        "128-wide residual, as transformers builds this file; for heads of hidden/heads, write "
        '"head_dim": 32 in a copy of the file'
    )
    assert hf.built_head_dim(cfg) == 128
    fixed = _checked(_file(tmp_path, "qwen3-tiny", "hd32", head_dim=32))  # the line's fix: no line
    assert hf.head_dim_note(fixed) is None and hf.built_head_dim(fixed) == 32


def test_the_memory_estimate_counts_the_heads_the_model_has(tmp_path: Path) -> None:
    bare = hf.memory(_checked(_file(tmp_path, "qwen3-tiny", "nohd", head_dim=None)))
    stated = hf.memory(_checked(_file(tmp_path, "qwen3-tiny", "hd128", head_dim=128)))
    narrow = hf.memory(_checked(_file(tmp_path, "qwen3-tiny", "hd32", head_dim=32)))
    assert bare == stated
    assert bare["other"] - narrow["other"] == (4 + 2 * 2) * (128 - 32)  # q (4 heads), k and v (2 KV heads)


@pytest.mark.parametrize(
    ("shipped", "removed"),
    [
        ("mistral-tiny", "head_dim"),  # MistralConfig derives hidden/heads
        ("olmoe-tiny", "head_dim"),  # no head_dim in the class: hidden/heads
        ("moonlight-tiny", "head_dim"),  # MLA: qk_rope_head_dim and v_head_dim are the file's
        ("qwen3-tiny", "_no_such_key"),  # stated
    ],
)
def test_no_line_where_the_class_builds_hidden_over_heads_or_the_file_states_it(
    tmp_path: Path, shipped: str, removed: str
) -> None:
    from flopsweep.models.hf_files import hf_config, source

    cfg = _checked(_file(tmp_path, shipped, f"{shipped}-x", **{removed: None}))
    src = source(cfg)
    assert head_dim_note(src.data, hf_config(src)) is None
    assert hf.head_dim_note(cfg) is None
