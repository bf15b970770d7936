"""Every test gets its own config file, data dir and HOME: nothing touches the user's files."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    config = tmp_path / "config.toml"
    config.touch()  # a config file named by DSV4TUI_CONFIG must exist (empty: every default)
    monkeypatch.setenv("DSV4TUI_CONFIG", str(config))
    monkeypatch.setenv("DSV4TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home
