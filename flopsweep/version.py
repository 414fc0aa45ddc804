"""The version line of ``flopsweep --version`` and ``flopsweep-analysis --version`` (standard library only:
the analysis and the entry point both import it, neither through the other)."""

from __future__ import annotations


def version_line() -> str:
    """``flopsweep 0.1.0 (Hydra 1.3.8, torch 2.6.0)``: the installed distributions' versions
    (``importlib.metadata``, nothing imported; ``not installed`` for one that is not)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"flopsweep {of('flopsweep')} (Hydra {of('hydra-core')}, torch {of('torch')})"
