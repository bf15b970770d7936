"""The config file: defaults, the documented example, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4tui.core import config
from dsv4tui.core.errors import ConfigError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings, path = config.load(tmp_path / "nope.toml")
    assert path == tmp_path / "nope.toml"
    assert settings.sweep.levels == [(1, 8), (8, 32), (16, 48)]
    assert settings.sanity.suite()[0].prompt == "What is 17*23? Number only."


def test_documented_example_is_valid() -> None:
    settings, _ = config.load(DOCS / "config.example.toml")
    name, prof = settings.hosts["ct200"].profile()
    assert name == "nvfp4" and prof.moe_runner_backend == "marlin"
    assert len(settings.sanity.suite()) == 2


@pytest.mark.parametrize(("text", "where", "why"), [
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nmoe_runner_backend = "marlinx"\n',
     "hosts.a.profiles.p.moe_runner_backend", "valid: auto, deep_gemm"),
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nspeculative_algorithm = "MTP"\n',
     "speculative_algorithm", "not a speculative algorithm"),
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nextra_args = ["--cuda-graph-max-bs", "8"]\n',
     "extra_args", "--cuda-graph-max-bs-decode"),
    ('[hosts.a]\nsshh = "x"\n', "hosts.a.sshh", "Extra inputs"),
    ("[sweep]\nlevels = [[0, 8]]\n", "sweep.levels", "must be >= 1"),
    ("[sweep]\nlevels = [[8, 4]]\n", "sweep.levels", "n must be at least C"),
    ("[sweep]\nseed = -1\n", "sweep.seed", "greater than or equal to 0"),
    ("theme = \n", "not valid TOML", ""),
])
def test_bad_config_one_line(tmp_path: Path, text: str, where: str, why: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        config.load(path)
    msg = err.value.message
    assert "\n" not in msg and str(path) in msg and where in msg and why in msg
    assert err.value.exit_code == 2
