-- Put a payload in the dead set and trim it, optionally taking it out of another sorted
-- set first (a kill from the retry set). Trims as Sidekiq does: by age, then by rank.
-- KEYS[1] dead set, KEYS[2] (optional) source sorted set
-- ARGV[1] death time (score), ARGV[2] payload, ARGV[3] scores up to this are dropped (too old),
-- ARGV[4] max jobs, ARGV[5] (optional) exact member to remove from KEYS[2]
if #KEYS > 1 then
  if redis.call("ZREM", KEYS[2], ARGV[5]) == 0 then
    return 0
  end
end
redis.call("ZADD", KEYS[1], ARGV[1], ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, -tonumber(ARGV[4]))
return 1
