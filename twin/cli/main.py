"""The `twin` command: a thin layer over the library, one module per verb in `twin.cli.verbs`.

The verbs and their one-line help are listed here, so that `twin --help` imports none of
them and `twin VERB` imports only its own module (which imports only what it uses). Every
error the library raises as `TwinError` is printed as one line on stderr, exit code 2; an
internal error (a bug: a validator or verb crashed) is one line too, exit code 3, never a
verdict (`EXIT_CODES`). SIGINT and SIGTERM stop a verb in order (`twin.cli.signals`), exit
130 or 143.
"""

from __future__ import annotations

import argparse
import importlib
import keyword
import os
import sys
import traceback
from collections.abc import Iterable, Sequence

from twin.cli import signals
from twin.errors import InternalError, TwinError, one_line
from twin.version import version

VERBS = {
    "completion": "print a shell completion script (bash, zsh, fish)",
    "apply": "apply a change file (config and intent edits) to a copy of a lab: a new lab",
    "compare": "compare a run with production telemetry (twin import): pauses, ECN marks, drops",
    "cleanup": "remove leftovers of crashed runs (by lab name or lab directory; without one, all "
    "leftovers)",
    "deploy": "start a live twin of a lab directory (default backend netns: namespaces, veths, "
    "FRR)",
    "destroy": "remove a lab's running twin and everything it created",
    "diff": "review a change: config differences, static verdicts, and with a scenario the "
    "dynamic verdicts and figures that moved",
    "drill": "failure drill: a scenario played once per fault (every link, switch, ...), ranked",
    "exec": "run a command in nodes (vtysh on a switch reaches its FRR): a name, role or pattern",
    "fault": "inject a fault (link, node, daemon, loss, rate) and log the state changes it causes",
    "export": "export a run's counters as each switch's COUNTERS_DB dumps (sonic-db-dump -y)",
    "generate": "design a fabric and write its lab directory",
    "graph": "draw a lab's topology (dot, mermaid, SVG, PNG), optionally with a run's utilisation",
    "import": "import production telemetry (COUNTERS_DB dumps, techsupport, gNMI, Prometheus) "
    "as a run",
    "incident": "write an incident's labs before and after its fix, or reproduce one from "
    "production",
    "inspect": "show a running twin: nodes and addresses, BGP sessions, links and their state",
    "qos-test": "run sonic-mgmt's lossless and QoS tests (PFC, buffers, ECN, watchdog) on a "
    "lab's leaf in the simulator",
    "report": "rebuild the reports (JSON, JUnit, Markdown, plots) of a run from its observations",
    "run": "deploy if needed, play a scenario, validate, report (no arguments: the reference)",
    "schema": "print the JSON Schema of fabric.yaml",
    "show": "print a lab's figures, nodes, links and addresses",
    "sim": "run a packet-level simulation of an experiment file (labs.sim)",
    "validate": "run the static validators on a lab's configs; write JSON, JUnit and Markdown "
    "reports",
}
"""Verb -> its help line (each verb module's `HELP`)."""
INTERNAL = 3
"""Exit code of an internal error (a bug of the tool, not a verdict nor bad input)."""

EXIT_CODES = """exit codes (every verb):
  0  all good: every verdict passed (or not observable), no regression
  1  a verdict failed, or (diff, drill) a regression or a fault worse than the baseline,
     or (deploy) the twin runs but had not converged at --timeout (twin destroy removes it)
  2  bad input: one line naming the file, the key and what is wrong; nothing was started
  3  internal error: one line (--debug or TWIN_DEBUG=1 prints the traceback too)"""


class _Version(argparse.Action):
    """`--version`: the version is read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, help="print the version")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"twin {version()}")
        parser.exit()


def module_of(verb: str) -> str:
    """The module holding a verb."""
    name = verb.replace("-", "_")
    return f"twin.cli.verbs.{name}_" if keyword.iskeyword(name) else f"twin.cli.verbs.{name}"


def parser(arguments_of: Iterable[str] = VERBS) -> argparse.ArgumentParser:
    """The argument parser; the verbs in `arguments_of` get their arguments (their modules
    are imported), the others only their help line."""
    top = argparse.ArgumentParser(
        prog="twin",
        description="Digital twin of AI-cluster leaf-spine fabrics (RoCEv2, SONiC, FRR).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action=_Version)
    top.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at INFO on stderr (the command, its exit code and time)",
    )
    top.add_argument(
        "--debug",
        action="store_true",
        help="log every command and netlink batch a backend runs, with its duration and exit "
        "code (DEBUG); an internal error's traceback",
    )
    top.add_argument(
        "--log-file",
        metavar="PATH",
        help="append the log, down to DEBUG, to PATH (a symbolic link is refused)",
    )
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    wanted = set(arguments_of)
    for name, text in VERBS.items():
        sub = verbs.add_parser(name, help=text, description=text)
        if name in wanted:
            module = importlib.import_module(module_of(name))
            module.add_arguments(sub)
            sub.set_defaults(func=module.run)
    return top


def verb_of(given: Sequence[str]) -> str | None:
    """The verb of a command line: its first word that is neither an option nor the value of
    `--log-file`."""
    words = iter(given)
    for word in words:
        if word == "--log-file":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `twin` console script."""
    given = list(sys.argv[1:] if argv is None else argv)
    verb = verb_of(given)
    args = parser([verb] if verb in VERBS else []).parse_args(given)
    if args.verb is None:
        parser([]).print_help()
        return 2
    if not (args.verbose or args.debug or args.log_file):
        return dispatch(args)
    from twin.cli import logs

    try:
        logs.configure(args.verbose, args.debug, args.log_file)
    except TwinError as exc:
        refuse(str(exc))
        return 2
    except OSError as exc:
        refuse(f"{args.log_file}: {exc.strerror or exc}")
        return 2
    return logs.logged(args.verb, given, lambda: dispatch(args))


def dispatch(args: argparse.Namespace) -> int:
    """Run the verb; its exit code (every error is one line on stderr)."""
    try:
        with signals.orderly():
            code: int = args.func(args)
            sys.stdout.flush()
    except signals.Stopped as stop:
        refuse(stop.message)
        return stop.code
    except BrokenPipeError:
        return quiet_pipe()
    except TwinError as exc:
        refuse(str(exc))
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        refuse(f"{where}{exc.strerror or exc}")
        return 2
    except InternalError as exc:
        refuse(str(exc))
        return INTERNAL
    except Exception as exc:
        if os.environ.get("TWIN_DEBUG") or args.debug:
            traceback.print_exc()
        refuse(str(InternalError(f"twin {args.verb}", exc)))
        return INTERNAL
    return code


def quiet_pipe() -> int:
    """The reader of our output went away (`twin inspect | head`): stop without a word, and
    keep Python from complaining when it flushes stdout at exit. Exit 141, as a shell's
    command killed by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def refuse(message: str) -> None:
    """Print a refusal as one line on stderr."""
    print(f"twin: {one_line(message)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
