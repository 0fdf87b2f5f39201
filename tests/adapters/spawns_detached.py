"""Starts two helpers that leave its process group, as a server launcher or a
daemon would: one in a session of its own, one that forks twice (its parent
exits at once, so it is nobody's child); then never answers the first request
after hello. Their process ids go to stderr."""

import os
import subprocess
import sys
import time

from _fake import serve

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]

helper = subprocess.Popen(SLEEP, start_new_session=True)
print(f"fake: helper {helper.pid}", file=sys.stderr, flush=True)

middle = os.fork()
if middle == 0:
    os.setsid()
    daemon = subprocess.Popen(SLEEP)
    print(f"fake: daemon {daemon.pid}", file=sys.stderr, flush=True)
    os._exit(0)
os.waitpid(middle, 0)


def hang(request):
    time.sleep(3600)


serve(hang)
