"""What runs beside the GPUs and the server: telemetry, the server's start/stop/status, its logs, adoption, the host's processes."""
