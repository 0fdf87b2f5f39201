"""An adapter for a later protocol: its hello says protocol 2."""

from _fake import hello_result, read, respond

request = read()
respond(request["rid"], hello_result(request, protocol=2, features=["streams"]))
read()
