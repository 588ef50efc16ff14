# Looks for everything a sandboxed candidate must not reach and reports what it found, instead of
# running (the sandbox tests and scripts/sandbox_gpu_smoke.py put their listeners' addresses and
# a path outside the candidate's folder in the constants below; run with the static checks off).
import ctypes
import json
import os
import socket
import sys

import torch.nn as nn

PORT = 9
UNIX_SOCKET = "/nonexistent/socket"
ABSTRACT_SOCKET = "\0ksmith-snoop"
OUTSIDE = "/nonexistent/escaped"
SECRET_MARK = "ksmith-test-secret"


def snoop() -> dict:
    seen = {}
    try:
        open("/etc/shadow").read()
        seen["/etc/shadow"] = "read"
    except OSError as e:
        seen["/etc/shadow"] = e.strerror
    # The sandbox's view: the Python environment and the runtime package (on PYTHONPATH).
    package = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    prefixes = (sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), *package)
    for folder in ("/root", "/home"):
        try:
            bound = {p[len(folder) + 1 :].split("/")[0] for p in prefixes if p.startswith(folder + "/")}
            seen[folder] = sorted(set(os.listdir(folder)) - bound)
        except OSError as e:
            seen[folder] = e.strerror
    seen["secrets"] = [k for k, v in os.environ.items() if SECRET_MARK in v]
    seen["other processes"] = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    seen["/dev"] = sorted(os.listdir("/dev"))
    for name, family, address in (
        ("loopback tcp", socket.AF_INET, ("127.0.0.1", PORT)),
        ("internet tcp", socket.AF_INET, ("1.1.1.1", 53)),
        ("unix socket", socket.AF_UNIX, UNIX_SOCKET),
        ("abstract socket", socket.AF_UNIX, ABSTRACT_SOCKET),
    ):
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.settimeout(3)
            s.connect(address)
            s.sendall(b"leak")
            seen[name] = "connected"
        except OSError as e:
            seen[name] = e.strerror or str(e)
        finally:
            s.close()
    try:
        with open(OUTSIDE, "w") as f:
            f.write("escaped")
        seen["write outside"] = "wrote"
    except OSError as e:
        seen["write outside"] = e.strerror
    libc = ctypes.CDLL(None, use_errno=True)
    for name, call in (
        ("user namespace", lambda: libc.unshare(0x10000000)),
        ("mount", lambda: libc.mount(b"tmpfs", b"/usr", b"tmpfs", 0, None)),
        ("ptrace", lambda: libc.ptrace(0, 0, 0, 0)),
    ):
        seen[name] = "done" if call() == 0 else os.strerror(ctypes.get_errno())
    return seen


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("SNOOP " + json.dumps(snoop()))

    def forward(self, x, y):
        return x
