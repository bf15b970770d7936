"""A simulated SGLang server and simulated GPUs, for ``dsv4tui demo`` and the tests.

``python -m dsv4tui.sim.sglang ARGS`` behaves like ``python -m sglang.launch_server ARGS`` from
outside: SGLang-format logs, the same startup phases, the OpenAI API on uvicorn, SIGTERM drain.
"""
