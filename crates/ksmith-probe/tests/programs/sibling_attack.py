import os
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        seen, reached = set(), []
        until = time.monotonic() + 6.0
        while time.monotonic() < until:
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                seen.add(pid)
                try:
                    for fd in os.listdir(f"/proc/{pid}/fd"):
                        try:
                            with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                                f.write('{"status": "ok", "forged": true}\n')
                            reached.append(f"{pid}/fd/{fd}")
                        except OSError:
                            pass
                except OSError:
                    pass
                try:
                    with open(f"/proc/{pid}/cwd/forged.txt", "w") as f:
                        f.write("forged")
                    reached.append(f"{pid}/cwd")
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"isolated: saw processes {sorted(seen)}, reached {reached}")


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
