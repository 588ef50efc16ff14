import os
import torch
import torch.nn as nn

CHUNK = 512 << 10  # below the per-file size limit (the output cap)


class Model(nn.Module):
    def forward(self, x):
        written = 0
        block = b"\xab" * CHUNK
        try:
            for i in range(1 << 20):
                where = "/dev/shm" if i % 2 else "."
                with open(os.path.join(where, f"fill-{i}"), "wb") as f:
                    f.write(block)
                written += CHUNK
        except OSError as e:
            raise RuntimeError(f"filled {written >> 20} MiB: {e.strerror}") from None
        return x


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
