#!/usr/bin/python3
"""round_trip.py -- `make bench` (section 4d): a one-row sequence step end
to end against nginx answering a fixed 200, both on this machine, in this run.

The step: v2 binary (Inference-Header-Content-Length), one query row and
one key/value row (H 8, Hkv 2, d 64 on the built-in model: query 512 wide,
key/value 128 wide; identity projections, FP32 cache, need_weights false,
output binary) appended to a sequence restarted (sequence_start) every
RTT_RESTART requests, so its cache stays under that many rows. wrk with one
connection and one thread (keep-alive) sends the requests (bench/step.lua).

The floor: Debian's nginx (worker_processes 1, a config in a temporary
folder on a free loopback port) answering `return 200` with a body of the
step's answer size, to the same requests from the same wrk script (so the
client's work and the bytes on the wire are the same), and to a plain GET.

RTT_RUNS rounds (server, nginx POST, nginx GET, interleaved), RTT_SECONDS
each; the figures are medians over the rounds, with each server's CPU time
(user + system, /proc) per request, which other load on the machine
disturbs less than the round trip. Target: the step's round trip <= 1.3x
nginx's (the POST), as medians (p50; the means, which a loaded machine's
scheduling stalls pull up, beside them).

Usage: bench/round_trip.py SERVER_BINARY [CSV_OUT] [-- SERVER_FLAGS...]
Env: RTT_SECONDS (5), RTT_RUNS (3), RTT_RESTART (256).
"""
import json
import os
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import serverproc

H, HKV, D = 8, 2, 64
SECONDS = int(os.environ.get("RTT_SECONDS", "5"))
RUNS = int(os.environ.get("RTT_RUNS", "3"))
RESTART = int(os.environ.get("RTT_RESTART", "256"))
HERE = os.path.dirname(os.path.abspath(__file__))

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 60s;
    client_body_buffer_size 64k;
    server {{
        listen 127.0.0.1:{port};
        default_type application/octet-stream;
        location / {{ return 200 "{answer}"; }}
    }}
}}
"""


def step_body(start):
    rng = random.Random(30)
    inputs, raw = [], []
    for name, width in (("query", H * D), ("key", HKV * D), ("value", HKV * D)):
        a = struct.pack(f"<{width}f", *(rng.uniform(-1, 1) for _ in range(width)))
        inputs.append({"name": name, "datatype": "FP32", "shape": [1, width],
                       "parameters": {"binary_data_size": len(a)}})
        raw.append(a)
    params = {"num_heads": H, "num_kv_heads": HKV, "head_dim": D, "need_weights": False,
              "binary_data_output": True, "sequence_id": "rtt-step-30"}
    if start:
        params["sequence_start"] = True
    head = json.dumps({"inputs": inputs, "parameters": params},
                      separators=(",", ":")).encode()
    return head + b"".join(raw), len(head)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(tmp, answer_bytes):
    for _ in range(5):
        port = free_port()
        with open(f"{tmp}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(dir=tmp, port=port, answer="x" * answer_bytes))
        p = subprocess.Popen(["nginx", "-p", tmp + "/", "-c", f"{tmp}/nginx.conf",
                              "-e", f"{tmp}/error.log"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            time.sleep(0.05)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
                return p, port
            except OSError:
                if p.poll() is not None:
                    break
        p.kill()
        p.wait()
    sys.exit("round_trip: nginx did not start:\n" + open(f"{tmp}/error.log").read())


def cpu_s(pid):
    """CPU seconds (user + system) process pid has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(port, script, env, pid):
    """(requests/s, mean µs, p50 µs, p99 µs, non-2xx, CPU µs of process pid per
    request) of one wrk -c1 -t1 run."""
    cpu0 = cpu_s(pid)
    cmd = ["wrk", "-t1", "-c1", f"-d{SECONDS}s", "--latency"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{port}/v2/models/attention/infer"],
                         env={**os.environ, **env}, capture_output=True, text=True,
                         check=True).stdout

    def us(v):
        for unit, f in (("us", 1), ("ms", 1e3), ("s", 1e6)):
            if v.endswith(unit):
                return float(v[:-len(unit)]) * f
        return float(v)
    rps = p50 = p99 = None
    bad = 0
    for line in out.splitlines():
        w = line.split()
        if w[:1] == ["Requests/sec:"]:
            rps = float(w[1])
        elif w[:1] == ["50%"]:
            p50 = us(w[1])
        elif w[:1] == ["99%"]:
            p99 = us(w[1])
        elif line.startswith("  Non-2xx"):
            bad = int(w[-1])
    if rps is None or p50 is None:
        sys.exit("round_trip: could not read wrk's output:\n" + out)
    return rps, 1e6 / rps, p50, p99, bad, (cpu_s(pid) - cpu0) / (rps * SECONDS) * 1e6


def main():
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    binary = args[0]
    csv = args[1] if len(args) > 1 else None
    if not shutil.which("nginx") or not shutil.which("wrk"):
        sys.exit("round_trip: nginx and wrk are needed (scripts/deps.sh bench installs them)")
    tmp = tempfile.mkdtemp(prefix="round_trip-")
    for name, start in (("start", True), ("step", False)):
        body, hlen = step_body(start)
        with open(f"{tmp}/{name}.bin", "wb") as f:
            f.write(body)
        with open(f"{tmp}/{name}.hlen", "w") as f:
            f.write(str(hlen))
    server, port = serverproc.start(binary, ["--log-level", "warn", *extra], "round_trip")
    nginx = None
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/attention/infer",
                                     data=open(f"{tmp}/start.bin", "rb").read(),
                                     headers={"Inference-Header-Content-Length":
                                              open(f"{tmp}/start.hlen").read()})
        with urllib.request.urlopen(req) as r:
            answer = r.read()
            timing = r.headers.get("Server-Timing", "")
        nginx, nport = start_nginx(tmp, len(answer))
        env = {"RTT_DIR": tmp, "RTT_RESTART": str(RESTART)}
        script = os.path.join(HERE, "step.lua")
        points = {"step": [], "nginx": [], "nginx_get": []}
        for _ in range(RUNS):
            points["step"].append(wrk(port, script, env, server.pid))
            points["nginx"].append(wrk(nport, script, env, nginx.pid))
            points["nginx_get"].append(wrk(nport, None, env, nginx.pid))
    finally:
        server.terminate()
        server.wait()
        if nginx:
            nginx.terminate()
            nginx.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: [statistics.median(p[i] for p in v) for i in range(6)] for k, v in points.items()}
    print(f"4d. A one-row sequence step against nginx's fixed answer (wrk -c1 -t1, keep-alive, "
          f"{SECONDS}s x {RUNS} rounds, medians)")
    print(f"step: v2 binary, H {H}, Hkv {HKV}, d {D}, FP32 cache restarted every {RESTART} "
          f"steps, {len(step_body(False)[0])} "
          f"bytes in, {len(answer)} out; Server-Timing of the first: {timing}")
    print(f"{'server':<24} {'req/s':>9} {'mean us':>9} {'p50 us':>9} {'p99 us':>9} {'non2xx':>7} "
          f"{'CPU us/req':>11}")
    rows = [("attention-server step", "step"), ("nginx, same requests", "nginx"),
            ("nginx, GET", "nginx_get")]
    for label, k in rows:
        rps, mean, p50, p99, bad, cpu = med[k]
        print(f"{label:<24} {rps:>9.0f} {mean:>9.1f} {p50:>9.1f} {p99:>9.1f} {bad:>7.0f} "
              f"{cpu:>11.1f}")
    print(f"step / nginx: {med['step'][2] / med['nginx'][2]:.2f}x the median round trip "
          f"({med['step'][1] / med['nginx'][1]:.2f}x the mean; against nginx's GET "
          f"{med['step'][2] / med['nginx_get'][2]:.2f}x and {med['step'][1] / med['nginx_get'][1]:.2f}x); "
          f"target <= 1.3x")
    print(f"CPU time per request: {med['step'][5] / med['nginx'][5]:.1f}x nginx's")
    print("each round (mean us): " + "; ".join(
        f"{k} " + " ".join(f"{p[1]:.0f}" for p in v) for k, v in points.items()))
    if med["step"][4]:
        sys.exit("round_trip: the server answered steps with an error status")
    if csv:
        with open(csv, "w") as f:
            f.write("server,rps,mean_us,p50_us,p99_us,non2xx,cpu_us_per_request\n")
            for _, k in rows:
                f.write(k + "," + ",".join(f"{x:.1f}" for x in med[k]) + "\n")


if __name__ == "__main__":
    main()
