-- Take unique jobs' locks, one per job, in push order: the unique jobs feature's decision
-- at the moment the jobs are written. A lock is a string key holding the owning jid,
-- with a TTL (so a lock whose job was lost cannot last forever).
-- For each job: SET NX EX takes a free lock; a lock that already holds this very jid is
-- the owner pushing its own job again (an on-commit push retried, the outbox relaying a
-- row twice), which passes; a lock held by another jid refuses the job. A key of another
-- type is not a lock this feature wrote: the job passes (and the caller logs it), since
-- refusing it would block that job for as long as the stray key lives.
-- KEYS[i] the lock key of job i
-- ARGV[2i-1] job i's jid, ARGV[2i] its TTL in whole seconds (>= 1)
-- Reply, per job: 1 taken, 2 already held by this jid, 3 not a lock (passes),
--   or the jid holding the lock (refused)
local out = {}
for i, key in ipairs(KEYS) do
  local jid = ARGV[2 * i - 1]
  if redis.call("SET", key, jid, "NX", "EX", ARGV[2 * i]) then
    out[i] = 1
  elseif redis.call("TYPE", key)["ok"] ~= "string" then
    out[i] = 3
  else
    local holder = redis.call("GET", key)
    if holder == jid then
      out[i] = 2
    else
      out[i] = holder
    end
  end
end
return out
