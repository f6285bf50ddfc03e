-- Pause or unpause a periodic loop, only if it is registered: a pause sent for a loop that
-- was pruned meanwhile must not leave a stray hash that a later loop with the same id
-- (the same entry put back in settings) would silently start out paused from.
-- KEYS[1] loops:{lid}; ARGV[1] "1" (paused) or "0"
-- Reply: 1 written, 0 no such loop
if redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("HSET", KEYS[1], "paused", ARGV[1])
  return 1
end
return 0
