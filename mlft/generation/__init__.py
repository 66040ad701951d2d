"""Generation: model resolution, backends, decoding, prompting, completions files."""
