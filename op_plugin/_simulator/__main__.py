"""``python -m op_plugin._simulator``: same as ``python -m op_plugin._simulator.install``."""

import sys

from .install import main

sys.exit(main())
