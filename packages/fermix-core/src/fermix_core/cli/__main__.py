"""``python -m fermix_core.cli`` is the same as the ``fermix`` script."""

import sys

from fermix_core.cli.entry import main

sys.exit(main())
