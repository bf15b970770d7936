"""The agent: runs next to the GPUs. Stdlib plus bundled pure-Python deps only (Python >= 3.9)."""
