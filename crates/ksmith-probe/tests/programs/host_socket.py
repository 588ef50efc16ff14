import os
import socket
import torch
import torch.nn as nn

PATH = os.environ.get("KSMITH_TEST_SOCKET", "/tmp/ksmith-probe-socket")
ABSTRACT = "\0" + os.path.basename(PATH)


class Model(nn.Module):
    def forward(self, x):
        reached = []
        failures = []
        for address in (PATH, ABSTRACT):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(2)
                s.connect(address)
                s.sendall(b"leak")
                reached.append(repr(address))
            except OSError as e:
                failures.append(f"{address!r}: {e.strerror}")
            finally:
                s.close()
        if reached:
            return x  # escaped: the host's listener got data
        raise RuntimeError("blocked: " + "; ".join(failures))


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
