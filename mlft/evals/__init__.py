"""The one home for evaluation: suite files (`suite.py`), the kinds and their contract (`registry.py`), the
runner (`runner.py`), and the kinds themselves (`lcb.py`, `multisense/`, `polyglot/`)."""
