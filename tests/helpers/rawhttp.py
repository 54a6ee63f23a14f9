#!/usr/bin/python3
"""rawhttp.py PORT — sends stdin as is to 127.0.0.1:PORT and prints the reply (the raw
bytes, until the server closes or 3 s pass): for requests curl cannot send."""
import socket
import sys

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(sys.stdin.buffer.read())
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    pass
sys.stdout.buffer.write(out)
