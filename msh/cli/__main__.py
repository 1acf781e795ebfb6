"""``python -m msh.cli``: the ``msh`` command."""

import sys

from msh.cli import main

if __name__ == "__main__":  # not when a worker process (msh export's) imports the main module again
    sys.exit(main())
