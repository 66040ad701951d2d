"""The public Python API's room (docs/api.md): one module per verb (score, evaluate, train, compare, runs for
load_run, tables for the mitigation tables, data for the LCB files) and results.py for the typed results. Users
import `mlft` and use the names it lists (`mlft.__all__`); mlft/__init__.py imports these modules lazily."""
