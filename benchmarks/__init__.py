"""Long-running benchmarks; they print figures and ratios, never assert timings."""
