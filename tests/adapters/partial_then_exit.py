"""Writes half a response to the first request after hello, then exits."""

import os

from _fake import serve, write


def half(request):
    write(b'{"rid": %d, "ok": true, "res' % request["rid"])
    os._exit(0)


serve(half)
