-- Forget (lease.Forgettable). KEYS: 1 lease record, 2 last token, 3
-- candidates, 4 their attributes. ARGV: 1 wake-up channel.
-- Reply: result(1, record) when forgotten; result(0, nil) for no record;
-- result(0, record) for a held one; result(2, record) when the last token
-- is not yet behind the clock in milliseconds.
local r = read(KEYS[1])
if not r then
  return result(0, nil)
end
if held(r) then
  return result(0, r)
end
local last = math.max(r.token, tonumber(redis.call('GET', KEYS[2])) or 0)
if last >= math.floor(now / 1000) then
  return result(2, r)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('PUBLISH', ARGV[1], r.name)
return result(1, r)
