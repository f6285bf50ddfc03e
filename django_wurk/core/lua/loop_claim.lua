-- Claim one occurrence of a periodic loop, before its job is pushed: compare-and-set on the
-- loop's next-fire time. Of any number of processes that read the same "nf" and ask to move
-- it on, exactly one succeeds; the others see "nf" changed and push nothing. The time is the
-- server's (TIME), so a process whose clock runs ahead cannot fire an occurrence early, and
-- "lf" says when the fleet's one clock saw the fire.
-- KEYS[1] loops:{lid}
-- ARGV[1] the "nf" the caller read ("" when it had none); ARGV[2] the new "nf";
-- ARGV[3] "fire" (the occurrence is due: claim it) or "reschedule" (the "nf" read was
--         unusable: only replace it, fire nothing)
-- Reply: {status, server time as text}; status 1 claimed (push now), 2 claimed but the loop
-- is paused (push nothing: the occurrence is skipped), 3 rescheduled, 0 lost (another
-- process moved "nf" first, or it is not due yet by the server's clock)
local t = redis.call("TIME")
local now = string.format("%d.%06d", tonumber(t[1]), tonumber(t[2]))
local nf = redis.call("HGET", KEYS[1], "nf") or ""
if nf ~= ARGV[1] then
  return {0, now}
end
if ARGV[3] == "reschedule" then
  redis.call("HSET", KEYS[1], "nf", ARGV[2])
  return {3, now}
end
local due = tonumber(ARGV[1])
if due == nil or due > tonumber(now) then
  return {0, now}
end
redis.call("HSET", KEYS[1], "nf", ARGV[2])
local paused = redis.call("HGET", KEYS[1], "paused")
if paused == "1" or paused == "true" then
  return {2, now}
end
redis.call("HSET", KEYS[1], "lf", now)
return {1, now}
