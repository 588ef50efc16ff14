import torch
import torch.nn as nn


class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt, memory):
        tgt = self.norm1(tgt + self.dropout(self.self_attn(tgt, tgt, tgt, need_weights=False)[0]))
        tgt = self.norm2(tgt + self.dropout(self.cross_attn(tgt, memory, memory, need_weights=False)[0]))
        return self.norm3(tgt + self.dropout(self.linear2(torch.relu(self.linear1(tgt)))))


class Model(DecoderLayer):
    pass


def get_inputs():
    return [torch.rand([4, 4, 4]), torch.rand([4, 4, 4])]


def get_init_inputs():
    return [4, 4, 4]
