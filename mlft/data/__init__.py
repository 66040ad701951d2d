"""Training data: mix files, sources (hub, local, seed), normalisation, decontamination and statistics."""

from mlft.data.mix import MixConfig, build_mix, load_mix

__all__ = ["MixConfig", "build_mix", "load_mix"]
