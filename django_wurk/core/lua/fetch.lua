-- Reliable fetch, one round trip: acknowledge the job this thread just finished, then
-- move the next job from the first non-empty queue (in the order given) onto this
-- process's private list for that queue, and return it.
-- A queue whose key holds something other than a list (a stray SET or HSET by other code)
-- must not stop the others: its LMOVE runs under pcall, the fetch goes on to the next
-- queue, and the key is named in the reply (with its type) so the worker can say so and
-- leave that queue out for a while. The key itself is never touched.
-- KEYS: 2n keys, queue:<q1> private:<q1> queue:<q2> private:<q2> ...
-- ARGV[1] private list of the job to acknowledge ("" = none), ARGV[2] its exact payload
-- Reply: false (nothing fetched, nothing wrong), or {queue key, job} ("" "" if none),
-- followed by three entries per queue that failed: its queue key, the key of the wrong
-- type (the queue's or, rarely, its private list) and that key's type.
if ARGV[1] ~= "" then
  redis.call("LREM", ARGV[1], 1, ARGV[2])
end
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
    reply = reply or {"", ""}
    reply[#reply + 1] = KEYS[i]
    reply[#reply + 1] = bad
    reply[#reply + 1] = kind
  elseif job then
    if reply then
      reply[1] = KEYS[i]
      reply[2] = job
      return reply
    end
    return {KEYS[i], job}
  end
end
return reply or false
