"""The `twin` command: a thin layer over the library, one module per verb in `twin.cli.verbs`.

Every error the library raises as `TwinError` is printed as one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from twin.cli import verbs as commands
from twin.errors import TwinError


def parser() -> argparse.ArgumentParser:
    """The argument parser of every verb."""
    top = argparse.ArgumentParser(
        prog="twin",
        description="Digital twin of AI-cluster leaf-spine fabrics (RoCEv2, SONiC, FRR).",
    )
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        name = info.name.replace("_", "-")
        sub = verbs.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `twin` console script."""
    args = parser().parse_args(argv)
    if args.verb is None:
        parser().print_help()
        return 2
    try:
        code: int = args.func(args)
    except TwinError as exc:
        print(f"twin: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"twin: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
