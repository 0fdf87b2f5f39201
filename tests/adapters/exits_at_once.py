"""Dies on start, before reading anything, as an adapter whose database is missing."""

import sys

print("fake: cannot open /nonexistent/inbox.db", file=sys.stderr)
sys.exit(1)
