"""Refusals before Hydra of a value outside the set its key takes, torch-free: a text key of a fixed set of
names (``fault.kind=oomm``, ``device=gpu``, ``parallel.pp_schedule=1f1b``; :func:`choices`), a ZeRO stage
outside 1..3 (``backend.zero_stage=4``) and a model size below 1 on a family that builds it
(``model.n_layer=0`` on ``model=gpt-tiny``; ``model=hf`` reads 0 as "from the file":
:data:`flopsweep.models.ModelFamily.positive`). The job refuses each as well
(:func:`flopsweep.checks.validate`, the backend's and the kernel's checks), but only after Hydra made a
job folder, and some only once the ranks started; here they are one line, exit 2, no folder.
"""

from __future__ import annotations

import functools
import os


@functools.cache
def choices() -> dict[str, tuple[tuple[str, ...], str]]:
    """``{key: (the names it takes, the fix's example key)}`` for every text key of the schema (and of
    the options') whose value is one of a fixed set, as the job's checks list them (the same tuples:
    :data:`flopsweep.limits.FAULT_KINDS`, :data:`flopsweep.layout.PP_SCHEDULES`, ...); a group's
    ``name`` takes its registry keys (``precision.name``: ``bf16``, ``fp16``, ...), its example the
    group (``precision=bf16``). Not here: free text (``tag``, ``model.config``, paths), ``model.name``
    and ``model.arch`` (:mod:`flopsweep.model_identity`), ``objective`` (:mod:`flopsweep.objective`)."""
    from flopsweep import blocksparse
    from flopsweep.attention import BLOCKSPARSE_IMPLS
    from flopsweep.checks import DEVICES, option_schemas
    from flopsweep.compile_levers import COMPILE_MODES, COMPILE_SCOPES
    from flopsweep.layout import PP_SCHEDULES
    from flopsweep.limits import (
        FAULT_KINDS,
        FAULT_PHASES,
        OPTIM_IMPLEMENTATIONS,
        PLAN_FORMATS,
        SEARCH_GROW,
        SEARCH_MODES,
    )
    from flopsweep.models.hf import HF_EXPERTS
    from flopsweep.options import OFFLOAD_DEVICES, OPTIMIZER_IMPLS

    table = {
        "device": DEVICES,
        "fault.kind": FAULT_KINDS,
        "fault.phase": FAULT_PHASES,
        "plan_format": PLAN_FORMATS,
        "compile_scope": COMPILE_SCOPES,
        "compile_mode": COMPILE_MODES,
        "optim.implementation": OPTIM_IMPLEMENTATIONS,
        "search.model": SEARCH_MODES,
        "search.grow": SEARCH_GROW,
        "parallel.pp_schedule": PP_SCHEDULES,
        "attention.layout": blocksparse.LAYOUTS,
        "attention.impl": BLOCKSPARSE_IMPLS,
        "backend.offload_optimizer": OFFLOAD_DEVICES,
        "backend.offload_param": OFFLOAD_DEVICES,
        "backend.optimizer_impl": OPTIMIZER_IMPLS,
        "model.experts": HF_EXPERTS,
    }
    out = {key: (tuple(names), key) for key, names in table.items()}
    for group, options in option_schemas().items():
        if group != "model":  # model.name labels the run, model.arch is the option's: model_identity
            out[f"{group}.name"] = (tuple(options), group)
    return out


def _line(key: str, value: object, names: tuple[str, ...], example: str) -> str | None:
    """The job's line for ``value`` outside ``names`` (:func:`flopsweep.config.require_choice`: the names,
    and a "did you mean" for a near one), else None."""
    from flopsweep.choices import require_choice
    from flopsweep.config import ConfigError

    if not isinstance(value, str) or "${" in value:
        return None  # a number or a bool: type_problem's; an interpolation: Hydra's
    try:
        require_choice(key, value, names, example)
    except ConfigError as exc:
        return str(exc)
    return None


def _size_line(key: str, value: object, option: str) -> str | None:
    """The line for a model size below 1 on an option whose family builds it (``model.n_layer=0`` on
    ``model=gpt-tiny``), with the option's own value as the example; None for another value or family."""
    from flopsweep.models import MODELS
    from flopsweep.override_schema import option_kind, read_conf_yaml

    family = MODELS.get(option_kind("model", option)) if key.startswith("model.") else None
    leaf = key.removeprefix("model.")
    if family is None or leaf not in family.positive:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value >= 1:
        return None
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "conf", "model")
    own = read_conf_yaml(os.path.join(path, f"{option}.yaml")).get(leaf) if option else None
    whose = f"model={option}'s; " if isinstance(own, int) and own >= 1 else ""
    example = f"{key}={own if whose else 1} ({whose}any positive integer)"
    return f"Invalid config: {key}={value}: must be a positive integer. Fix: set {example}."


def _stage_line(key: str, value: object, option: str) -> str | None:
    """The job's line for a ``backend.zero_stage`` outside 1..3 (``4``, ``0``:
    :func:`flopsweep.deepspeed_config.zero_stage_error`), its fix the picked option's stage (``zero2``: 2,
    else 3); None for another key or value (a type is :func:`flopsweep.overrides.type_problem`'s)."""
    from flopsweep.deepspeed_config import ZERO_SHORTHANDS, zero_stage_error

    if key != "backend.zero_stage" or isinstance(value, bool) or not isinstance(value, int):
        return None
    error = zero_stage_error(value, ZERO_SHORTHANDS.get(option, 3))
    return None if error is None else str(error)


def value_set_problem(overrides: list[str]) -> str | None:
    """One line for an override whose value is outside its key's set (each value of a choice sweep):
    a name no :func:`choices` entry lists (``fault.kind=oomm``: ``did you mean fault.kind=oom?``), a ZeRO
    stage outside 1..3 (``backend.zero_stage=4``: :func:`_stage_line`), or a model size below 1 on a family
    that builds it (``model.n_layer=0``, each model option the command line picks, else conf/config.yaml's);
    else None. Types are :func:`flopsweep.overrides.type_problem`'s
    (it comes first); a range's values too; interpolations, intervals and globs are Hydra's."""
    from flopsweep.override_parsing import parsed_overrides, sets_config_key
    from flopsweep.override_schema import key_schemas, sweep_values

    if (parsed := parsed_overrides(overrides)) is None:  # Hydra reports its own syntax errors
        return None
    table = choices()
    for o in parsed:
        key = o.key_or_group
        if not sets_config_key(o) or (key not in table and not key.startswith(("model.", "backend."))):
            continue
        values = sweep_values(o)  # a range's too (model.n_layer=range(0,4)); none of an interval, a glob
        for value in values:
            if key in table and (line := _line(key, value, *table[key])):
                return line
            if key.startswith(("model.", "backend.")) and key not in table:
                for _, option in key_schemas(parsed, key):
                    if line := _size_line(key, value, option) or _stage_line(key, value, option):
                        return line
    return None
