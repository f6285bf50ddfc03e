-- Give a lease back, only if the caller still holds it (compare-and-delete): a holder
-- whose lease expired while it worked must not delete the lease another owner took since.
-- KEYS[1] lease key; ARGV[1] owner token
-- Reply: 1 released, 0 not held by this owner
-- A key of another type is nobody's lease (GET would fail on it).
if redis.call("TYPE", KEYS[1]).ok == "string" and redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
