"""Starts, says on stderr why it cannot serve, and never answers anything,
not even hello: an adapter that never becomes ready (its port taken, its
database locked)."""

import sys
import time

print("fake: cannot listen on 127.0.0.1:4096: address in use", file=sys.stderr, flush=True)
time.sleep(3600)
