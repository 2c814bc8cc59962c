-- wrk script for bench/round_trip.py: one sequence stepped one row at a
-- time, v2 binary (Inference-Header-Content-Length), restarted every
-- $RTT_RESTART requests (sequence_start) so that its cache stays small.
-- $RTT_DIR holds start.bin/start.hlen and step.bin/step.hlen.
local dir = os.getenv("RTT_DIR")
local every = tonumber(os.getenv("RTT_RESTART") or "256")

local function slurp(name)
    local f = assert(io.open(dir .. "/" .. name, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end

local function request_of(name)
    local hdr = {["Content-Type"] = "application/octet-stream",
                 ["Inference-Header-Content-Length"] = slurp(name .. ".hlen")}
    return wrk.format("POST", "/v2/models/attention/infer", hdr, slurp(name .. ".bin"))
end

local start, step, n

-- wrk calls request() once before the run to check it (that request is
-- never sent): it is n = 0, and the first one sent (n = 1) starts.
function init(args)
    start, step, n = request_of("start"), request_of("step"), -1
end

function request()
    n = n + 1
    if n % every == 1 or every == 1 then
        return start
    end
    return step
end
