"""Fails the first request after hello with an error code the protocol lacks."""

import json

from _fake import serve, write


def fail(request):
    error = {"code": "kaboom", "message": "the flux capacitor"}
    write(json.dumps({"rid": request["rid"], "ok": False, "error": error}).encode() + b"\n")


serve(fail)
