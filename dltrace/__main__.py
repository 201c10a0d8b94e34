"""``python -m dltrace``: the ``dltrace`` command (as ``python -m dltrace.cli``)."""

import sys

from dltrace.cli import main

sys.exit(main())
