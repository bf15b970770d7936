"""dsv4tui: a control room for bringing up LLM servers on GPU hosts.

Kept import-free on purpose: the agent zipapp ships this package's `agent/` next to this
file and must not pull textual, asyncssh or pydantic in.
"""

__version__ = "0.1.0"
