"""Campaigns that run on the host by themselves: the runner, its journal, the host's one-load-generator lock."""
