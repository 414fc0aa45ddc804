"""The one place flopsweep imports a module by its name: the torch code a torch-free spec names.

A model family (``ModelFamily.torch_module``), an attention kernel (``attention.KERNEL_MODULE``), a
checkpointing policy (``checkpointing.APPLY_MODULE``), a precision (``PrecisionSpec.convert_module``)
and a backend (``BackendSpec.torch``) name their torch code as ``"flopsweep.<module>"`` or
``"flopsweep.<module>:<attribute>"``, loaded on first use (on the rank), so that validation, the
estimators and the analysis import no torch. Only modules of the ``flopsweep`` package are loaded:
any other path raises ``ValueError``, so no name can reach code outside the installed package (the
shared-machine rule: never import code found in a folder). Torch-free.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

PACKAGE = "flopsweep"
"""The only package whose modules :func:`module` loads."""


def module(path: str) -> ModuleType:
    """The module ``path`` (``"flopsweep.models.llama_nn"``), imported now.

    Raises:
        ValueError: ``path`` is not a dotted name inside the ``flopsweep`` package.
    """
    parts = path.split(".")
    if parts[0] != PACKAGE or not all(part.isidentifier() for part in parts):
        raise ValueError(f"lazy import {path!r}: only modules of the {PACKAGE} package are loaded")
    return importlib.import_module(path)


def resolve(path: str) -> Any:
    """The object ``"module:attribute"`` names (the module itself without ``:attribute``).

    Raises:
        ValueError: the module is outside ``flopsweep`` (:func:`module`).
        AttributeError: the module has no such attribute.
    """
    name, sep, attribute = path.partition(":")
    loaded = module(name)
    return getattr(loaded, attribute) if sep else loaded


def attributes_of(path: str, owner: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for the torch-free module ``owner`` that hands on the names
    of its torch module ``path``, imported on first use (``flopsweep.models.gpt2.GPT`` is
    ``gpt2_nn.GPT``): importing ``owner`` imports no torch. A dunder name (``__path__``, which
    ``from owner import NAME`` asks for, ``__wrapped__``, ...) is never handed on: asking for it
    imports nothing.

    Raises (from the returned function):
        AttributeError: neither module has the name, or it is a dunder name ``owner`` lacks.
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        try:
            return getattr(module(path), name)
        except AttributeError:
            raise AttributeError(f"module {owner!r} has no attribute {name!r}") from None

    return __getattr__
