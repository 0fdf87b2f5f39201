"""Answers the first request after hello with a line that is not JSON."""

from _fake import serve, write

serve(lambda request: write(b'{"rid": %d, "ok": tru\n' % request["rid"]))
