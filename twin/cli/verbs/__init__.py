"""One module per `twin` verb.

Each module defines `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`; the CLI
finds them by name, so adding a verb is adding a module.
"""
