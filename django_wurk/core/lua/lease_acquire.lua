-- Take a lease: the key holds the owner's token for ttl milliseconds, unless another owner
-- holds it. The expiry is counted by the server's clock (PX is relative), so holders on
-- machines whose clocks disagree still agree on when it ends. A key without an expiry (or
-- of another type) is no lease, since every lease is written with one: it was left by
-- something else, and kept it would block every holder forever, so it is replaced.
-- KEYS[1] lease key; ARGV[1] owner token, ARGV[2] ttl in milliseconds
-- Reply: 1 taken, 0 held by someone (the caller too: a holder extends with renew)
if redis.call("PTTL", KEYS[1]) == -1 then
  redis.call("DEL", KEYS[1])
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return 1
end
return 0
