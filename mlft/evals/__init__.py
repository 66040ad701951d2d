"""The one home for evaluation: suite files (`suite.py`), the kinds and their contract (`registry.py`), the
runner (`runner.py`), and the kinds themselves (`lcb.py` with its suite keys in `lcb_options.py`, `multisense/`,
`polyglot/`)."""
