"""The core the CLI and the dashboard share (never imports textual): campaigns run by a
host-side runner and collected from its journal, the single sweep as a one-variant campaign,
what a run really ran, comparison and export of stored runs."""
