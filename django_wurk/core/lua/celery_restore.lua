-- Give a message back from kombu's "unacked" hash (what a Celery worker had taken and not
-- acknowledged when it died) to its queue: the Celery drain's --restore-unacked. Only if the
-- entry is still exactly what the drain read, so a worker that acknowledged it meanwhile, or a
-- second restore, changes nothing.
-- KEYS[1] unacked hash, KEYS[2] unacked index zset, KEYS[3] the queue's list
-- ARGV[1] delivery tag, ARGV[2] the entry as read, ARGV[3] the message to push back
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("RPUSH", KEYS[3], ARGV[3])
return 1
