"""Exits without answering the first request after hello (no failpoint asked)."""

import os
import sys

from _fake import serve


def die(request):
    print("fake: giving up on", request["op"], file=sys.stderr, flush=True)
    os._exit(7)


serve(die)
