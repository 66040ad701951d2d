"""One module per `mlft` subcommand: `add_parser(subparsers)` + `run(args)`."""
