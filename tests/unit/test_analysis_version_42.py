"""``flopsweep-analysis --version`` prints the version line of ``flopsweep --version`` (docs/reliability-13.md
row 1004)."""

from __future__ import annotations

import pytest

from analysis.__main__ import main
from flopsweep.start_checks import version_line


def test_the_analysis_prints_flopsweep_s_version_line_and_exits_0(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == version_line() + "\n"
    assert version_line().startswith("flopsweep ")
