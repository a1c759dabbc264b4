"""`twin schema`: the JSON Schema of fabric.yaml, for editors."""

from __future__ import annotations

import argparse

from twin.intent import fabric as intent

HELP = "print the JSON Schema of fabric.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """This verb takes no arguments."""


def run(args: argparse.Namespace) -> int:
    """Print the schema."""
    print(intent.schema())
    return 0
