"""A plan of a Hugging Face config far below its context length says so in one note line whose fix is
accepted (docs/reliability-14.md #1065)."""

from __future__ import annotations

import re

from flopsweep.models.hf import HFConfig, _positions, short_sequence_note, source


def test_a_plan_at_the_default_sequence_far_below_the_files_says_so_and_its_fix_is_accepted() -> None:
    cfg = HFConfig(config="olmoe-1b-7b")
    note = short_sequence_note(cfg, ["model=hf", "model.config=olmoe-1b-7b", "plan=true"])
    assert note == (
        "flopsweep: note: model.seq_len=128 (the default) is 32x below max_position_embeddings=4096 of "
        "olmoe-1b-7b: this plans 128-token sequences; for its context length, set model.seq_len=4096"
    )
    fix = re.search(r"set (model\.seq_len=\d+)$", note).group(1)
    fixed = HFConfig(config="olmoe-1b-7b", seq_len=int(fix.partition("=")[2]))
    _positions(fixed, source(fixed), None)  # within the file's positions: no raise
    assert short_sequence_note(fixed, ["model=hf", "model.config=olmoe-1b-7b", fix]) is None


def test_a_sequence_given_or_near_the_files_is_not_noted() -> None:
    cfg = HFConfig(config="olmoe-1b-7b", seq_len=128)
    assert short_sequence_note(cfg, ["model.seq_len=128"]) is None  # chosen: not the default
    assert short_sequence_note(HFConfig(config="olmoe-1b-7b", seq_len=1024), []) is None  # 4x: near enough
