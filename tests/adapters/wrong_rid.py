"""Answers the first request after hello with another request's rid."""

from _fake import respond, serve

serve(lambda request: respond(request["rid"] + 41, {}))
