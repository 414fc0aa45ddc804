"""Which model runs: the keys that say what a model option *is*, checked against the picked option.

A model option of ``conf/model/`` (``model=llama3.1-8b``) is a family (``model.arch``, set by the
schema node its file extends: ``base_llama``) and a name (``model.name``, the file's own). Every
other key of the model schema is a knob of that option, meant to be varied: the sizes
(``n_layer``, ``n_embd``, ``n_head``, ``seq_len``, ``vocab_size``; Llama's ``n_kv_head``,
``ffn_dim``, ``rope_theta``, ``norm_eps``, ``tie_embeddings``; ``model=hf``'s ``config`` and
``experts``). The two identity keys (:data:`IDENTITY_KEYS`) are not: ``model.name=llama3.1-8b`` on
the default ``model=gpt-tiny`` trained gpt-tiny and recorded it as llama3.1-8b, and
``model=llama3.1-8b model.arch=gpt2`` built GPT-2 blocks at the 8B sizes under the Llama name.
So a hand-set ``model.name`` that is not the picked option's name, a blank one, and a
``model.arch`` that is not its family are refused in one line naming the key, the value and the
fix (the option whose name it is, or the closest one): before Hydra where the command line tells
(:func:`command_line_problem`, ``run.py``'s :func:`refusal`, exit 2, nothing written), and in
validation for every job (:func:`flopsweep.checks.check_choices`, which has Hydra's choices: a
``+sweep`` file, a plan). ``model=hf`` takes its name from its ``config.json``
(:func:`flopsweep.models.hf.check` refuses another); a size changed by hand keeps the option's
name in the record, and the analysis names it apart when runs of one name differ in size
(:func:`analysis.load.name_sizes`).

Also :func:`flopsweep.models.heads.head_problem` (importable from here): ``model.n_head`` (or
``model.n_embd``) that does not divide ``model.n_embd`` (for a Llama option, into an even head dim),
refused before Hydra leading with the key the command line set, its fix that key's.

Torch-free: reads ``conf/`` (:mod:`flopsweep.override_schema`) and Hydra's override parser.
"""

from __future__ import annotations

import functools
import itertools
import os

from flopsweep.config import ConfigError
from flopsweep.models.heads import head_problem
from flopsweep.override_schema import (
    CONF,
    listed_conf_yaml,
    near_names,
    option_files,
    option_kind,
    read_conf_yaml,
    sweep_values,
)

IDENTITY_KEYS = ("name", "arch")
"""The ``model.*`` keys that say which option runs (its label and its family), never varied by hand."""

HF_OPTION = "hf"
"""The option whose name comes from its ``config.json`` (:mod:`flopsweep.models.hf`), not its file."""


@functools.cache
def options() -> dict[str, tuple[str, str]]:
    """``{option: (name, arch)}`` of every file of ``conf/model/``: its ``name`` (``""`` for ``hf``,
    named from its file) and its family, the ``base_<arch>`` schema node it extends. A file that cannot
    be read is listed with no name (:func:`flopsweep.override_schema.listed_conf_yaml`): it stopped
    every run of every model with a YAML traceback naming no file."""
    out = {}
    for option in option_files("model"):
        node = listed_conf_yaml(os.path.join(CONF, "model", f"{option}.yaml"))
        out[option] = (str(node.get("name") or ""), option_kind("model", option))
    return out


def _option(choice: str) -> str | None:
    """The option of a Hydra choice (``gpt-tiny``, ``gpt-tiny.yaml``), or None when no file of
    ``conf/model/`` is it (another config directory: left to the schema's own checks)."""
    stem = str(choice).strip().removesuffix(".yaml")
    return stem if stem in options() else None


def _by_name(name: str) -> str | None:
    """The option whose name ``name`` is, else None."""
    return next((o for o, (n, _) in options().items() if n and n == name), None)


def name_problem(value: object, choice: str) -> ConfigError | None:
    """The refusal of ``model.name=value`` on ``model=choice``, else None: a name that is blank or
    whitespace (the tables would show a run of no model), or, on an option of ``conf/model/`` but
    ``hf``, any name but the option's own (``model.name=llama3.1-8b`` on ``model=gpt-tiny`` trained
    gpt-tiny under the 8B's name). The fix picks the option whose name it is, else drops the
    override and names the closest option. ``hf``'s name is checked against its file by
    :func:`flopsweep.models.hf.check`."""
    option = _option(choice)
    if value is None or isinstance(value, list | dict):
        return None  # not text: flopsweep.overrides.type_problem's line
    text = str(value).lower() if isinstance(value, bool) else str(value)  # model.name=5 is the text '5'
    if text == "" and option == HF_OPTION:
        return None  # hf's default: named from its config.json
    if not text.strip():
        shown = f"model={option}" if option else "the model option"
        return ConfigError(
            "model.name",
            value,
            "is blank, and every record and table names the run's model by it",
            f"drop the model.name override ({shown} names the model)",
        )
    if option is None or option == HF_OPTION:
        return None
    own, arch = options()[option]
    if text == own:
        return None
    named = _by_name(text)
    if named is not None:
        other_arch = options()[named][1]
        return ConfigError(
            "model.name",
            text,
            f"is the name of model={named} ({other_arch}), but model.name only labels the run: "
            f"model={option} ({arch}, its sizes) would train under it",
            f"pick the option itself: model={named}, and drop model.name",
        )
    near = near_names(text, [n for n, _ in options().values() if n and n != own], "model=", n=1)
    also = f"; to run another model, pick its option, e.g. {near[0]}" if near else ""
    return ConfigError(
        "model.name",
        text,
        f"is no model option's name, and model.name only labels the run: model={option} ({arch}) would "
        "train under it",
        f"drop the model.name override (model={option} names the model){also}",
    )


def arch_problem(value: object, choice: str) -> ConfigError | None:
    """The refusal of ``model.arch=value`` on ``model=choice`` when it is not the option's family,
    else None (an option no file of ``conf/model/`` is: None). ``model=llama3.1-8b model.arch=gpt2``
    built GPT-2 blocks at the 8B's sizes under the Llama name; the fix names an option of the family
    asked for (the first in order), or the families there are."""
    option = _option(choice)
    if option is None:
        return None
    arch = options()[option][1]
    if value == arch:
        return None
    families = sorted({a for _, a in options().values()})
    of_family = [o for o, (_, a) in options().items() if a == value]
    pick = (
        f"pick a {value} option, e.g. model={of_family[0]}"
        if of_family
        else f"pick an option of the family you want ({', '.join(families)}), e.g. model={option}"
    )
    return ConfigError(
        "model.arch",
        value,
        f"is the family of the model option, and model={option} is {arch}: set by hand it would build "
        f"{option}'s sizes as another family under {option}'s name",
        f"drop the model.arch override (model={option} sets it), or {pick}",
    )


def _picked(parsed: list) -> list[str] | None:
    """The model options the command line picks (each of a sweep's), conf/config.yaml's default when
    it picks none; None when a ``+sweep`` file or another config may pick one (left to validation)."""
    from flopsweep.override_schema import listed_values

    given = None
    for o in parsed:
        if o.key_or_group == "model" and o.package is None and not o.is_delete():
            given = listed_values(o)
    if given is not None:
        return given
    if any(o.key_or_group == "sweep" for o in parsed):
        return None
    defaults = read_conf_yaml(os.path.join(CONF, "config.yaml")).get("defaults") or []
    chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
    return [str(chosen["model"])] if "model" in chosen else None


def _values(o) -> list:
    """The values a parsed override gives: its one value or each of a choice sweep's; none for a range,
    an interval, a glob or an interpolation (Hydra's and the job's)."""
    return [v for v in sweep_values(o) if "${" not in str(v)]


def command_line_problem(overrides: list[str]) -> str | None:
    """The one line ``run.py`` refuses a command line's model identity keys with before Hydra starts
    (exit 2, no run folder), else None: a ``model.name`` (each value of a sweep) that
    :func:`name_problem` refuses on a picked option, a ``model.arch`` :func:`arch_problem` refuses, and
    ``model.n_head``/``model.n_embd`` that do not divide (:func:`head_problem`, with the picked option's
    other size). Options a ``+sweep`` file or ``--config-name`` may pick are left to validation."""
    from flopsweep.override_parsing import parsed_overrides

    if any(
        o.startswith(("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir"))
        for o in overrides
    ):
        return None
    parsed = parsed_overrides(overrides)
    if parsed is None:  # the grammar's own line (syntax_problem) comes first
        return None
    picked = [o for o in (_picked(parsed) or []) if _option(o) is not None]
    keys = {o.key_or_group.lstrip("+"): o for o in parsed if o.package is None and not o.is_delete()}
    for key, check in (("model.name", name_problem), ("model.arch", arch_problem)):
        if key in keys:
            for value, choice in itertools.product(_values(keys[key]), picked):
                if (problem := check(value, choice)) is not None:
                    return str(problem)
    return _heads(keys, picked)


def _heads(keys: dict, picked: list[str]) -> str | None:
    """:func:`head_problem`'s line for the command line's ``model.n_head`` and ``model.n_embd`` on each
    picked option but ``hf`` (the file's shape), leading with the key it sets (``model.n_head`` when
    it sets both), its fix that key's: a Llama option's heads must also leave an even head dim (RoPE) and
    stay a multiple of its ``n_kv_head`` (the command line's, else the option's). Values that are no whole
    numbers are :func:`flopsweep.overrides.type_problem`'s."""
    set_keys = [k for k in ("model.n_head", "model.n_embd") if k in keys]
    if not set_keys:
        return None
    for choice in picked:
        if choice == HF_OPTION or options()[_option(choice)][1] == HF_OPTION:
            continue
        node = read_conf_yaml(os.path.join(CONF, "model", f"{_option(choice)}.yaml"))
        pairs = options()[_option(choice)][1] == "llama"  # rotary positions: an even head dim
        given = {
            key: _values(keys[f"model.{key}"]) if f"model.{key}" in keys else [node.get(key)]
            for key in ("n_head", "n_embd", "n_kv_head")
        }
        for n_head, n_embd, kv in itertools.product(*given.values()):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n_head, n_embd)):
                continue
            kv_heads = kv if pairs and isinstance(kv, int) and not isinstance(kv, bool) and kv >= 1 else 1
            problem = head_problem(n_embd, n_head, set_keys[0], pairs=pairs, kv_heads=kv_heads)
            if problem is not None:
                return str(problem)
    return None


def model_values(model_keys: list[str]) -> dict[str, object] | None:
    """``{key under model: value}`` of ``model.KEY=VALUE`` overrides as Hydra's grammar reads them
    (``model.n_layer=40``: 40), the last of a key winning; None where one is not a plain change of one
    value (``+``, ``~``, a sweep, an interpolation, a text the grammar refuses): the job's to judge."""
    from flopsweep.override_parsing import parsed_or_none

    out: dict[str, object] = {}
    for override in model_keys:
        parsed = parsed_or_none(override)
        if parsed is None or override.startswith(("+", "~")) or parsed.is_sweep_override():
            return None
        value = parsed.value()
        if "${" in str(value):
            return None
        out[parsed.key_or_group.removeprefix("model.")] = value
    return out


def merged_model(option: str, model_keys: list[str]) -> tuple[object, dict[str, object]] | None:
    """The typed model config (its family's schema, :data:`flopsweep.models.MODELS`) of ``model=option``'s
    YAML with the ``model.*`` overrides ``model_keys`` merged in as Hydra merges them, and those changes
    (:func:`model_values`); None where the command line alone does not decide it (an option of another
    config folder, a sweep, ``+``/``~``, an interpolation) or the schema refuses a value (a key it lacks,
    a type: their own checks' lines)."""
    from omegaconf import OmegaConf

    from flopsweep.models import MODELS

    if _option(option) is None or (changes := model_values(model_keys)) is None:
        return None
    family = MODELS.get(options()[_option(option)][1])
    if family is None:
        return None
    data = {k: v for k, v in read_conf_yaml(os.path.join(CONF, "model", f"{_option(option)}.yaml")).items()}
    data.pop("defaults", None)
    try:
        node = OmegaConf.merge(OmegaConf.structured(family.config), data)
        for key, value in changes.items():
            OmegaConf.update(node, key, value, merge=True)
        return OmegaConf.to_object(node), changes
    except Exception:  # noqa: BLE001 - omegaconf's refusal of a key or a type: that check's own line
        return None


def shape_problem(overrides: list[str]) -> str | None:
    """The job's own check of the model (``MODELS[arch].check``, as :func:`flopsweep.checks.validate`
    calls it) on the picked option merged with the command line's ``model.*`` values
    (:func:`merged_model`), before Hydra makes the job's folder: ``model=llama3.1-8b model.n_kv_head=3``
    (a divisor of ``n_head`` is needed), an odd RoPE head dim. For ``model=hf`` with a ``model.config``
    path typed, the file's own checks (:func:`flopsweep.models.hf.check_file`: a ``num_hidden_layers`` of
    -3, 2.5, ``"2"``, ``true`` or ``1e9``, ``num_attention_heads`` 0, an unknown ``model_type``); a shipped
    name is left to the job (its file passes). None where the command line alone does not decide it."""
    from flopsweep.models import MODELS, hf
    from flopsweep.models.hf_files import is_shipped
    from flopsweep.override_parsing import override_key, typed_values

    typed = typed_values(overrides)
    if any(k == "sweep" or k.startswith(("-", "--config")) for k in typed) or any(
        o.startswith(("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir"))
        for o in overrides
    ):
        return None
    option = typed.get("model") or (_picked([]) or [""])[0]
    model_keys = [o for o in overrides if not o.startswith("-") and override_key(o).startswith("model.")]
    if (merged := merged_model(option, model_keys)) is None:
        return None
    model = merged[0]
    try:
        if model.arch == HF_OPTION:
            if "model.config" in typed and not is_shipped(str(model.config)):
                hf.check_file(model)
        else:
            MODELS[model.arch].check(model)
    except ConfigError as exc:
        return str(exc)
    return None
