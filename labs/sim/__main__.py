"""``python -m labs.sim EXPERIMENT.yaml [-o OUT.json] [--seed N]``."""

import sys

from labs.sim.cli import main

sys.exit(main(sys.argv[1:]))
