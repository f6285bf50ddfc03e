-- Put a payload in the dead set and trim it, optionally taking it out of another sorted
-- set first (a kill from the retry set). Trims as Sidekiq does: by age, then by rank.
-- A script is not rolled back when a command in it fails: the dead set's type is checked
-- before the entry is taken out of its source, so it is never removed and then not buried.
-- KEYS[1] dead set, KEYS[2] (optional) source sorted set
-- ARGV[1] death time (score), ARGV[2] payload, ARGV[3] scores up to this are dropped (too old),
-- ARGV[4] max jobs, ARGV[5] (optional) exact member to remove from KEYS[2]
local kind = redis.call("TYPE", KEYS[1])["ok"]
if kind ~= "zset" and kind ~= "none" then
  return redis.error_reply("WRONGTYPE " .. KEYS[1] .. " holds a " .. kind .. ", not a sorted set")
end
if #KEYS > 1 then
  if redis.call("ZREM", KEYS[2], ARGV[5]) == 0 then
    return 0
  end
end
redis.call("ZADD", KEYS[1], ARGV[1], ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, -tonumber(ARGV[4]))
return 1
