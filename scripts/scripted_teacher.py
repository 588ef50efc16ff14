"""A scripted OpenAI-compatible teacher for benches and demos (not for tests: those use the
Rust loopback server in ksmith-teacher).

    python3 scripts/scripted_teacher.py --answers data/gpu-tasks/answers [--port 0]
    python3 scripts/scripted_teacher.py --answers data/corpus-answers   (the sample corpus)

Serves `POST /v1/chat/completions`. The task is recognised by a `TASK:<name>` marker in the
prompt (the reference programs of data/gpu-tasks carry one in their docstring), or, for tasks
made from crawled code, by `answers/<name>/match`: a regular expression searched in the prompt
(the first folder in name order whose expression is found). The k-th request for a task gets
`answers/<name>/<k mod n>.py`: fenced as Python when it is code, as it is otherwise (a garbage
answer); a prompt of no known task gets a sentence without code. Prints `{"url": ...}` once
listening.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
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
            if task not in answers:
                text = "I do not know this task."
            else:
                with lock:
                    k = counts.get(task, 0)
                    counts[task] = k + 1
                code = answers[task][k % len(answers[task])]
                text = f"```python\n{code}```\n" if code.lstrip().startswith(("import", "from", "#")) else code
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
