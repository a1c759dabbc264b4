"""One module per `twin` verb (listed with its help line in `twin.cli.main.VERBS`).

Each module defines `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`, and
imports what it uses only; adding a verb is adding a module and its line in `VERBS`.
"""
