"""A scripted OpenAI-compatible teacher for benches and demos (not for tests: those use the
Rust loopback server in ksmith-teacher).

    python3 scripts/scripted_teacher.py --answers data/gpu-tasks/answers [--port 0]
        [--latency 2-20] [--seed 0]
    python3 scripts/scripted_teacher.py --answers data/corpus-answers   (the sample corpus)

Serves `POST /v1/chat/completions`. The task is recognised by a `TASK:<name>` marker in the
prompt (the reference programs of data/gpu-tasks carry one in their docstring), or, for tasks
made from crawled code, by `answers/<name>/match`: a regular expression searched in the prompt
(the first folder in name order whose expression is found). The k-th request for a task gets
`answers/<name>/<k mod n>.py`: fenced as Python when it is code, as it is otherwise (a garbage
answer); a prompt of no known task gets a sentence without code. Prints `{"url": ...}` once
listening.

`--latency A-B` (seconds, or one number) makes every answer wait a time drawn uniformly from
[A, B], as a real model takes to write one: the k-th request of a task waits the same time in
every run with the same `--seed` (drawn from the seed, the task and k), whatever the order in
which requests arrive; requests wait side by side (one thread each). `--variant-pattern` maps a
task variant's name to its answers folder (`TASK:row_softmax_v3` is answered from
`row_softmax/`), so benches can generate many variants of the same problems. `--distinct` ends
every code answer with a comment naming the task and the request's number, so no two answers
are the same program (a real teacher's rarely are): each is evaluated, and compiled, afresh
instead of being recorded as a duplicate of an earlier step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_latency(text: str) -> tuple[float, float]:
    """`"A-B"` or `"A"` (seconds, A <= B, both >= 0) as a pair."""
    low, _, high = text.partition("-")
    try:
        pair = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--latency: expected seconds `A` or `A-B`, got {text!r}") from None
    if not (0 <= pair[0] <= pair[1]):
        raise argparse.ArgumentTypeError(f"--latency: need 0 <= A <= B, got {text!r}")
    return pair


def latency_of(seed: int, task: str, k: int, bounds: tuple[float, float]) -> float:
    """The wait before the k-th answer for `task`: uniform in `bounds`, drawn from (seed, task, k)."""
    if bounds[1] <= 0:
        return 0.0
    key = hashlib.sha256(f"{seed}:{task}:{k}".encode()).digest()
    return random.Random(key).uniform(*bounds)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=parse_latency, default=(0.0, 0.0), help="seconds per answer: A or A-B")
    ap.add_argument("--seed", type=int, default=0, help="seed of the latencies")
    ap.add_argument("--distinct", action="store_true", help="make every code answer a distinct program")
    ap.add_argument(
        "--variant-pattern",
        default=r"^(.*)_v\d+$",
        help="regular expression whose first group is the answers folder of a task variant's name",
    )
    a = ap.parse_args()
    variant = re.compile(a.variant_pattern)
    answers: dict[str, list[str]] = {}
    patterns: list[tuple[str, re.Pattern]] = []
    for task in sorted(os.listdir(a.answers)):
        d = os.path.join(a.answers, task)
        if not os.path.isdir(d):  # a README beside the tasks
            continue
        files = sorted(f for f in os.listdir(d) if f.endswith(".py"))
        answers[task] = [open(os.path.join(d, f)).read() for f in files]
        if os.path.exists(os.path.join(d, "match")):
            patterns.append((task, re.compile(open(os.path.join(d, "match")).read().strip())))

    def recognise(prompt: str) -> str | None:
        m = re.search(r"TASK:(\w+)", prompt)
        if m:
            return m.group(1)
        return next((task for task, pattern in patterns if pattern.search(prompt)), None)

    counts: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
            task = recognise(prompt)
            folder = task
            if task is not None and task not in answers:
                m = variant.match(task)
                folder = m.group(1) if m else task
            with lock:
                k = counts.get(task or "", 0)
                counts[task or ""] = k + 1
            time.sleep(latency_of(a.seed, task or "", k, a.latency))
            if folder not in answers:
                text = "I do not know this task."
            else:
                code = answers[folder][k % len(answers[folder])]
                if code.lstrip().startswith(("import", "from", "#")):
                    if a.distinct:
                        code = code.rstrip("\n") + f"\n\n# scripted answer {k} for {task}\n"
                    text = f"```python\n{code}```\n"
                else:
                    text = code
            reply = {
                "id": "scripted",
                "object": "chat.completion",
                "model": "scripted-teacher",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}/v1"}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
