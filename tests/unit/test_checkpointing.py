"""The activation checkpointing policies (flopsweep.checkpointing): the config group, the old
boolean values, and what each policy recomputes and keeps. The FLOPs each policy's wrap really
runs are counted in tests/unit/test_flops_counted.py and tests/unit/test_llama.py."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep import checkpointing
from flopsweep.config import AttentionConfig, CheckpointingConfig, ConfigError, RunConfig
from flopsweep.memory import activation_bytes
from flopsweep.options import EveryNConfig, MemoryBudgetConfig
from flopsweep.plan import option_names, validate


@pytest.mark.parametrize(
    "override, expected",
    [
        ("activation_checkpointing=true", "activation_checkpointing=full"),
        ("activation_checkpointing=False", "activation_checkpointing=none"),
        ("activation_checkpointing=true,false", "activation_checkpointing=full,none"),
        ("activation_checkpointing=choice(true, full)", "activation_checkpointing=choice(full, full)"),
        ("activation_checkpointing=full", "activation_checkpointing=full"),
        ("activation_checkpointing=1", "activation_checkpointing=full"),  # Hydra: a traceback
        ("activation_checkpointing=0,1", "activation_checkpointing=none,full"),
        ("compile=true", "compile=true"),
        ("tag=activation_checkpointing=true", "tag=activation_checkpointing=true"),
    ],
)
def test_old_boolean_values_become_policies(override: str, expected: str) -> None:
    assert checkpointing.normalize_override(override) == expected


@pytest.mark.parametrize(
    "value, name", [("true", "full"), ("false", "none"), ("full", "full"), ("none", "none")]
)
def test_the_group_composes_from_old_and_new_values(hydra_compose, value: str, name: str) -> None:
    cfg = hydra_compose([f"activation_checkpointing={value}"])
    assert cfg.activation_checkpointing == CheckpointingConfig(name=name)
    assert validate(cfg) is cfg


def test_the_options_are_the_policies() -> None:
    assert option_names("activation_checkpointing") == sorted(checkpointing.POLICIES)


def test_an_unknown_policy_is_refused_in_one_line() -> None:
    cfg = RunConfig(activation_checkpointing=CheckpointingConfig(name="sometimes"))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.key == "activation_checkpointing.name" and "none, full" in str(err.value)


def test_each_policy_names_its_recompute() -> None:
    def mode(name: str, compiled: bool) -> str:
        run = RunConfig(activation_checkpointing=CheckpointingConfig(name=name), compile=compiled)
        return checkpointing.recompute_mode(run)

    assert [mode("none", False), mode("none", True)] == ["none", "none"]
    assert [mode("full", False), mode("full", True)] == ["early_stop", "early_stop"]
    assert [mode("selective", False), mode("selective", True)] == ["selective", "selective"]
    assert [mode("every_n", False), mode("every_n", True)] == ["early_stop", "early_stop"]
    assert mode("memory_budget", True) == "unknown"
    assert checkpointing.POLICIES["full"].recomputes_forward
    assert not checkpointing.POLICIES["none"].recomputes_forward


@pytest.mark.parametrize(
    "overrides, policy",
    [
        (["activation_checkpointing=every_n"], EveryNConfig(every=2)),
        (
            ["activation_checkpointing=every_n", "activation_checkpointing.every=3", "model.n_layer=4"],
            EveryNConfig(every=3),
        ),
        (["activation_checkpointing=selective"], CheckpointingConfig(name="selective")),
        (["activation_checkpointing=memory_budget", "compile=true"], MemoryBudgetConfig(budget=0.5)),
        (
            ["activation_checkpointing=memory_budget", "activation_checkpointing.budget=0.2", "compile=true"],
            MemoryBudgetConfig(budget=0.2),
        ),
    ],
)
def test_the_new_policies_compose_with_their_knobs(hydra_compose, overrides, policy) -> None:
    cfg = hydra_compose(overrides)
    assert cfg.activation_checkpointing == policy
    assert validate(cfg) is cfg


@pytest.mark.parametrize(
    "run, key, words",
    [
        (RunConfig(activation_checkpointing=EveryNConfig(every=0)), "activation_checkpointing.every", ">= 1"),
        (
            RunConfig(activation_checkpointing=MemoryBudgetConfig(budget=1.5), compile=True),
            "activation_checkpointing.budget",
            "0..1",
        ),
        (
            RunConfig(activation_checkpointing=MemoryBudgetConfig()),
            "activation_checkpointing",
            "compile=true",
        ),
        (
            RunConfig(
                activation_checkpointing=CheckpointingConfig(name="selective"),
                attention=AttentionConfig(name="standard"),
            ),
            "activation_checkpointing",
            "attention=sdpa",
        ),
    ],
)
def test_impossible_policy_settings_are_refused_in_one_line(run, key, words) -> None:
    with pytest.raises(ConfigError) as err:
        validate(run)
    assert err.value.key == key and words in str(err.value) and "\n" not in str(err.value)


def test_every_n_wraps_every_nth_block_counted_from_one() -> None:
    assert checkpointing.checkpointed_blocks(EveryNConfig(every=2), 5) == [1, 3]
    assert checkpointing.checkpointed_blocks(EveryNConfig(every=3), 7) == [2, 5]
    assert checkpointing.checkpointed_blocks(EveryNConfig(every=1), 3) == [0, 1, 2]
    assert checkpointing.checkpointed_blocks(CheckpointingConfig(name="none"), 3) == []
    assert checkpointing.checkpointed_blocks(CheckpointingConfig(name="full"), 3) == [0, 1, 2]


def test_the_memory_estimate_keeps_what_the_policy_saves() -> None:
    plain = RunConfig()
    full = dataclasses.replace(plain, activation_checkpointing=CheckpointingConfig(name="full"))
    m = plain.model
    # gpt-tiny, bf16 on single: fp32 residual stream (4 B); 4 x 128 tokens
    tokens, boundary = 4 * 128, m.n_embd * 4
    (kept_all, logits), (kept_inputs, logits_full) = activation_bytes(plain), activation_bytes(full)
    per_layer = kept_all // (tokens * m.n_layer)
    # full: every block's input, and backward rebuilds the top block (its input among what it keeps)
    assert kept_inputs == tokens * ((m.n_layer - 1) * boundary + per_layer)
    assert logits == logits_full and kept_inputs < kept_all
    # every_n on gpt-tiny's 2 blocks checkpoints only the top one: rebuilding it in backward, once
    # the blocks above are gone, keeps what none keeps (never more)
    every = dataclasses.replace(plain, activation_checkpointing=EveryNConfig(every=2))
    assert activation_bytes(every)[0] == kept_all
    # 6 blocks, every 2nd (1, 3, 5) checkpointed: start of backward 3 b + 3 a, rebuilding block 5
    # (blocks 0-4 kept: 2 b + 3 a, plus its a) 2 b + 4 a, the larger
    six = dataclasses.replace(every, model=dataclasses.replace(m, n_layer=6))
    none6 = dataclasses.replace(six, activation_checkpointing=CheckpointingConfig(name="none"))
    full6 = dataclasses.replace(six, activation_checkpointing=CheckpointingConfig(name="full"))
    kept6 = activation_bytes(six)[0]
    assert kept6 == tokens * (2 * boundary + 4 * per_layer)
    assert activation_bytes(full6)[0] < kept6 < activation_bytes(none6)[0]
    # every=1 checkpoints every block: the same as full
    one = dataclasses.replace(plain, activation_checkpointing=EveryNConfig(every=1))
    assert activation_bytes(one)[0] == kept_inputs
    # selective and a budget sit between full and none; budget 1 keeps what none keeps
    selective = dataclasses.replace(plain, activation_checkpointing=CheckpointingConfig(name="selective"))
    assert kept_inputs < activation_bytes(selective)[0] < kept_all
    # compiled blocks keep their own set (memory.py's compiled shapes): compare with compiled none
    compiled_all = activation_bytes(dataclasses.replace(plain, compile=True))[0]
    for budget, kept in ((1.0, compiled_all), (0.0, tokens * m.n_layer * boundary)):
        run = dataclasses.replace(
            plain, activation_checkpointing=MemoryBudgetConfig(budget=budget), compile=True
        )
        assert activation_bytes(run)[0] == kept


def test_resume_skips_an_ok_record_made_before_the_policy_and_the_layout_existed() -> None:
    """An ok record written before activation checkpointing became a policy (a bool) and before
    ``parallel``/``batch.global_batch_size`` existed compares equal to today's config of the same run,
    so ``resume=true`` skips it rather than measuring it again."""
    import dataclasses
    import json

    from flopsweep.config import CheckpointingConfig, RunConfig
    from flopsweep.job import comparable_config

    for name, old_bool in (("full", True), ("none", False)):
        cfg = RunConfig(activation_checkpointing=CheckpointingConfig(name=name))
        new = json.loads(json.dumps(dataclasses.asdict(cfg)))
        old = json.loads(json.dumps(new))
        old["activation_checkpointing"] = old_bool
        del old["parallel"], old["batch"]["global_batch_size"]
        assert comparable_config(old) == comparable_config(new)
        other = dict(old, activation_checkpointing=not old_bool)
        assert comparable_config(other) != comparable_config(new)
