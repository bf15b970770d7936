"""Where dsv4tui keeps its files (platformdirs), with env overrides for tests."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_config_path, user_data_path

APP = "dsv4tui"


def config_file() -> Path:
    return config_choice()[0]


def config_choice(given: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The config file and who named it: ``--config`` (``given``), ``DSV4TUI_CONFIG``, or
    ``default`` (platformdirs' user config dir). A file someone named must exist; only the
    default one may be missing (defaults apply)."""
    if given:
        return Path(given).expanduser(), "--config"
    env = os.environ.get("DSV4TUI_CONFIG")
    if env:
        return Path(env).expanduser(), "DSV4TUI_CONFIG"
    return user_config_path(APP) / "config.toml", "default"


def data_dir() -> Path:
    env = os.environ.get("DSV4TUI_DATA_DIR")
    path = Path(env).expanduser() if env else user_data_path(APP)
    path.mkdir(parents=True, exist_ok=True)
    return path


def store_file() -> Path:
    return data_dir() / "runs.sqlite3"


def agent_build_dir() -> Path:
    path = data_dir() / "agent"
    path.mkdir(parents=True, exist_ok=True)
    return path


def local_agent_state_dir() -> Path:
    """The agent's cache dir when the agent runs on this machine (host ``local``)."""
    path = data_dir() / "local-agent"
    path.mkdir(parents=True, exist_ok=True)
    return path
