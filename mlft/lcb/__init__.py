"""The Language Confusion Benchmark: data, language ID, metrics."""
