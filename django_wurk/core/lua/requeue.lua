-- Move one job out of a private list, atomically: back to the tail of its queue (so it
-- is fetched next) or, with ARGV[7] "1", to its head (behind the jobs waiting, where a new
-- job goes), or into the dead set. A job no longer in the private list (another
-- reaper or its own process got there first) is left alone.
-- A script is not rolled back when a command in it fails: the target's type is checked
-- before the LREM, so a job is never taken out and then not written (WRONGTYPE instead).
-- KEYS[1] private list, KEYS[2] queue list or dead set, KEYS[3] "queues" set
-- ARGV[1] exact payload in the private list, ARGV[2] payload to write,
-- ARGV[3] "" to requeue, else the death score (ZADD into KEYS[2]),
-- ARGV[4] queue name (for SADD), ARGV[5]/ARGV[6] dead-set trims (oldest score, max jobs),
-- ARGV[7] "1" to requeue behind the waiting jobs (absent or "" otherwise)
local want = "list"
if ARGV[3] ~= "" then
  want = "zset"
end
local kind = redis.call("TYPE", KEYS[2])["ok"]
if kind ~= want and kind ~= "none" then
  return redis.error_reply("WRONGTYPE " .. KEYS[2] .. " holds a " .. kind .. ", not a " .. want)
end
if redis.call("LREM", KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
if ARGV[3] == "" then
  if ARGV[7] == "1" then
    redis.call("LPUSH", KEYS[2], ARGV[2])
  else
    redis.call("RPUSH", KEYS[2], ARGV[2])
  end
  redis.call("SADD", KEYS[3], ARGV[4])
else
  redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", ARGV[5])
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -tonumber(ARGV[6]))
end
return 1
