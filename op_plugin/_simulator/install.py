"""``python -m op_plugin._simulator.install [TARGET_DIR]``: unpack the pinned torch-npu for the simulator."""

import sys

from ._install import main

if __name__ == "__main__":
    sys.exit(main())
