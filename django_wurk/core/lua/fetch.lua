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
-- Optionally, fleet-wide caps (WURK["QUEUE_CAPS"]; absent when no queue tried is capped):
-- ARGV c, the number of capped lists, then c triples: the list's index in KEYS (its queue
-- key's), the cap, and the cap's holder set. At most "cap" jobs of a capped queue are held
-- (fetched and not acknowledged) at once across every process: the jobs held are counted
-- as the lengths of the private lists in its holder set (one set per queue, shared by its
-- priority lists), so an acknowledgement, a requeue or the reaper's recovery of a dead
-- process frees a slot with no bookkeeping of its own. A list taken from joins the set in
-- this same step; an empty one leaves it when counted (it joins again when it takes one).
-- A capped queue at its cap is passed over like an empty one. A holder set that is not a
-- set is reported as a key of the wrong type (the queue is left out, the key untouched).
-- Reply: false (nothing fetched, nothing wrong), or {queue key, n, n jobs} ("" 0 if none),
-- followed by three entries per queue that failed: its queue key, the key of the wrong
-- type (the queue's, rarely its private list, or its holder set) and that key's type.
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
local caps = nil
local capped = tonumber(ARGV[2 * acks + 5] or "0")
if capped > 0 then
  caps = {}
  local at = 2 * acks + 6
  for _ = 1, capped do
    caps[tonumber(ARGV[at])] = {tonumber(ARGV[at + 1]), ARGV[at + 2]}
    at = at + 3
  end
end
-- A capped queue's free slots, by its holder set (counted once per call), or nil and the
-- type of a holder set that is not a set.
local free = {}
local function slots(holders, cap)
  local known = free[holders]
  if known then
    return known
  end
  local members = redis.pcall("SMEMBERS", holders)
  if members.err then
    return nil, redis.call("TYPE", holders)["ok"]
  end
  local held = 0
  for _, private in ipairs(members) do
    local n = redis.pcall("LLEN", private)
    if type(n) ~= "number" or n == 0 then
      -- Empty (its jobs acknowledged, or recovered from a dead process), or not a list at
      -- all (nothing a process of ours holds): no slot is held there.
      redis.call("SREM", holders, private)
    else
      held = held + n
    end
  end
  known = cap - held
  free[holders] = known
  return known
end
for i = 1, #KEYS, 2 do
  local cap = caps and caps[i]
  local room = nil
  local job = false
  if cap then
    local kind
    room, kind = slots(cap[2], cap[1])
    if room == nil then
      reply = reply or {"", 0}
      reply[#reply + 1] = KEYS[i]
      reply[#reply + 1] = cap[2]
      reply[#reply + 1] = kind
    elseif room > 0 then
      job = redis.pcall("LMOVE", KEYS[i], KEYS[i + 1], "RIGHT", "LEFT")
    end
  else
    job = redis.pcall("LMOVE", KEYS[i], KEYS[i + 1], "RIGHT", "LEFT")
  end
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
    if room then
      redis.call("SADD", cap[2], KEYS[i + 1])
      free[cap[2]] = room - 1
      most = math.min(most, room)
    end
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
