"""One module per `mlft` subcommand: `add_parser(subparsers)` + `run(args)`; the library is imported inside `run`
(building the parser imports nothing heavy: mlft/cli.py)."""
