"""How the console reaches a host: SSH or local sessions, the agent on it, the supervisor."""
