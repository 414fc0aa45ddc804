"""Session 39 (docs/reliability-10.md #671): ``flopsweep --version`` printed Hydra's ``Hydra 1.3.8``
alone. Now it prints flopsweep's version with Hydra's and torch's beside it (``importlib.metadata``),
exit 0, before any config is composed, wherever ``--version`` stands before ``--``."""

from __future__ import annotations

from importlib.metadata import version

from flopsweep.start_checks import version_asked, version_line


def test_the_version_line_names_flopsweep_hydra_and_torch():
    line = version_line()
    hydra, torch = version("hydra-core"), version("torch")
    assert line == f"flopsweep {version('flopsweep')} (Hydra {hydra}, torch {torch})"
    assert line.startswith("flopsweep 0.")


def test_version_is_asked_anywhere_before_a_double_dash():
    assert version_asked(["--version"]) and version_asked(["-m", "backend=bogus", "--version"])
    assert version_asked(["--help", "--version"])  # Hydra's parser printed its version ahead of a help too
    assert not version_asked(["--help"]) and not version_asked(["--", "--version"]) and not version_asked([])
