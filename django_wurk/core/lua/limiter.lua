-- Rate limiters: every decision of every kind of limiter, one atomic step each, timed by the
-- server's clock (TIME), so every process on every host agrees on what "now" is.
--
-- KEYS[1] the limiter's metadata hash (lmtr:<name>)
-- KEYS[2] the set of limiter names (lmtr-list)
-- KEYS[3] the limiter's state key (lmtr-cs: ZSET, lmtr-b: HASH, lmtr-w: ZSET, lmtr-l: HASH,
--         lmtr-p: HASH)
-- KEYS[4] concurrent limiters only: their counters (lmtr-stats:<name>, HASH)
-- ARGV[1] the operation; ARGV[2] the limiter's name; ARGV[3] its type; ARGV[4] its options
--   (JSON, stored as given); ARGV[5] its fingerprint; ARGV[6] the TTL of its keys (seconds);
--   ARGV[7] "now" in epoch seconds, or "" for the server's TIME (tests pass a "now" to reach
--   a boundary without waiting for it); ARGV[8...] the operation's own arguments.
--
-- Operations that decide (acquire, bucket, window, leaky, points, points_used) first
-- register the limiter: the metadata hash is written, and the name added to the list, only
-- when the hash does not exist (so a name is added once per lifetime, not on every call);
-- its TTL is renewed on every call, so a limiter nobody uses disappears and the list is
-- swept of it later. "status" registers nothing and writes nothing (a status read must
-- never trim or age the state it reports).
--
-- A key that holds another type than its limiter writes (someone else's data, an old
-- format) is deleted and started afresh, and the reply says so: a limiter forgets its count
-- once rather than failing every caller forever. A field that is not a number is read as
-- absent, the same way.
--
-- Replies of the deciding operations: {admitted (1/0), registered (1 when the metadata was
-- created), reset (1 when a key of the wrong type was deleted), wait} where wait is the
-- number of seconds, as a string, until a refused call could be admitted ("" when unknown).
-- Numbers with fractions are returned as strings: Lua numbers in a reply become integers.

local meta, list, state, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, name, kind, options, fingerprint = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl = tonumber(ARGV[6])
local now
if ARGV[7] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[7])
end

-- The longest lock_timeout a limiter accepts (ten years, as core/features/limiters/base.py).
local MAX_SECONDS = 315360000

local function fmt(x)
  return string.format("%.6f", x)
end

local function kind_of(key)
  return redis.call("TYPE", key)["ok"]
end

-- Deletes ``key`` if it holds something else than ``wanted``; 1 when it did.
local function ensure(key, wanted)
  local found = kind_of(key)
  if found ~= "none" and found ~= wanted then
    redis.call("DEL", key)
    return 1
  end
  return 0
end

local reset = 0

local function register()
  reset = math.max(reset, ensure(meta, "hash"))
  local created = 0
  if redis.call("EXISTS", meta) == 0 then
    redis.call("HSET", meta, "type", kind, "options", options, "fingerprint", fingerprint, "name", name)
    created = 1
    reset = math.max(reset, ensure(list, "set"))
    redis.call("SADD", list, name)
  elseif redis.call("HGET", meta, "fingerprint") ~= fingerprint then
    -- Same name, other settings (a deploy changed them): the latest description wins.
    redis.call("HSET", meta, "type", kind, "options", options, "fingerprint", fingerprint, "name", name)
  end
  redis.call("EXPIRE", meta, ttl)
  return created
end

local function number(value, default)
  local n = tonumber(value)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then
    return default
  end
  return n
end

-- Concurrent: a ZSET of holders (one token per acquisition), score = when the hold expires.
local function concurrent_acquire()
  local created = register()
  reset = math.max(reset, ensure(state, "zset"), ensure(stats, "hash"))
  local limit, lock_timeout, token = tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10]
  local first = ARGV[11] == "1"
  -- Holders past their lock_timeout died or overran: their slots go to the living.
  local reclaimed = redis.call("ZREMRANGEBYSCORE", state, "-inf", fmt(now))
  -- No lock_timeout is longer than ten years: a hold expiring later (inf) is no holder's.
    + redis.call("ZREMRANGEBYSCORE", state, "(" .. fmt(now + MAX_SECONDS), "+inf")
  if reclaimed > 0 then
    redis.call("HINCRBY", stats, "reclaimed", reclaimed)
  end
  if redis.call("ZCARD", state) < limit then
    redis.call("ZADD", state, fmt(now + lock_timeout), token)
    redis.call("EXPIRE", state, math.max(ttl, math.ceil(lock_timeout) + 1))
    redis.call("HINCRBY", stats, "held", 1)
    redis.call("HINCRBY", stats, first and "immediate" or "waited", 1)
    redis.call("EXPIRE", stats, ttl)
    return {1, created, reset, ""}
  end
  local soonest = redis.call("ZRANGE", state, 0, 0, "WITHSCORES")
  return {0, created, reset, fmt(math.max(0, tonumber(soonest[2]) - now))}
end

local function concurrent_release()
  local token, held_ms = ARGV[8], tonumber(ARGV[9])
  if kind_of(state) ~= "zset" then
    return 0
  end
  local removed = redis.call("ZREM", state, token)
  if removed == 1 then
    ensure(stats, "hash")
    redis.call("HINCRBY", stats, "held_time", math.floor(held_ms))
    redis.call("EXPIRE", stats, ttl)
  end
  return removed
end

-- Bucket: fixed calendar periods of ``interval`` seconds; the hash holds the current period's
-- index and its count, so a new period starts at zero without a key per period. It expires
-- two intervals after its last use.
local function bucket()
  local created = register()
  reset = math.max(reset, ensure(state, "hash"))
  local count, interval = tonumber(ARGV[8]), tonumber(ARGV[9])
  local period = math.floor(now / interval)
  local used = 0
  local fields = redis.call("HMGET", state, "period", "count")
  if number(fields[1], -1) == period then
    used = number(fields[2], 0)
  end
  if used < count then
    redis.call("HSET", state, "period", period, "count", used + 1)
    redis.call("EXPIRE", state, 2 * interval)
    return {1, created, reset, ""}
  end
  return {0, created, reset, fmt((period + 1) * interval - now)}
end

-- Window: a ZSET of the calls admitted during the last ``seconds`` (score = when).
local function window()
  local created = register()
  reset = math.max(reset, ensure(state, "zset"))
  local count, seconds, member = tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10]
  redis.call("ZREMRANGEBYSCORE", state, "-inf", fmt(now - seconds))
  -- A call admitted a whole window in the future (inf) is not one this limiter recorded.
  redis.call("ZREMRANGEBYSCORE", state, "(" .. fmt(now + seconds), "+inf")
  if redis.call("ZCARD", state) < count then
    redis.call("ZADD", state, fmt(now), member)
    redis.call("EXPIRE", state, math.ceil(seconds) + 1)
    return {1, created, reset, ""}
  end
  local oldest = redis.call("ZRANGE", state, 0, 0, "WITHSCORES")
  return {0, created, reset, fmt(math.max(0, tonumber(oldest[2]) + seconds - now))}
end

-- Leaky: a bucket holding up to ``size`` drops that drains at size/drain drops a second;
-- each call adds one drop, refused when it would overflow.
local function leaky_level(size, rate)
  local fields = redis.call("HMGET", state, "level", "last")
  local level = number(fields[1], 0)
  local last = number(fields[2], now)
  level = math.min(size, math.max(0, level - math.max(0, now - last) * rate))
  return level
end

local function leaky()
  local created = register()
  reset = math.max(reset, ensure(state, "hash"))
  local size, drain = tonumber(ARGV[8]), tonumber(ARGV[9])
  local rate = size / drain
  local level = leaky_level(size, rate)
  -- A millionth of a drop of slack: the drained level is computed in floating point.
  if level + 1 <= size + 0.000001 then
    redis.call("HSET", state, "level", fmt(level + 1), "last", fmt(now))
    redis.call("EXPIRE", state, ttl)
    return {1, created, reset, ""}
  end
  return {0, created, reset, fmt((level + 1 - size) / rate)}
end

-- Points: a balance of at most ``initial`` points, refilled at ``refill`` points a second.
local function points_balance(initial, refill)
  local fields = redis.call("HMGET", state, "points", "last")
  local points = number(fields[1], initial)
  local last = number(fields[2], now)
  return math.min(initial, points + math.max(0, now - last) * refill)
end

local function points()
  local created = register()
  reset = math.max(reset, ensure(state, "hash"))
  local initial, refill, estimate = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local balance = points_balance(initial, refill)
  if balance >= estimate then
    redis.call("HSET", state, "points", fmt(balance - estimate), "last", fmt(now))
    redis.call("EXPIRE", state, ttl)
    return {1, created, reset, ""}
  end
  if estimate > initial or refill <= 0 then
    return {0, created, reset, ""}
  end
  return {0, created, reset, fmt((estimate - balance) / refill)}
end

-- The caller spent ``delta`` points more than it estimated (less when negative): settle it.
-- The balance may go below zero (the next calls wait for the debt to refill); never above
-- ``initial``.
local function points_used()
  local created = register()
  reset = math.max(reset, ensure(state, "hash"))
  local initial, refill, delta = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local balance = math.min(initial, points_balance(initial, refill) - delta)
  redis.call("HSET", state, "points", fmt(balance), "last", fmt(now))
  redis.call("EXPIRE", state, ttl)
  return {1, created, reset, ""}
end

-- Read-only: {used, reset_at} as strings ("" reset_at: nothing to wait for), or
-- {"WRONGTYPE", found type} when the state key holds something else.
local function status()
  local wanted = {concurrent = "zset", bucket = "hash", window = "zset", leaky = "hash", points = "hash"}
  local found = kind_of(state)
  if found ~= "none" and found ~= wanted[kind] then
    return {"WRONGTYPE", found}
  end
  if kind == "concurrent" then
    local upto = fmt(now + MAX_SECONDS)
    local used = redis.call("ZCOUNT", state, "(" .. fmt(now), upto)
    local soonest = redis.call("ZRANGEBYSCORE", state, "(" .. fmt(now), upto, "WITHSCORES", "LIMIT", 0, 1)
    return {tostring(used), soonest[2] and fmt(tonumber(soonest[2])) or ""}
  elseif kind == "bucket" then
    local interval = tonumber(ARGV[9])
    local period = math.floor(now / interval)
    local fields = redis.call("HMGET", state, "period", "count")
    local used = 0
    if number(fields[1], -1) == period then
      used = number(fields[2], 0)
    end
    return {tostring(used), fmt((period + 1) * interval)}
  elseif kind == "window" then
    local seconds = tonumber(ARGV[9])
    local from, upto = "(" .. fmt(now - seconds), fmt(now + seconds)
    local used = redis.call("ZCOUNT", state, from, upto)
    if used == 0 then
      return {"0", ""}
    end
    local oldest = redis.call("ZRANGEBYSCORE", state, from, upto, "WITHSCORES", "LIMIT", 0, 1)
    return {tostring(used), fmt(tonumber(oldest[2]) + seconds)}
  elseif kind == "leaky" then
    local size, drain = tonumber(ARGV[8]), tonumber(ARGV[9])
    local rate = size / drain
    local level = leaky_level(size, rate)
    return {fmt(level), level > 0 and fmt(now + level / rate) or ""}
  elseif kind == "points" then
    local initial, refill = tonumber(ARGV[8]), tonumber(ARGV[9])
    local balance = points_balance(initial, refill)
    local spent = initial - balance
    if spent <= 0 or refill <= 0 then
      return {fmt(math.max(0, spent)), ""}
    end
    return {fmt(spent), fmt(now + spent / refill)}
  end
  return {"0", ""}
end

if op == "acquire" then
  return concurrent_acquire()
elseif op == "release" then
  return concurrent_release()
elseif op == "bucket" then
  return bucket()
elseif op == "window" then
  return window()
elseif op == "leaky" then
  return leaky()
elseif op == "points" then
  return points()
elseif op == "points_used" then
  return points_used()
elseif op == "status" then
  return status()
end
return redis.error_reply("limiter.lua: unknown operation " .. tostring(op))
