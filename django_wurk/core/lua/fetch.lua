-- Reliable fetch, one round trip: acknowledge the jobs this thread finished since its last
-- round trip, then move the next job from the first non-empty queue (in the order given)
-- onto this process's private list for that queue, and return it. When that queue holds a
-- backlog, more of its jobs come along (at most ARGV "most" in all, one more only per
-- "spread" jobs still waiting, so a short queue is shared among the threads, not taken by
-- one, and none once "budget" bytes are taken, so large payloads go one at a time): the
-- worker keeps them in memory and runs them without another round trip.
-- Only small finished jobs are acknowledged here: a payload passed in ARGV is copied into
-- Lua and interned, about 1 us of Redis CPU per KB, so the worker acknowledges a large one
-- with a plain LREM written just before this script, in the same round trip (scripts.py).
-- A queue whose key holds something other than a list (a stray SET or HSET by other code)
-- must not stop the others: its LMOVE runs under pcall, the fetch goes on to the next
-- queue, and the key is named in the reply (with its type) so the worker can say so and
-- leave that queue out for a while. The key itself is never touched.
-- KEYS: 2n keys, queue:<q1> private:<q1> queue:<q2> private:<q2> ...
-- ARGV[1] a, the number of jobs to acknowledge, then a pairs: private list, exact payload;
-- then most (jobs to take at most, >= 1), spread (jobs waiting per extra job taken) and
-- budget (bytes: no job is taken along once the jobs taken hold this many).
-- Reply: false (nothing fetched, nothing wrong), or {queue key, n, n jobs} ("" 0 if none),
-- followed by three entries per queue that failed: its queue key, the key of the wrong
-- type (the queue's or, rarely, its private list) and that key's type.
local acks = tonumber(ARGV[1])
for i = 2, 2 * acks, 2 do
  -- From the tail: a finished job was taken before the ones still running, so it lies
  -- near the tail of the private list (jobs go in at the head).
  redis.call("LREM", ARGV[i], -1, ARGV[i + 1])
end
local most = tonumber(ARGV[2 * acks + 2])
local spread = tonumber(ARGV[2 * acks + 3])
local budget = tonumber(ARGV[2 * acks + 4])
local reply = nil
for i = 1, #KEYS, 2 do
  local job = redis.pcall("LMOVE", KEYS[i], KEYS[i + 1], "RIGHT", "LEFT")
  if type(job) == "table" then
    if not string.find(job.err, "WRONGTYPE", 1, true) then
      return job
    end
    local bad = KEYS[i]
    local kind = redis.call("TYPE", bad)["ok"]
    if kind == "list" or kind == "none" then
      bad = KEYS[i + 1]
      kind = redis.call("TYPE", bad)["ok"]
    end
    reply = reply or {"", 0}
    reply[#reply + 1] = KEYS[i]
    reply[#reply + 1] = bad
    reply[#reply + 1] = kind
  elseif job then
    local jobs = {KEYS[i], 1, job}
    local taken = #job
    if most > 1 and taken < budget then
      local extra = math.min(most - 1, math.floor(redis.call("LLEN", KEYS[i]) / spread))
      for _ = 1, extra do
        -- Both keys are lists (the move above worked), and the queue holds enough jobs.
        job = redis.call("LMOVE", KEYS[i], KEYS[i + 1], "RIGHT", "LEFT")
        jobs[#jobs + 1] = job
        taken = taken + #job
        if taken >= budget then
          break
        end
      end
      jobs[2] = #jobs - 2
    end
    if reply then
      for at = 3, #reply do
        jobs[#jobs + 1] = reply[at]
      end
    end
    return jobs
  end
end
return reply or false
