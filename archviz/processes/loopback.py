"""Every torch.distributed group archviz creates listens on the loopback interface, never on the machine's network.

Gloo opens a listening socket for its pairs when a group is made, even a group of one process: on the address the
host name resolves to (a LAN address on many hosts), or on each interface that `GLOO_SOCKET_IFNAME` names. Anyone on
that network could then connect to a process that is running the user's model code. archviz's groups are never
meant to span machines (the probe's ranks and the one-process group all run here), so while archviz makes one,
`GLOO_SOCKET_IFNAME` names the loopback interface, whatever the user's environment says. The rendezvous itself uses
no socket (a FileStore in a private folder, or an in-memory HashStore).
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from typing import Iterator

GLOO_IFNAME = "GLOO_SOCKET_IFNAME"


def loopback_interface() -> str:
    """The loopback interface's name: `lo` on Linux, `lo0` on macOS and the BSDs."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    for name in names:
        if name == "lo" or name.startswith("lo0"):
            return name
    return next((n for n in names if n.startswith("lo")), "lo")


@contextmanager
def on_loopback() -> Iterator[None]:
    """While the block runs, a gloo group made in this process listens on the loopback interface only; the user's
    `GLOO_SOCKET_IFNAME` is put back after."""
    before = os.environ.get(GLOO_IFNAME)
    os.environ[GLOO_IFNAME] = loopback_interface()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(GLOO_IFNAME, None)
        else:
            os.environ[GLOO_IFNAME] = before


__all__ = ["GLOO_IFNAME", "loopback_interface", "on_loopback"]
