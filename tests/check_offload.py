#!/usr/bin/python3
"""check_offload.py -- `make offload-check` (part of `make test`): a real
decoder generating through the server gives what it gives alone.

Starts the server ($ATTN_SERVER, default build/attention-server) as `make
run` starts it -- from the repository's root, its default settings -- on a
free loopback port, and runs examples/offload/generate.py against it, each
run a batch of 8 prompts of different lengths and 64 new tokens, with the
attention in the process (PyTorch) and on the server (one v2 binary request
per layer per token for the whole batch), for each cache dtype and both
local kernels; every run must give the same tokens and logits within its
tolerance (generate.py's RTOL: 1e-4 with an FP32 cache), else generate.py
exits non-zero. Then runs the sh blocks of docs/offload.md that run the
example (tests/check_docs.py skips them: they need python3-torch, which
`make run` does not install), with ATTN_PORT set to the server's port.
Afterwards the server must hold no sequence (every run ended all of its
sequences, every layer: GET /metrics), and it must exit 0 on SIGTERM with
no sanitizer report in its log.

Exits 1 on any failure. Usage: tests/check_offload.py
"""
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import check_docs  # its way of stopping the server and reading its log

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVER = os.path.abspath(os.path.join(ROOT, os.environ.get("ATTN_SERVER", "build/attention-server")))
WORK = os.path.join(ROOT, "build", "offload-check")
GENERATE = os.path.join(ROOT, "examples", "offload", "generate.py")
DOC = os.path.join(ROOT, "docs", "offload.md")

# 8 prompts of 3 to 40 tokens, 64 new tokens (generate.py's defaults), a
# model of 4 layers, H 8, Hkv 2, d 32
RUNS = [
    ["--cache-dtype", "FP32"],
    ["--cache-dtype", "FP32", "--local-kernel", "grouped"],
    ["--cache-dtype", "FP16"],
    ["--cache-dtype", "BF16"],
    # multi-query attention, another head size, prompts of one token
    ["--cache-dtype", "FP32", "--layers", "3", "--heads", "4", "--kv-heads", "1",
     "--head-dim", "64", "--prompt-lengths", "1:9", "--seed", "7"],
]


def start_server():
    os.makedirs(WORK, exist_ok=True)
    if not os.access(SERVER, os.X_OK):
        sys.exit(f"check_offload: {SERVER} is missing: make build/attention-server")
    logpath = os.path.join(WORK, "server.log")
    log = open(logpath, "wb")
    env = dict(os.environ)
    env.pop("ATTN_PORT", None)
    proc = subprocess.Popen([SERVER, "--port", "0", "--bind", "127.0.0.1"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline, port = time.time() + 20, None
    while port is None and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(logpath).read())
        port = int(m.group(1)) if m else None
    while port is not None and time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2):
                return proc, port, logpath
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    proc.kill()
    sys.exit(f"check_offload: the server did not start or get ready:\n{open(logpath).read()}")


def doc_blocks():
    """The sh blocks of docs/offload.md that run examples/offload/."""
    text = open(DOC, encoding="utf-8").read()
    return [b for b in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
            if "examples/offload/" in b]


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        m = re.search(rf"^{name} (\S+)$", r.read().decode(), re.M)
    return float(m.group(1)) if m else None


def main():
    proc, port, logpath = start_server()
    failures, url = [], f"http://127.0.0.1:{port}"
    try:
        for args in RUNS:
            cmd = [sys.executable, GENERATE, "--url", url, "--backend", "both", "--show", "0",
                   *args]
            print("check_offload: generate.py " + " ".join(args), flush=True)
            r = subprocess.run(cmd, cwd=ROOT)
            if r.returncode:
                failures.append(f"generate.py {' '.join(args)}: exit status {r.returncode}")
        blocks = doc_blocks()
        if not blocks:
            failures.append("docs/offload.md: no sh block runs examples/offload/")
        for i, block in enumerate(blocks):
            print(f"check_offload: docs/offload.md, block {i + 1} of {len(blocks)}", flush=True)
            r = subprocess.run(["bash", "-c", "set -e -o pipefail\n" + block], cwd=ROOT,
                               env=dict(os.environ, ATTN_PORT=str(port)))
            if r.returncode:
                failures.append(f"docs/offload.md block {i + 1}: exit status {r.returncode}:\n"
                                + block)
        for name in ("attention_sequences_active", "attention_sequence_bytes"):
            value = metric(port, name)
            if value != 0:
                failures.append(f"after the runs the server's {name} is {value}, not 0: a "
                                f"sequence was not ended")
    finally:
        check_docs.stop_server(proc, logpath, failures)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(f"offload-check: {len(RUNS)} runs and the doc's examples, "
          f"{'ok' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
