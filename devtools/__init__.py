"""Development tools of the source tree, beside measurements/ (not in the wheel: pyproject packages `mlft*` only).

The machinery that renders the project's own documentation numbers from its results files lives here:
devtools/blocks.py (the `<!-- results:NAME ... -->` blocks and their views), devtools/lift.py (a page's hand-typed
numbers into a results file), devtools/seeds.py (the demo's story over training seeds) and the command over them,
`python -m devtools.results FILE ...` (run from the repository's root). What a results file holds and how `mlft
demo` writes one stays in the library (mlft/reports/results.py).
"""
