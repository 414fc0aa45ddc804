"""Interpolations on the command line that Hydra would answer with a multi-line error: refused before Hydra in
one line (``run.py``'s refusal, exit 2). Torch-free.

The other checks before Hydra leave an interpolated value alone (``timeout_s=${seed}``: the job resolves it
and checks the value it gets, naming the key); what they cannot leave is a value that never resolves: a
config group's option taken from a config key (``model=${tag}``: Hydra picks options before it reads any key;
another group's choice, ``model=${backend}``, and a resolver, ``backend=${oc.env:B}``, resolve), and a
resolver that fails on its own argument (``steps.measure=${oc.decode:0}``: ``oc.decode`` takes text). An
unset ``${oc.env:NAME}`` and a key that refers to itself are ``command_line_checks.interpolation_problem``; a
key no schema has (``model.n_layer=${nope}``) is :func:`missing_key_problem`; a resolver no one registers
(``${nosuchresolver:1}``) :func:`unknown_resolver_problem`; command-line keys that refer to each other
(``model.n_layer=${model.n_head} model.n_head=${model.n_layer}``) :func:`cycle_problem`; and a value that
resolves by itself to what its key cannot take (``steps.measure=${oc.env:HOME}``)
:func:`resolved_type_problem`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from flopsweep.override_parsing import set_key, split_override

_WHOLE = re.compile(r"^\$\{([A-Za-z_][\w/]*)\}$")


def _groups(conf: Path) -> set[str]:
    """The config groups of ``conf`` (its folders: ``model``, ``backend``, ...)."""
    try:
        return {e.name for e in os.scandir(conf) if e.is_dir(follow_symlinks=False)}
    except OSError:
        return set()


def _refers_to_a_key(value: str) -> bool:
    """Whether ``value``'s interpolation fails by itself for want of a config key (``${tag}``)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationKeyError

    try:
        OmegaConf.create({"value": value.strip().strip("'\"")}).value  # noqa: B018 - resolved for its errors
    except InterpolationKeyError:
        return True
    except Exception:  # noqa: BLE001 - a resolver's own failure: resolver_problem's line
        return False
    return False


def choice_problem(key: str, value: str, conf: Path | str) -> str | None:
    """The line for a group's option given as an interpolation of a config key (``model=${tag}``), else
    None: another group's choice (``model=${backend}``) and a resolver that stands alone
    (``backend=${oc.env:BACKEND}``) are Hydra's to resolve."""
    groups = _groups(Path(conf))
    if key not in groups or "${" not in value:
        return None
    whole = _WHOLE.match(value.strip().strip("'\""))
    if whole and whole.group(1) in groups and whole.group(1) != key:
        return None  # model=${backend}: Hydra's interpolation of another group's choice
    if not _refers_to_a_key(value):
        return None  # backend=${oc.env:BACKEND}: resolves by itself, as Hydra resolves it
    try:
        names = [e.name for e in os.scandir(Path(conf) / key)]
    except OSError:
        names = []
    options = sorted(n.removesuffix(".yaml") for n in names if n.endswith(".yaml"))
    shown = ", ".join(options[:6]) + (", ..." if len(options) > 6 else "")
    return (
        f"Invalid config: {key}={value}: a config group's option cannot come from an interpolation of a "
        f"config value (Hydra picks the options before it reads any key). Fix: name the option ({shown}), "
        f"or drop {key}=."
    )


def resolver_problem(key: str, value: str) -> str | None:
    """The line for a value whose interpolation fails in its resolver whatever the config holds
    (``${oc.decode:0}``), else None: one that refers to a key, or uses a resolver registered only when Hydra
    runs (``${now:...}``, ``${hydra:...}``), is the job's to resolve."""
    if "${" not in value or key.startswith("hydra"):
        return None
    from omegaconf import OmegaConf
    from omegaconf.errors import (
        GrammarParseError,
        InterpolationKeyError,
        InterpolationResolutionError,
        InterpolationToMissingValueError,
        UnsupportedInterpolationType,
    )

    try:
        OmegaConf.create({"value": value.strip().strip("'\"")}).value  # noqa: B018 - resolved for its errors
    except (
        InterpolationKeyError,
        InterpolationToMissingValueError,
        UnsupportedInterpolationType,
        GrammarParseError,  # Hydra's grammar and run.py's syntax check answer it
    ):
        return None
    except InterpolationResolutionError as exc:
        why = str(exc).splitlines()[0].removeprefix("TypeError raised while resolving interpolation: ")
        return (
            f"Invalid config: {key}={value}: the interpolation cannot resolve ({why}). Fix: write the value "
            "itself, or quote a resolver's argument as text (${oc.decode:'0'})."
        )
    except Exception:  # noqa: BLE001 - anything else omegaconf raises: the job's own error names it
        return None
    return None


_KEY_REF = re.compile(r"\$\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}")
"""An interpolation of a config key by its absolute dotted name (``${nope}``, ``${model.n_layer}``); a
resolver (``${oc.env:B}``), a relative key (``${.x}``) and an index (``${a[0]}``) are not."""


def missing_key_problem(key: str, value: str, added: set[str]) -> str | None:
    """The line for a value that interpolates a key no schema of the config has (``model.n_layer=${nope}``,
    ``${model.nope}``), else None: Hydra composed it and the job stopped with a traceback
    (``InterpolationKeyError``), exit 1, after Hydra made its folder. A key is there when
    :func:`flopsweep.override_schema.known_keys` lists it (any option's schema: the job checks the option
    picked), the command line adds it (``+model.extra=1``, in ``added``), or it is under ``hydra``."""
    if "${" not in value or key.startswith("hydra"):
        return None
    from flopsweep.override_schema import known_keys

    known = known_keys()
    for ref in _KEY_REF.findall(value):
        if ref in known or ref in added or ref.split(".")[0] == "hydra":
            continue
        parent = ref.rpartition(".")[0]
        near = sorted(k for k in known if k.rpartition(".")[0] == parent and "." in k) if parent else []
        shown = ", ".join(near[:4]) + (", ..." if len(near) > 4 else "")
        return (
            f"Invalid config: {key}={value}: interpolates a key the config does not have ({ref}). Fix: "
            + (
                f"name a key of {parent} ({shown}), or write the value itself."
                if near
                else "write the value itself, or name a key of the config (${model.seq_len})."
            )
        )
    return None


HYDRA_RESOLVERS = ("now", "hydra", "python_version")
"""The resolvers Hydra registers when it starts (``hydra.core.utils.setup_globals``): before Hydra they are
not registered yet, and they resolve in the job."""
SHOWN_RESOLVERS = ("oc.env", "oc.decode", "oc.select", "oc.create", "oc.dict.keys", "oc.dict.values", "now")
"""The resolvers a line names as those there are (OmegaConf's and Hydra's ``now``)."""
_RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")


def unknown_resolver_problem(key: str, value: str) -> str | None:
    """The line for a value that calls a resolver no one registers (``model.n_layer=${nosuchresolver:1}``),
    else None: Hydra composed it and the job stopped on "Unsupported interpolation type" after Hydra made its
    folder. Registered now (OmegaConf's ``oc.*``, ``run.py``'s ``flopsweep_*``) or by Hydra when it starts
    (:data:`HYDRA_RESOLVERS`) is known."""
    if "${" not in value or key.startswith("hydra"):
        return None
    from omegaconf import OmegaConf

    from flopsweep.config import invalid_line
    from flopsweep.override_schema import near_names

    for name in _RESOLVER.findall(value):
        if name in HYDRA_RESOLVERS or OmegaConf.has_resolver(name):
            continue
        near = near_names(name, SHOWN_RESOLVERS, n=1)
        fix = (
            f"write {value.replace(name + ':', near[0] + ':', 1)} if {near[0]} is meant"
            if near
            else "name a resolver, e.g. ${oc.env:NAME,default}"
        )
        known = f"{name} is no resolver (those there are: {', '.join(SHOWN_RESOLVERS)}, ...)"
        return invalid_line(f"{key}={value}", known, f"{fix}, or write the value itself.")
    return None


def cycle_problem(overrides: list[str]) -> str | None:
    """The line for command-line keys whose interpolations refer to each other in a cycle
    (``model.n_layer=${model.n_head} model.n_head=${model.n_layer}``), else None: none of them resolves, and
    the job stopped on "Recursive interpolation detected" after Hydra made its folder. A key that refers to
    itself is ``command_line_checks.interpolation_problem``'s."""
    from flopsweep.override_schema import number_key

    refs: dict[str, list[str]] = {}
    typed: dict[str, str] = {}
    for override in overrides:
        if override.startswith("-") or "=" not in override:
            continue
        _, key, value = split_override(override)
        refs[key], typed[key] = _KEY_REF.findall(value), value
    for start in refs:
        path = [start]
        while (nxt := next((r for r in refs.get(path[-1], []) if r in refs), None)) is not None:
            if nxt in path:
                ring = path[path.index(nxt) :]
                if len(ring) < 2:
                    return None
                names = " and ".join(ring) if len(ring) == 2 else f"{', '.join(ring[:-1])} and {ring[-1]}"
                how = (
                    "each other"
                    if len(ring) == 2
                    else f"each other in a ring ({' -> '.join([*ring, ring[0]])})"
                )
                what = "a number" if all(number_key(k, overrides) for k in ring) else "a value"
                return (
                    f"Invalid config: {ring[0]}={typed[ring[0]]}: {names} refer to {how}, so none of them "
                    f"resolves. Fix: set one of them to {what} itself, not an interpolation."
                )
            path.append(nxt)
    return None


def resolved_type_problem(key: str, value: str, overrides: list[str]) -> str | None:
    """The line for a value whose interpolation resolves by itself (a resolver, no config key) to what
    the key's schema cannot take (``steps.measure=${oc.env:HOME}``: a path;
    ``model.n_layer=${oc.decode:"[1,2]"}``: a list), else None: the job stopped on "could not be converted
    to Integer" after Hydra made its folder. The line is :func:`flopsweep.override_values.value_problem`'s
    of the resolved value. A sweep (``cost.usd_per_gpu_hour=2,${oc.env:PRICE}``) is left to its jobs, each
    of which records its own refusal (as ``model.config=a.json,b.json`` is)."""
    if "${" not in value or key.startswith("hydra") or _KEY_REF.search(value):
        return None
    from flopsweep.override_parsing import parsed_or_none

    if (parsed := parsed_or_none(f"{key}={value}")) is not None and parsed.is_sweep_override():
        return None
    from omegaconf import OmegaConf

    from flopsweep.override_schema import schema_node
    from flopsweep.override_values import value_problem

    try:
        resolved = OmegaConf.create({"value": value.strip().strip("'\"")}).value
    except Exception:  # noqa: BLE001 - one that cannot resolve by itself: the other checks' lines
        return None
    if OmegaConf.is_config(resolved):
        resolved = OmegaConf.to_container(resolved)
    if (found := schema_node(key, overrides)) is None:
        return None
    line = value_problem(key, resolved, found[0], found[1])
    if line is None:
        return None
    shown = repr(resolved) if isinstance(resolved, str) else str(resolved)
    rest = line.split(": ", 2)[2] if line.count(": ") >= 2 else line
    return f"Invalid config: {key}={value}: resolves to {shown}, which {rest}"


def interpolated_problem(overrides: list[str], conf: Path | str) -> str | None:
    """:func:`choice_problem`, :func:`resolver_problem`, :func:`missing_key_problem` or
    :func:`unknown_resolver_problem` of the first override that has one, then :func:`cycle_problem`, then
    :func:`resolved_type_problem` of the first override that has one; else None."""
    added = {set_key(o) for o in overrides if o.startswith("+") and "=" in o}
    for override in overrides:
        if override.startswith("-") or "=" not in override:
            continue
        _, key, value = split_override(override)
        if problem := (
            choice_problem(key, value, conf)
            or resolver_problem(key, value)
            or missing_key_problem(key, value, added)
            or unknown_resolver_problem(key, value)
        ):
            return problem
    if problem := cycle_problem(overrides):
        return problem
    for override in overrides:
        if override.startswith("-") or "=" not in override:
            continue
        _, key, value = split_override(override)
        if problem := resolved_type_problem(key, value, overrides):
            return problem
    return None


def resolution_fix(exc: BaseException) -> str:
    """The fix of the job's line for an interpolation that failed when the job resolved it (``run.py``; a
    ``+sweep`` file's, which the checks before Hydra do not read), by the class of ``exc`` (omegaconf's
    error)."""
    from omegaconf.errors import UnsupportedInterpolationType, ValidationError

    if "Recursive interpolation" in str(exc):
        return "give one of the keys it refers to a value itself, not an interpolation"
    if isinstance(exc, UnsupportedInterpolationType):
        return f"name a resolver ({', '.join(SHOWN_RESOLVERS)}), or write the value itself"
    if isinstance(exc, ValidationError) or "could not be converted" in str(exc):
        return "make it resolve to a value of the key's type, or write the value itself"
    return "set the value it refers to, or drop it"
