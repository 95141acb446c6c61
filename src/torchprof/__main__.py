"""``python -m torchprof [options] script.py [args]`` and ``python -m torchprof demo [MODEL]``."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
