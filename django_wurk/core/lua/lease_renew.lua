-- Extend a lease, only if the caller still holds it (compare-and-expire): a holder that
-- stalled past its ttl, whose lease another owner has taken since, must not extend that
-- owner's lease as if it were its own.
-- KEYS[1] lease key; ARGV[1] owner token, ARGV[2] ttl in milliseconds from now
-- Reply: 1 extended, 0 not held by this owner (expired, or taken by another)
-- A key of another type is nobody's lease (GET would fail on it).
if redis.call("TYPE", KEYS[1]).ok == "string" and redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
