-- Move one due entry from a sorted set (schedule or retry) onto its queue, atomically.
-- The caller has read the member and rewritten its payload (fresh enqueued_at); the ZREM
-- decides which of several racing pollers wins, and the push happens in the same script,
-- so a crash can never leave a job removed but not queued.
-- A script is not rolled back when a command in it fails, so the queue key's type is
-- checked before anything is written: an entry whose queue key is not a list stays where
-- it is, and the caller is told (WRONGTYPE) so it can bury that entry instead.
-- KEYS[1] sorted set, KEYS[2] "queues" set, KEYS[3] queue list
-- ARGV[1] exact member as stored, ARGV[2] queue name, ARGV[3] payload to push ("" = drop)
if ARGV[3] ~= "" then
  local kind = redis.call("TYPE", KEYS[3])["ok"]
  if kind ~= "list" and kind ~= "none" then
    return redis.error_reply("WRONGTYPE " .. KEYS[3] .. " holds a " .. kind .. ", not a list")
  end
end
if redis.call("ZREM", KEYS[1], ARGV[1]) == 0 then
  return 0
end
if ARGV[3] ~= "" then
  redis.call("SADD", KEYS[2], ARGV[2])
  redis.call("LPUSH", KEYS[3], ARGV[3])
end
return 1
