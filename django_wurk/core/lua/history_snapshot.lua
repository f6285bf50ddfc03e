-- Append one historical-metrics snapshot, only as the fleet's leader and only once per gap.
-- Checking the lease here, in the same step as the write, means a process that lost the lead
-- a moment ago (its own clock still says it leads) cannot add a second snapshot beside the new
-- leader's; checking the newest entry's age means a change of leader never writes two
-- snapshots a few seconds apart. The entry's ID is the server's clock (XADD *), and the trims
-- run in the same step: entries older than the retention (MINID), then any beyond the count
-- the retention can hold (MAXLEN), both exact.
-- KEYS[1] history:metrics (a stream); KEYS[2] dear-leader
-- ARGV[1] the caller's identity; ARGV[2] the shortest gap between snapshots (ms);
-- ARGV[3] the retention (ms); ARGV[4] the most entries kept; ARGV[5..] field, value, ...
-- Reply: {status, detail}: 1 written (detail: the entry's ID); 0 not the leader; 2 too soon
-- (detail: ms until the next may be written); 3 KEYS[1] is not a stream (detail: its type);
-- 4 the newest entry is from the future by more than a gap (detail: its ID)
if redis.call("TYPE", KEYS[2]).ok ~= "string" or redis.call("GET", KEYS[2]) ~= ARGV[1] then
  return {0, ""}
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind ~= "none" and kind ~= "stream" then
  return {3, kind}
end
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gap = tonumber(ARGV[2])
if kind == "stream" then
  local newest = redis.call("XREVRANGE", KEYS[1], "+", "-", "COUNT", 1)[1]
  if newest then
    local last = tonumber(string.match(newest[1], "^(%d+)")) or 0
    if last > now + gap then
      return {4, newest[1]}
    end
    if now - last < gap then
      return {2, tostring(gap - (now - last))}
    end
  end
end
local minid = math.max(now - tonumber(ARGV[3]), 0)
local entry = {}
for i = 5, #ARGV do
  entry[#entry + 1] = ARGV[i]
end
local id = redis.call("XADD", KEYS[1], "MINID", "=", string.format("%d", minid), "*", unpack(entry))
redis.call("XTRIM", KEYS[1], "MAXLEN", "=", ARGV[4])
return {1, id}
