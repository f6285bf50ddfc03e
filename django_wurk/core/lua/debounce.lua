-- Debounce: collapse a burst of pushes of one job into its last payload, fired `wait`
-- seconds after the last push and no later than `max_wait` after the first. One step per
-- group of jobs, in push order, on the server's clock (TIME), so racing clients agree.
-- KEYS[1] the schedule set; KEYS[1 + i] job i's burst key (debounce:<digest>), a hash:
--   member  the schedule entry this burst is waiting as
--   first   when the burst began (epoch seconds)
--   jid     the burst's jid: every push of the burst answers it, and the job runs under it
-- ARGV, five per job: jid, wait, max_wait (negative: none), not_before (the push's own
--   scheduled time, or 0), the payload's JSON without its jid and without the opening "{"
-- For each job: a burst whose member still waits in the schedule is extended (its entry
-- replaced by this payload, under the burst's jid); the member must be one this burst wrote
-- (it begins with the burst's jid and holds the key's digest as its collapse_token), so a
-- hash of junk never removes another job's entry; a burst whose job already left the
-- schedule (fired, deleted) is over, and this push starts a new one under its own jid. A
-- burst key of another type, or fields that cannot be this script's (a jid with bytes a
-- JSON string cannot hold as they are, a first time that is not a time), is not a burst
-- this feature wrote: the push starts a new burst over it.
-- The entry's score is the fire time; the hash lives until then plus a grace period.
-- Reply, per job: {jid the job runs under, fire time as text, 1 extended / 0 new / 2 stray key replaced}
local t = redis.call("TIME")
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
for i = 2, #KEYS do
  local key = KEYS[i]
  local base = (i - 2) * 5
  local jid = ARGV[base + 1]
  local wait = tonumber(ARGV[base + 2])
  local max_wait = tonumber(ARGV[base + 3])
  local not_before = tonumber(ARGV[base + 4])
  local rest = ARGV[base + 5]
  local token = '"collapse_token":"' .. string.sub(key, 10) .. '"'
  local first = now
  local outcome = 0
  local kind = redis.call("TYPE", key)["ok"]
  if kind == "hash" then
    local state = redis.call("HMGET", key, "member", "first", "jid")
    local member, began, held = state[1], tonumber(state[2]), state[3]
    -- Only an entry this burst wrote is replaced: its jid first, its token inside. Anything
    -- else the fields name (another job's entry, junk) is left where it is.
    local ours = held and #held <= 64 and string.match(held, "^[%w_%-]+$")
      and member and string.sub(member, 1, #held + 10) == '{"jid":"' .. held .. '",'
      and string.find(member, token, 1, true)
    if ours and redis.call("ZSCORE", KEYS[1], member) then
      redis.call("ZREM", KEYS[1], member)
      outcome = 1
      jid = held
      if began and began == began and began <= now and began > 0 then
        first = began
      end
    end
  elseif kind ~= "none" then
    redis.call("DEL", key)
    outcome = 2
  end
  local fire = now + wait
  if max_wait >= 0 and fire > first + max_wait then
    fire = first + max_wait
  end
  if fire < now then
    fire = now
  end
  if not_before > fire then
    fire = not_before
  end
  local score = string.format("%.6f", fire)
  local body = '{"jid":"' .. jid .. '",' .. rest
  redis.call("ZADD", KEYS[1], score, body)
  redis.call("HSET", key, "member", body, "first", string.format("%.6f", first), "jid", jid)
  redis.call("PEXPIRE", key, math.ceil((fire - now) * 1000) + 60000)
  out[i - 1] = {jid, score, outcome}
end
return out
