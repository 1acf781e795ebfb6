"""``python -m msh.cli``: the ``msh`` command."""

import sys

from msh.cli import main

sys.exit(main())
