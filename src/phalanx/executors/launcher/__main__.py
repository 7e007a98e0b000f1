"""``python -m phalanx.executors.launcher``: see ``agent``."""

import sys

from phalanx.executors.launcher.agent import main

main(sys.argv[1:])
