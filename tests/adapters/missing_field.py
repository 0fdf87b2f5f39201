"""Answers a prompt with a receipt that lacks ``admitted_seq``."""

from _fake import respond, serve


def receipt(request):
    respond(
        request["rid"],
        {
            "input": "in-1",
            "session": request["session"],
            "type": "user",
            "data": {"text": request["text"], "files": [], "agents": [], "metadata": {}},
            "delivery": "steer",
            "time": request["now"],
        },
    )


serve(receipt)
