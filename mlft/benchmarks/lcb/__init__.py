"""The Language Confusion Benchmark: data, metrics, the official scoring, the guard and a second judge (no model
code)."""
