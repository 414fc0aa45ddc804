"""A refusal names a key with its right article (docs/reliability-13.md row 1003)."""

from __future__ import annotations

from flopsweep.text import article


def test_the_article_follows_the_word():
    assert [
        article(w) for w in ("attention", "optim", "model", "FIFO", "user", "activation_checkpointing")
    ] == [
        "an attention",
        "an optim",
        "a model",
        "a FIFO",
        "a user",
        "an activation_checkpointing",
    ]


def test_removing_attention_says_an_attention_option_and_its_fix_is_accepted():
    from run import refusal

    line = refusal(["plan=true", "model=gpt-125m", "~attention"])
    assert line is not None and "every job needs an attention option" in line
    assert refusal(["plan=true", "model=gpt-125m", "attention=sdpa"]) is None
