"""serverproc.py -- start an attention-server on a free loopback port for
the Python benchmarks (reduced_weights.py, sequences_e2e.py, batch_e2e.py),
and the v2 binary body they send."""
import json
import re
import subprocess
import sys
import tempfile
import time


def start(binary, flags, who):
    """Runs BINARY with FLAGS; returns (process, port). Exits naming WHO if it does not start."""
    log = tempfile.NamedTemporaryFile(prefix=who + "-", suffix=".log", delete=False)
    p = subprocess.Popen([binary, "--port", "0", "--bind", "127.0.0.1", *flags],
                         stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(400):
        time.sleep(0.05)
        m = re.search(r"listening on http://[0-9.]+:(\d+)", open(log.name).read())
        if m:
            return p, int(m.group(1))
    p.kill()
    sys.exit(f"{who}: the server did not start:\n" + open(log.name).read())


def v2_binary(arrays, params):
    """A v2 infer body with binary inputs: ARRAYS [(name, datatype, numpy array)]
    in that order, PARAMS the request's parameters. Returns (body, header length)."""
    inputs, raw = [], []
    for name, dtype, a in arrays:
        inputs.append({"name": name, "datatype": dtype, "shape": list(a.shape),
                       "parameters": {"binary_data_size": a.nbytes}})
        raw.append(a.tobytes())
    head = json.dumps({"inputs": inputs, "parameters": params}, separators=(",", ":")).encode()
    return head + b"".join(raw), len(head)
