import math

import torch
import torch.nn as nn

from seqkit.base import SeqModule


def init_uniform(params, hidden_size):
    bound = 1.0 / math.sqrt(hidden_size)
    for p in params:
        nn.init.uniform_(p, -bound, bound)


class TinyGRU(SeqModule):
    """A GRU written with Linear layers, unrolled over time."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.x2h = nn.Linear(input_size, 3 * hidden_size)
        self.h2h = nn.Linear(hidden_size, 3 * hidden_size)
        init_uniform(self.parameters(), hidden_size)

    def forward(self, x):
        x = self.check(x)
        b, t, f = x.shape
        h = x.new_zeros(b, self.hidden_size)
        outs = []
        for step in range(t):
            xr, xz, xn = self.x2h(x[:, step]).chunk(3, dim=-1)
            hr, hz, hn = self.h2h(h).chunk(3, dim=-1)
            r = torch.sigmoid(xr + hr)
            z = torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
            outs.append(h)
        return torch.stack(outs, dim=1)


class LSTMEncoder(SeqModule):
    def __init__(self, input_size, hidden_size, num_layers=1, bidirectional=False):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=bidirectional)

    def forward(self, x):
        out, _ = self.lstm(self.check(x))
        return out


class Highway(nn.Module):
    def __init__(self, size, num_layers=1):
        super().__init__()
        self.gates = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
        self.transforms = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])

    def forward(self, x):
        for gate, transform in zip(self.gates, self.transforms):
            g = torch.sigmoid(gate(x))
            x = g * torch.relu(transform(x)) + (1 - g) * x
        return x
