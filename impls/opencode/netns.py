"""A loopback-only network namespace for the adapter process, entered after
the install (npm needs the network) and before the server starts: the server
is its child and the fake provider a thread of it, so neither can reach
anything but ``lo``. ``unshare(CLONE_NEWNET)`` through ctypes (we are usually
root), ``lo`` brought up by ioctl.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def enter_netns() -> str | None:
    """Enter a new network namespace with ``lo`` up; None, or why it failed."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        return f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, req + b"\0" * 22)[:18])[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP) + b"\0" * 22)
    except OSError as exc:
        return f"cannot bring lo up in the new namespace: {exc}"
    # /proc/self/net/dev is this namespace's view (/sys/class/net is the mounter's).
    with open("/proc/self/net/dev") as f:
        interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    if interfaces != ["lo"]:
        return f"the new namespace has interfaces {interfaces}, not just lo"
    return None
