"""``python impls/sqlite_inbox``: run the adapter."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adapter import main  # noqa: E402

main()
