"""Logs to stdout (instead of stderr) before answering the first request after hello."""

from _fake import respond, serve, write


def chatty(request):
    write(b"Starting server on port 8080...\n")
    respond(request["rid"], {"session": request.get("session", "")})


serve(chatty)
