-- Reliable fetch, one round trip: acknowledge the job this thread just finished, then
-- move the next job from the first non-empty queue (in the order given) onto this
-- process's private list for that queue, and return it.
-- KEYS: 2n keys, queue:<q1> private:<q1> queue:<q2> private:<q2> ...
-- ARGV[1] private list of the job to acknowledge ("" = none), ARGV[2] its exact payload
if ARGV[1] ~= "" then
  redis.call("LREM", ARGV[1], 1, ARGV[2])
end
for i = 1, #KEYS, 2 do
  local job = redis.call("LMOVE", KEYS[i], KEYS[i + 1], "RIGHT", "LEFT")
  if job then
    return {KEYS[i], job}
  end
end
return false
