"""Hydra search-path plugin: makes the repository's ``sweep/`` folder the config group ``sweep``.

With it, ``python run.py -m +sweep=backends`` reads ``sweep/backends.yaml``.
Hydra discovers plugins in the ``hydra_plugins`` namespace package.
"""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

REPO_ROOT = Path(__file__).resolve().parents[2]


class FlopsweepSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Appended: conf/ stays first, so only the `sweep` group comes from here.
        search_path.append(provider="flopsweep-sweeps", path=f"file://{REPO_ROOT}")
