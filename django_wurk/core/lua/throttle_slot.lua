-- Throttle: the first push of a job in each slot of `slot` seconds (aligned on the epoch,
-- on the server's clock) is admitted; the others in that slot are refused and learn the
-- holder's jid. One step per group of jobs, in push order.
-- KEYS[i] job i's key prefix (throttle:<digest>:); the slot's key is the prefix followed by
--   the slot's index (floor(now / slot)), holding the admitted jid until the slot ends.
-- ARGV, two per job: jid, slot seconds.
-- The holder's own jid pushed again (an on-commit push retried, the outbox relaying twice)
-- is admitted again. A key of another type, or a value that cannot be a jid, is not a
-- holder this feature wrote: the push takes the slot over it.
-- Reply, per job: {1, jid} admitted, {0, holder jid} refused, {2, jid} a stray key replaced
local t = redis.call("TIME")
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
for i, prefix in ipairs(KEYS) do
  local jid = ARGV[2 * i - 1]
  local slot = tonumber(ARGV[2 * i])
  local index = math.floor(now / slot)
  local key = prefix .. string.format("%d", index)
  local ttl = math.max(1, math.ceil(((index + 1) * slot - now) * 1000))
  if redis.call("SET", key, jid, "NX", "PX", ttl) then
    out[i] = {1, jid}
  else
    local holder = nil
    if redis.call("TYPE", key)["ok"] == "string" then
      holder = redis.call("GET", key)
    end
    if holder == jid then
      out[i] = {1, jid}
    elseif holder and #holder <= 64 and string.match(holder, "^[%w_%-]+$") then
      out[i] = {0, holder}
    else
      redis.call("DEL", key)
      redis.call("SET", key, jid, "PX", ttl)
      out[i] = {2, jid}
    end
  end
end
return out
