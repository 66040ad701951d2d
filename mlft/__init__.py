"""mlft: multilingual fine-tuning and language-confusion mitigation."""

__version__ = "0.1.0"
