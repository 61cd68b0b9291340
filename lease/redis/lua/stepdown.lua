-- RequestStepDown. KEYS: 1 lease record, 2 candidates, 3 for a partition
-- only: its group's members (identity → expiry µs). ARGV: 1 successor
-- ('' for none), 2 window µs, 3 wake-up channel.
-- Reply: result(1, updated record), or result(0, record or nil) when it
-- changed nothing.
local r = read(KEYS[1])
if not r then
  return result(0, nil)
end
local successor = ARGV[1]
local ok = held(r) and r.holder ~= successor
-- live reports whether successor's score in the sorted set key is ahead.
local function live(key)
  local score = tonumber(redis.call('ZSCORE', key, successor))
  return score ~= nil and score > now
end
if ok and successor ~= '' then
  ok = live(KEYS[2]) or (KEYS[3] ~= nil and live(KEYS[3]))
end
if not ok then
  return result(0, r)
end
r.sd, r.succ, r.resv = '1', successor, now + tonumber(ARGV[2])
if successor == '' then
  r.excl = r.holder
else
  r.excl = ''
end
redis.call('HSET', KEYS[1], 'sd', r.sd, 'succ', r.succ, 'excl', r.excl, 'resv', int(r.resv))
redis.call('PUBLISH', ARGV[3], r.name)
return result(1, r)
