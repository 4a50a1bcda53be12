# SPDX-License-Identifier: BSD-3-Clause
"""te_client.py -- a client of the TCP echo server (tcp_echo.h), for the
shell tests that drive it one request at a time (tcp_keeper_lost.sh,
keeper_life.sh)."""
import socket
import struct
import sys
import time

TE_REQ = 0x51524554
TE_QUIT = 0xffffffff


def dial(port):
    """A connection to the server on 127.0.0.1:port, tried for 10 s."""
    for _ in range(200):
        try:
            return socket.create_connection(('127.0.0.1', port), timeout=20)
        except OSError:
            time.sleep(0.05)
    sys.exit('cannot connect')


def req(s, cid, seq):
    """One empty request; the answer's count, or 'EOF'."""
    s.sendall(struct.pack('<IIQII', TE_REQ, cid, seq, 0, 0))
    b = b''
    while len(b) < 48:
        x = s.recv(48 - len(b))
        if not x:
            return 'EOF'
        b += x
    return struct.unpack('<IIQQQQII', b)[3]
