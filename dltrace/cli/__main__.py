"""``python -m dltrace.cli``: the ``dltrace`` command."""

import sys

from dltrace.cli import main

sys.exit(main())
