"""Launchers: what runs a launch profile's argv lists somewhere other than one host's agent
(the SSH fan-out over several hosts lives in core/nodes; a Slurm job in ``slurm``)."""
