-- Renew. KEYS: 1 lease record. ARGV: 1 holder, 2 token, 3 ttl µs.
-- Reply: result(1, renewed record), or result(0, nil) when lost.
local r = read(KEYS[1])
if not heldBy(r, ARGV[1], tonumber(ARGV[2])) then
  return result(0, nil)
end
r.ren, r.exp = now, now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'ren', int(r.ren), 'exp', int(r.exp))
return result(1, r)
