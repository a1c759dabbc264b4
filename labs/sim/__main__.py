"""``python -m labs.sim EXPERIMENT.yaml [-o OUT.json] [--seed N]``: a program, so above the
simulator; its glue is `twin sim run`'s (`twin.cli.verbs.sim`)."""

import sys

from twin.cli.verbs.sim import main

sys.exit(main(sys.argv[1:]))
