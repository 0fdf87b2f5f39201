"""Never answers the first request after hello."""

import time

from _fake import serve


def hang(request):
    time.sleep(3600)


serve(hang)
