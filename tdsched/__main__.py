"""``python -m tdsched ...``: the ``tdsched`` command, for environments whose scripts
folder is not on PATH (e.g. ``python -m tdsched run matmul_x86``)."""

import sys

from tdsched.schedules.cli.main import main

sys.exit(main())
