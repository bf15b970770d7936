"""Where the GPU time goes: a profiler capture under load and the trace's reading."""
