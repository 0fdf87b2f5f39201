"""Starts a helper process of its own (as a wrapper script or a server would),
then never answers the first request after hello."""

import subprocess
import sys
import time

from _fake import serve

helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(f"fake: helper {helper.pid}", file=sys.stderr, flush=True)


def hang(request):
    time.sleep(3600)


serve(hang)
