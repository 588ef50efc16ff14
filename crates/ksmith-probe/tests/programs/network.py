import os
import socket
import torch
import torch.nn as nn

PORT = int(os.environ.get("KSMITH_TEST_PORT", "1"))


class Model(nn.Module):
    def forward(self, x):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
        s.sendall(b"leak")
        return x


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
