"""The load generator: sanity prompts, sweeps (levels, rates, goodput), the canary, and the numbers they give."""
