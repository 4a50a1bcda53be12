-- SPDX-License-Identifier: BSD-3-Clause
--
-- webstone.lua -- wrk's script for held_lighttpd.sh --link: WebStone's
--                 file set requested uniformly, every response checked
--
--   wrk ... -s webstone.lua URL -- DIR N SEED [close]
--
-- DIR holds the documents f01 .. fN.  Each wrk thread draws its requests
-- uniformly over them (math.random, seeded with SEED and the thread's
-- number: the same sequence every run), with no think time.  Every
-- response body is compared with the files: a body that is not
-- byte-identical to one of them, or a status other than 200, counts as
-- bad (LuaJIT interns strings, so the look-up compares the whole body).
-- "close" asks for a new connection per request (WebStone's
-- transactions: connect, read one file, close); without it the
-- connections are kept alive.  done() prints one line:
--
--   WS requests=R duration_us=D bytes=B mean_us=M p99_us=P errors=E
--      checked=C bad=X
--
-- errors: wrk's socket errors (connect, read, write, timeout).

local threads = {}
local nthreads = 0

function setup(thread)
	nthreads = nthreads + 1
	thread:set("tid", nthreads)
	table.insert(threads, thread)
end

function init(args)
	local dir, n, seed = args[1], tonumber(args[2]), tonumber(args[3])
	if args[4] == "close" then
		wrk.headers["Connection"] = "close"
	end
	docs, reqs, known = n, {}, {}
	for i = 1, n do
		local name = string.format("f%02d", i)
		local f = assert(io.open(dir .. "/" .. name, "rb"))
		known[f:read("*a")] = i
		f:close()
		reqs[i] = wrk.format("GET", "/" .. name)
	end
	math.randomseed(seed * 1000 + tid)
	checked, bad = 0, 0
end

function request()
	return reqs[math.random(docs)]
end

function response(status, headers, body)
	checked = checked + 1
	if status ~= 200 or known[body] == nil then
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local c, b = 0, 0
	for _, t in ipairs(threads) do
		c = c + t:get("checked")
		b = b + t:get("bad")
	end
	local e = summary.errors
	io.write(string.format("WS requests=%d duration_us=%d bytes=%d " ..
		"mean_us=%.0f p99_us=%d errors=%d checked=%d bad=%d\n",
		summary.requests, summary.duration, summary.bytes,
		latency.mean, latency:percentile(99),
		e.connect + e.read + e.write + e.timeout, c, b))
end
