-- Move one due entry from a sorted set (schedule or retry) onto its queue, atomically.
-- The caller has read the member and rewritten its payload (fresh enqueued_at); the ZREM
-- decides which of several racing pollers wins, and the push happens in the same script,
-- so a crash can never leave a job removed but not queued.
-- KEYS[1] sorted set, KEYS[2] "queues" set, KEYS[3] queue list
-- ARGV[1] exact member as stored, ARGV[2] queue name, ARGV[3] payload to push ("" = drop)
if redis.call("ZREM", KEYS[1], ARGV[1]) == 0 then
  return 0
end
if ARGV[3] ~= "" then
  redis.call("SADD", KEYS[2], ARGV[2])
  redis.call("LPUSH", KEYS[3], ARGV[3])
end
return 1
