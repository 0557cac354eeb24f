"""beam-sft: data pipeline and SFT recipe for Beam Harmony models."""

__version__ = "0.1.0"
