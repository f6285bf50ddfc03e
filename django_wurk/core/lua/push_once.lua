-- Push a job unless this marker says it was pushed already: the outbox relay's
-- exactly-once step. A relay that crashes after the push but before deleting the row
-- finds the marker on its next pass and only deletes the row.
-- The marker is keyed by the row's random token (never by its id, which a flush or a
-- restore hands out again) and holds the jid pushed, for whoever inspects it.
-- KEYS[1] marker, KEYS[2] "queues" set, KEYS[3] queue list, KEYS[4] "schedule" zset
-- ARGV[1] marker TTL, ARGV[2] queue name, ARGV[3] payload, ARGV[4] score ("" = push now),
-- ARGV[5] the jid
if not redis.call("SET", KEYS[1], ARGV[5], "NX", "EX", ARGV[1]) then
  return 0
end
if ARGV[4] == "" then
  redis.call("SADD", KEYS[2], ARGV[2])
  redis.call("LPUSH", KEYS[3], ARGV[3])
else
  redis.call("ZADD", KEYS[4], ARGV[4], ARGV[3])
end
return 1
