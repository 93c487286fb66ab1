"""``python -m op_plugin._simulator``: same as ``python -m op_plugin._simulator.hosting.install``."""

import sys

from .hosting.install import main

sys.exit(main())
