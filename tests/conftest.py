"""Shared fixtures. Area fixtures live in tests/plugins/*.py (one module per owner)."""

pytest_plugins = [
    "plugins.env",
    "plugins.ssh_server",
    "plugins.sim",
    "plugins.bench_server",
    "plugins.relay",
    "plugins.campaigns",
    "plugins.slurm",
    "plugins.tiers",
    "pytester",
]
