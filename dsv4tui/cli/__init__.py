"""One module per CLI command group; see ``dsv4tui.main``."""
