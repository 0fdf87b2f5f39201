"""Answers ``create`` properly and, in the same write, a second line nobody
asked for."""

import json

from _fake import serve, write


def twice(request):
    answer = {"rid": request["rid"], "ok": True, "result": {"session": request.get("session", "")}}
    write(json.dumps(answer).encode() + b'\n{"rid": 999, "ok": true, "result": {}}\n')


serve(twice)
