-- Release. KEYS: 1 lease record. ARGV: 1 holder, 2 token, 3 wake-up
-- channel. Reply: result(1 or 0, nil).
local r = read(KEYS[1])
if not heldBy(r, ARGV[1], tonumber(ARGV[2])) then
  return result(0, nil)
end
redis.call('HSET', KEYS[1], 'rel', '1')
redis.call('PUBLISH', ARGV[3], r.name)
return result(1, nil)
