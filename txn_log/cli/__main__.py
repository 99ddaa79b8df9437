"""``python -m txn_log.cli``: the same as the ``txnlog`` command."""

import sys

from txn_log.cli import main

sys.exit(main())
