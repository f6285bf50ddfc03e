-- Sweep the set of limiter names of names whose limiter expired (its metadata hash is gone),
-- so per-tenant names ("stripe-<user id>") do not pile up in it forever. Checked and removed
-- in one step, so a limiter registered again meanwhile (which adds its name only when it
-- creates the hash) is never removed while its hash exists.
-- KEYS[1] the set of names (lmtr-list); KEYS[i + 1] the metadata hash of name i
-- ARGV[i] name i (the exact bytes read from the set)
-- Reply: how many names were removed (0 when the set is not a set).
local list = KEYS[1]
if redis.call("TYPE", list)["ok"] ~= "set" then
  return 0
end
local removed = 0
for i, name in ipairs(ARGV) do
  if redis.call("EXISTS", KEYS[i + 1]) == 0 then
    removed = removed + redis.call("SREM", list, name)
  end
end
return removed
