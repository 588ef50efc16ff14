import json
import os
import sys
import torch
import torch.nn as nn

SECRET = os.environ.get("KSMITH_TEST_SECRET", "/tmp/ksmith-probe-secret")


def bound_ancestors(folder):
    """Names under `folder` that lead to the Python environment (what the sandbox shows)."""
    names = set()
    for p in (sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)):
        if p.startswith(folder + "/"):
            names.add(p[len(folder) + 1 :].split("/")[0])
    return names


class Model(nn.Module):
    def forward(self, x):
        seen = {}
        for path in ("/etc/shadow", SECRET):
            try:
                with open(path) as f:
                    seen[path] = "read: " + f.read(40)
            except OSError as e:
                seen[path] = e.strerror
        for folder in ("/root", "/home"):
            try:
                extra = sorted(set(os.listdir(folder)) - bound_ancestors(folder))
                seen[folder] = "lists: " + " ".join(extra) if extra else "nothing else"
            except OSError as e:
                seen[folder] = e.strerror
        others = []
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                for what in ("cmdline", "environ"):
                    try:
                        with open(f"/proc/{pid}/{what}", "rb") as f:
                            others.append(f"{pid}/{what}: {f.read(60)!r}")
                    except OSError:
                        pass
        seen["other processes"] = others
        raise RuntimeError("SNOOP " + json.dumps(seen, sort_keys=True))


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
