-- Batches: every change to a batch is one call of this script, so each transition is one
-- atomic step. Two workers finishing a batch's last two jobs at the same moment run one
-- after the other here, and exactly one of them sees the batch drained and fires it.
--
-- Keys are built from the bid, with the names django_wurk/core/features/batches/keys.py
-- documents: b-<bid> (hash), b-<bid>-jids (live jids), -failed, -died, -kids (children),
-- -pkids (children not complete), -ukids (children not succeeded), -callbacks (list of
-- raw JSON [event, target, options]), and the indexes "batches" and "dead-batches".
-- (Keys named inside a script tie this to a single Redis, which django-wurk needs anyway.)
--
-- Common arguments:
-- ARGV[1] operation, ARGV[2] now as "%.6f" epoch seconds, ARGV[3] now as a job timestamp
-- (JSON number text, in the configured style), ARGV[4] wire name of the callback job,
-- ARGV[5] index window in seconds (older entries of the indexes are trimmed),
-- ARGV[6] index size cap, ARGV[7] callbacks cap per batch; ARGV[8...] per operation.
local op = ARGV[1]
local now = ARGV[2]
local stamp = ARGV[3]
local callback_job = ARGV[4]
local index_age = tonumber(ARGV[5])
local index_max = tonumber(ARGV[6])
local callbacks_max = tonumber(ARGV[7])
-- A parent chain deeper than this is not followed (it would be a loop or a mistake).
local MAX_DEPTH = 64
local SUFFIXES = { "jids", "failed", "died", "kids", "pkids", "ukids", "callbacks" }

local function k(bid, suffix)
  if suffix then
    return "b-" .. bid .. "-" .. suffix
  end
  return "b-" .. bid
end

-- The type each key of a batch must have (or be absent): a key of another type was not
-- written by this script, and one command on it would fail the whole call.
local KINDS = {
  jids = "set", failed = "set", died = "set", kids = "set", pkids = "set", ukids = "set", callbacks = "list",
}

local function kind_of(key)
  local t = redis.call("TYPE", key)
  return type(t) == "table" and t["ok"] or t
end

-- A batch this script wrote: its hash has the "wurk" field, and every sub-key has its own
-- type. Sidekiq Pro names its batches b-<bid> too; their jobs may run here as plain jobs,
-- but their keys are never touched. Nor are a batch's keys that someone else overwrote with
-- other types: the job runs and counts as a plain job, and the batch is left as it is.
local function ours(bid)
  if kind_of(k(bid)) ~= "hash" or redis.call("HEXISTS", k(bid), "wurk") == 0 then
    return false
  end
  for _, suffix in ipairs(SUFFIXES) do
    local t = kind_of(k(bid, suffix))
    if t ~= "none" and t ~= KINDS[suffix] then
      return false
    end
  end
  return true
end

-- A counter of the hash as a safe integer, or nil when it holds anything else (text, NaN,
-- a fraction, 400 digits): HINCRBY would fail on it and abort the whole call.
local function counter(bid, field)
  local n = tonumber(redis.call("HGET", k(bid), field) or "0")
  if not n or n ~= n or n ~= math.floor(n) or math.abs(n) >= 2 ^ 53 then
    return nil
  end
  return n
end

-- Add to a counter; a counter that is not a safe integer is recounted from the sets (pending:
-- the live and dead jids) or, for total, restarted at what is added.
local function add(bid, field, n)
  if counter(bid, field) then
    redis.call("HINCRBY", k(bid), field, n)
  elseif field == "pending" then
    local recount = redis.call("SCARD", k(bid, "jids")) + redis.call("SCARD", k(bid, "died"))
    redis.call("HSET", k(bid), field, recount)
  else
    redis.call("HSET", k(bid), field, n)
  end
end

-- A queue name as the engine accepts it (config.QUEUE_NAME); anything else sends callbacks
-- to "default", where a worker reads them, instead of a key nobody serves.
local function queue_name(queue)
  if not queue or queue == "" or #queue > 1000 or not string.match(queue, "^[%w_:%.%-]+$") then
    return "default"
  end
  return queue
end

-- Give a key the batch's remaining lifetime unless it already has one (EXPIRE ... NX), so a
-- key created late (a first failure, a first child) never lives on without a TTL and never
-- outlives its batch.
local function keep(bid, key)
  local ttl = redis.call("TTL", k(bid))
  if ttl > 0 then
    redis.call("EXPIRE", key, ttl, "NX")
  end
end

-- Add to an index and trim it in the same step: by age, then by size.
local function index_add(index, bid)
  local t = kind_of(index)
  if t ~= "zset" and t ~= "none" then
    return -- someone else's key under the index's name: the batch lives on without it
  end
  redis.call("ZADD", index, now, bid)
  redis.call("ZREMRANGEBYSCORE", index, "-inf", "(" .. string.format("%.6f", tonumber(now) - index_age))
  redis.call("ZREMRANGEBYRANK", index, 0, -(index_max + 1))
end

local function parent_of(bid)
  local parent = redis.call("HGET", k(bid), "parent_bid")
  if not parent or parent == "" or not ours(parent) then
    return nil
  end
  return parent
end

-- Whether a decoded value holds only what strict JSON can (cjson also reads NaN, Infinity
-- and numbers too large for a double, which a worker's reader refuses).
local function finite(value)
  if type(value) == "number" then
    return value == value and value ~= math.huge and value ~= -math.huge
  end
  if type(value) == "table" then
    for key, item in pairs(value) do
      if not finite(key) or not finite(item) then
        return false
      end
    end
  end
  return true
end

-- Push one callback job per callback registered for `event`, in registration order. The
-- job's arguments are [bid, <the stored entry, verbatim>], so options reach the callback
-- byte for byte (never through cjson's number handling). With a parent, the callback job
-- belongs to the parent batch: the parent's own callbacks wait for it. Returns how many
-- entries the list held (the callbacks at or past that index were added later, and never
-- fire for this event).
local function push_callbacks(bid, event, parent)
  local entries = redis.call("LRANGE", k(bid, "callbacks"), 0, -1)
  local queue = queue_name(redis.call("HGET", k(bid), "callback_queue"))
  local prefix = '["' .. event .. '","'
  for i, entry in ipairs(entries) do
    if string.sub(entry, 1, #prefix) == prefix then
      local target = string.match(entry, '^%[".-","([^"]*)"') or "?"
      local display = target
      if not string.find(target, "#", 1, true) then
        display = target .. "#on_" .. event
      end
      -- The entry goes into the job verbatim only if it is one JSON array (anything else, e.g.
      -- written by hand, would break the job's JSON): else as a string, which the callback job
      -- refuses with the reason, so it reaches the dead set instead of vanishing.
      local decoded, value = pcall(cjson.decode, entry)
      if not decoded or type(value) ~= "table" or string.sub(entry, -1) ~= "]" or not finite(value) then
        entry = cjson.encode(entry)
      end
      -- Derived from (bid, event, position): each fires at most once, so it is unique.
      local jid = string.sub(redis.sha1hex(bid .. ":" .. event .. ":" .. i), 1, 24)
      -- Every string read from Redis is JSON-encoded: none can add or change a field.
      local payload = '{"retry":true,"queue":' .. cjson.encode(queue) .. ',"args":[' .. cjson.encode(bid)
        .. ',' .. entry .. '],"class":"' .. callback_job .. '","jid":"' .. jid .. '","created_at":' .. stamp
        .. ',"enqueued_at":' .. stamp .. ',"display_class":' .. cjson.encode(display)
      if parent then
        payload = payload .. ',"bid":' .. cjson.encode(parent)
        if redis.call("SADD", k(parent, "jids"), jid) == 1 then
          add(parent, "total", 1)
          add(parent, "pending", 1)
          keep(parent, k(parent, "jids"))
        end
      end
      redis.call("SADD", "queues", queue)
      redis.call("LPUSH", "queue:" .. queue, payload .. "}")
    end
  end
  return #entries
end

-- After a success, the batch and its keys live only `linger` seconds more (never longer
-- than they would have: EXPIRE ... LT).
local function linger(bid)
  local seconds = tonumber(redis.call("HGET", k(bid), "linger") or "")
  -- EXPIRE takes a whole number of seconds that fits: "1e400", NaN or 0.5 would fail the call.
  if not seconds or seconds ~= seconds or seconds < 1 or seconds >= 2 ^ 40 then
    return
  end
  seconds = math.floor(seconds)
  redis.call("EXPIRE", k(bid), seconds, "LT")
  for _, suffix in ipairs(SUFFIXES) do
    redis.call("EXPIRE", k(bid, suffix), seconds, "LT")
  end
end

-- Fire what a change made due: `complete` once no job is live and every child is complete;
-- `success` once every job and every child has succeeded. A batch that fires tells its
-- parent, which may fire in turn, up the tree. For complete and success the callback jobs
-- are pushed before the marker is written (a duplicate is better than a loss; here both
-- happen in one atomic step anyway).
local function settle(bid)
  local depth = 0
  while bid and depth <= MAX_DEPTH do
    local h = k(bid)
    if not ours(bid) then
      return
    end
    if redis.call("SCARD", k(bid, "jids")) > 0 or redis.call("SCARD", k(bid, "pkids")) > 0 then
      return
    end
    local parent = parent_of(bid)
    local told_parent = false
    if redis.call("HEXISTS", h, "complete_at") == 0 then
      local n = push_callbacks(bid, "complete", parent)
      redis.call("HSET", h, "complete_at", now, "complete_upto", n)
      if parent then
        redis.call("SREM", k(parent, "pkids"), bid)
        told_parent = true
      end
    end
    if (counter(bid, "pending") or 0) <= 0
      and redis.call("SCARD", k(bid, "ukids")) == 0
      and redis.call("HEXISTS", h, "success_at") == 0
    then
      local n = push_callbacks(bid, "success", parent)
      redis.call("HSET", h, "success_at", now, "success_upto", n)
      linger(bid)
      if parent then
        redis.call("SREM", k(parent, "ukids"), bid)
        told_parent = true
      end
    end
    if not told_parent then
      return
    end
    bid = parent
    depth = depth + 1
  end
end

local bid = ARGV[8]

if op == "success" then
  -- A job of the batch succeeded. A jid that is neither live nor dead (a duplicate run, or a
  -- straggler after the batch expired) changes nothing.
  local jid = ARGV[9]
  if not ours(bid) then
    return -1
  end
  if redis.call("SREM", k(bid, "jids"), jid) == 0 then
    -- Retried from the dead set without rejoining first: it still counts as a success.
    if redis.call("SREM", k(bid, "died"), jid) == 0 then
      return 0
    end
    if redis.call("SCARD", k(bid, "died")) == 0 then
      redis.call("ZREM", "dead-batches", bid)
    end
  end
  redis.call("SREM", k(bid, "failed"), jid)
  add(bid, "pending", -1)
  if redis.call("SCARD", k(bid, "jids")) > 0 then
    return 1 -- the common case: other jobs are still live, nothing can fire
  end
  settle(bid)
  return 1
end

if op == "failed" then
  -- A job of the batch raised and will be retried (or will die: "death" follows).
  local jid = ARGV[9]
  if not ours(bid) then
    return -1
  end
  if redis.call("SISMEMBER", k(bid, "jids"), jid) == 0 and redis.call("SISMEMBER", k(bid, "died"), jid) == 0 then
    return 0
  end
  if redis.call("SADD", k(bid, "failed"), jid) == 1 then
    keep(bid, k(bid, "failed"))
  end
  return 1
end

if op == "death" then
  -- A job of the batch died (dead set, discarded, or retry: false). `pending` keeps
  -- counting it: the batch has not succeeded. The first death in a subtree fires `death`
  -- on the batch and on every ancestor, each once; the marker is claimed first.
  local jid = ARGV[9]
  if not ours(bid) then
    return -1
  end
  if redis.call("SREM", k(bid, "jids"), jid) == 0 then
    return 0
  end
  redis.call("SADD", k(bid, "died"), jid)
  keep(bid, k(bid, "died"))
  redis.call("SADD", k(bid, "failed"), jid)
  keep(bid, k(bid, "failed"))
  index_add("dead-batches", bid)
  local b = bid
  local depth = 0
  while b and depth <= MAX_DEPTH do
    if not ours(b) then
      break
    end
    if redis.call("HSETNX", k(b), "death_at", now) == 1 then
      local n = push_callbacks(b, "death", nil)
      redis.call("HSET", k(b), "death_upto", n)
    end
    b = parent_of(b)
    depth = depth + 1
  end
  settle(bid)
  return 1
end

if op == "rejoin" then
  -- A dead job of the batch is being pushed again (retried from the dead set): it is live
  -- again, without being counted twice.
  local jid = ARGV[9]
  if not ours(bid) then
    return -1
  end
  if redis.call("SREM", k(bid, "died"), jid) == 0 then
    return 0
  end
  redis.call("SADD", k(bid, "jids"), jid)
  keep(bid, k(bid, "jids"))
  if redis.call("SCARD", k(bid, "died")) == 0 then
    redis.call("ZREM", "dead-batches", bid)
  end
  return 1
end

if op == "callback" then
  -- A callback added after the batch was written: appended atomically, once per
  -- (event, target, options), at most callbacks_max per batch.
  -- ARGV[9] the entry, ARGV[10] its event.
  local entry, event = ARGV[9], ARGV[10]
  local list = k(bid, "callbacks")
  if not ours(bid) then
    return -1
  end
  if redis.call("LPOS", list, entry) then
    return 0
  end
  if redis.call("LLEN", list) >= callbacks_max then
    return -2
  end
  redis.call("RPUSH", list, entry)
  keep(bid, list)
  if redis.call("HEXISTS", k(bid), event .. "_at") == 1 then
    return 2
  end
  return 1
end

if op == "invalidate" then
  if not ours(bid) then
    return 0
  end
  redis.call("HSET", k(bid), "invalidated", "1")
  return 1
end

if op == "valid" then
  -- Invalid when the batch or any ancestor was invalidated; an expired batch is valid.
  local b = bid
  local depth = 0
  while b and depth <= MAX_DEPTH do
    if kind_of(k(b)) == "hash" and redis.call("HGET", k(b), "invalidated") == "1" then
      return 0
    end
    b = parent_of(b)
    depth = depth + 1
  end
  return 1
end

if op == "flush" then
  -- Write what one jobs() block (and the blocks nested in it) collected, all or nothing.
  -- ARGV[8] flush token ("" = none; else a second call with the same token does nothing),
  -- ARGV[9] number of batches; then per batch a header
  --   bid, new ("1"/"0"), parent bid ("" = none), TTL (new only), field count, callback count, job count
  -- followed by its fields (name, value...), callbacks (raw entries) and jobs
  -- (jid, queue, score ("" = now), payload).
  local token = ARGV[8]
  local count = tonumber(ARGV[9])
  local plan = {}
  local at = 10
  for i = 1, count do
    local e = {
      bid = ARGV[at], new = ARGV[at + 1] == "1", parent = ARGV[at + 2], ttl = tonumber(ARGV[at + 3]),
      nfields = tonumber(ARGV[at + 4]), ncallbacks = tonumber(ARGV[at + 5]), njobs = tonumber(ARGV[at + 6]),
    }
    e.fields = at + 7
    e.callbacks = e.fields + 2 * e.nfields
    e.jobs = e.callbacks + e.ncallbacks
    at = e.jobs + 4 * e.njobs
    plan[i] = e
  end
  if token ~= "" and count > 0 then
    if not redis.call("SET", k(plan[1].bid, "flush-" .. token), "1", "NX", "EX", 86400) then
      return { "done" }
    end
  end
  -- Check everything before writing anything.
  local created = {}
  for _, e in ipairs(plan) do
    local h = k(e.bid)
    if e.new then
      if redis.call("EXISTS", h) == 1 then
        return { "exists", e.bid }
      end
      if e.parent ~= "" and not created[e.parent] then
        if not ours(e.parent) then
          return { "no_parent", e.parent }
        end
        if redis.call("HEXISTS", k(e.parent), "complete_at") == 1 then
          return { "parent_closed", e.parent }
        end
      end
      created[e.bid] = true
    elseif not created[e.bid] then
      if not ours(e.bid) then
        return { "missing", e.bid }
      end
      if redis.call("HEXISTS", h, "complete_at") == 1 then
        return { "closed", e.bid }
      end
    end
  end
  local queues = {}
  for _, e in ipairs(plan) do
    local h = k(e.bid)
    if e.new then
      redis.call("HSET", h, "wurk", "1", "created_at", now, "total", 0, "pending", 0, "parent_bid", e.parent)
      for f = e.fields, e.fields + 2 * e.nfields - 1, 2 do
        redis.call("HSET", h, ARGV[f], ARGV[f + 1])
      end
      redis.call("EXPIRE", h, e.ttl, "NX")
      index_add("batches", e.bid)
      if e.parent ~= "" then
        for _, suffix in ipairs({ "kids", "pkids", "ukids" }) do
          redis.call("SADD", k(e.parent, suffix), e.bid)
          keep(e.parent, k(e.parent, suffix))
        end
      end
    end
    local list = k(e.bid, "callbacks")
    for c = e.callbacks, e.callbacks + e.ncallbacks - 1 do
      if not redis.call("LPOS", list, ARGV[c]) and redis.call("LLEN", list) < callbacks_max then
        redis.call("RPUSH", list, ARGV[c])
      end
    end
    if e.ncallbacks > 0 then
      keep(e.bid, list)
    end
    local added = 0
    for j = e.jobs, e.jobs + 4 * e.njobs - 1, 4 do
      if redis.call("SADD", k(e.bid, "jids"), ARGV[j]) == 1 then
        added = added + 1
      end
      local queue, score = ARGV[j + 1], ARGV[j + 2]
      if score == "" then
        queues[queue] = true
        redis.call("LPUSH", "queue:" .. queue, ARGV[j + 3])
      else
        redis.call("ZADD", "schedule", score, ARGV[j + 3])
      end
    end
    if added > 0 then
      add(e.bid, "total", added)
      add(e.bid, "pending", added)
      keep(e.bid, k(e.bid, "jids"))
    end
  end
  for queue in pairs(queues) do
    redis.call("SADD", "queues", queue)
  end
  -- An empty block still fires: settle the innermost batches first, so a drained child
  -- reports to its parent before the parent is looked at.
  for i = #plan, 1, -1 do
    settle(plan[i].bid)
  end
  return { "ok" }
end

return redis.error_reply("unknown batch operation " .. tostring(op))
