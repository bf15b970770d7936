"""The agent: runs next to the GPUs. Stdlib plus bundled pure-Python deps only (Python >= 3.9).

Four parts (their layering is an import-linter contract in pyproject.toml):

- ``host``: telemetry, the server's start/stop/status, its logs, adoption, the host's
  processes, which server a benchmark measures, the host's one-load-generator lock;
- ``bench``: the load generator (sanity, sweeps, the canary) and the numbers it gives;
- ``campaign``: the unattended runner, its journal;
- ``kernels``: a profiler capture under load and the trace's reading.

``protocol`` (the events), ``commands`` (the command line), ``detach`` and ``state`` are
shared by all four.
"""
