-- Shared by every script: the server's clock and the lease record.
--
-- A lease record is a hash without expiry. Times are microseconds since the
-- epoch by the server's clock (TIME); rel and sd are '0' or '1'; resv is 0
-- when there is no step-down reservation. Numbers are written with
-- string.format('%d') so that they never turn into exponent notation.

redis.replicate_commands() -- effects replication; the default since Redis 5
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local FIELDS = {'name', 'holder', 'token', 'acq', 'ren', 'exp', 'rel', 'sd', 'succ', 'excl', 'resv', 'where'}
local NUMERIC = {token = true, acq = true, ren = true, exp = true, resv = true}

local function int(n)
  return string.format('%d', n)
end

-- read returns the record at key, or nil when there is none.
local function read(key)
  local v = redis.call('HMGET', key, unpack(FIELDS))
  if not v[1] or not v[3] then
    return nil
  end
  local r = {}
  for i, f in ipairs(FIELDS) do
    local x = v[i] or ''
    if NUMERIC[f] then
      x = tonumber(x) or 0
    end
    r[f] = x
  end
  return r
end

local function write(key, r)
  local args = {}
  for _, f in ipairs(FIELDS) do
    args[#args + 1] = f
    if NUMERIC[f] then
      args[#args + 1] = int(r[f])
    else
      args[#args + 1] = r[f]
    end
  end
  redis.call('HSET', key, unpack(args))
end

local function held(r)
  return r.rel ~= '1' and r.exp > now
end

local function heldBy(r, holder, token)
  return r ~= nil and held(r) and r.holder == holder and r.token == token
end

-- fields is the record as the reply carries it, in FIELDS order; false
-- (a null reply) for no record.
local function fields(r)
  if not r then
    return false
  end
  local out = {}
  for i, f in ipairs(FIELDS) do
    if NUMERIC[f] then
      out[i] = int(r[f])
    else
      out[i] = r[f]
    end
  end
  return out
end

-- result is every record script's reply: a status, the server's now, and
-- the record.
local function result(status, r)
  return {status, int(now), fields(r)}
end

-- A candidate's attributes, what it said when it campaigned, live in a
-- sorted set beside the candidates: one member per candidate that said
-- anything, HOLDER .. '\0' .. ATTRIBUTES (an identity holds no control
-- character), scored as the candidate, seen until, so that they end with
-- it. A leaderrun that does not know them extends the candidate alone:
-- its own candidates have none. ATTRIBUTES is "PRIORITY PREEMPT
-- INELIGIBLE_UNTIL NOTE": PREEMPT '0' or '1', INELIGIBLE_UNTIL µs or 0,
-- the note, last, any bytes.

-- findAttrs returns holder's member in the attributes set attrs, or nil.
local function findAttrs(attrs, holder)
  local prefix = holder .. '\0'
  for _, m in ipairs(redis.call('ZRANGE', attrs, 0, -1)) do
    if string.sub(m, 1, #prefix) == prefix then
      return m
    end
  end
  return nil
end

-- tidyCandidates drops the candidates in cand that ended, and their
-- attributes in attrs, and makes both keys expire with the last
-- candidate.
local function tidyCandidates(cand, attrs)
  redis.call('ZREMRANGEBYSCORE', cand, '-inf', int(now))
  redis.call('ZREMRANGEBYSCORE', attrs, '-inf', int(now))
  local last = redis.call('ZRANGE', cand, -1, -1, 'WITHSCORES')
  if #last > 0 then
    local at = int(math.ceil(tonumber(last[2]) / 1000))
    redis.call('PEXPIREAT', cand, at)
    redis.call('PEXPIREAT', attrs, at)
  end
end
