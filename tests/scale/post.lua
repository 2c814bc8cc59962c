-- post.lua -- wrk's script for scripts/scale-test.sh: every connection
-- POSTs one small valid /attention request (SCALE_BODY, examples/request.json
-- by default) over and over, and at the end one line of figures for the
-- script to parse:
--   WRK requests=N seconds=S connect=N read=N write=N status=N timeout=N
--       p50_ms=X p99_ms=X max_ms=X
-- (status: answers that were not 2xx or 3xx; connect/read/write/timeout:
-- socket errors, as wrk counts them).
wrk.method = "POST"
wrk.path = "/attention"
wrk.headers["Content-Type"] = "application/json"

local name = os.getenv("SCALE_BODY") or "examples/request.json"
local f = assert(io.open(name, "rb"))
wrk.body = f:read("*a")
f:close()

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK requests=%d seconds=%.2f connect=%d read=%d write=%d status=%d timeout=%d" ..
      " p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
      summary.requests, summary.duration / 1e6, e.connect, e.read, e.write, e.status,
      e.timeout, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3,
      latency.max / 1e3))
end
