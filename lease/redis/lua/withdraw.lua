-- Withdraw. KEYS: 1 candidates, 2 their attributes. ARGV: 1 holder.
-- Reply: {now}.
redis.call('ZREM', KEYS[1], ARGV[1])
local said = findAttrs(KEYS[2], ARGV[1])
if said then
  redis.call('ZREM', KEYS[2], said)
end
tidyCandidates(KEYS[1], KEYS[2])
return {int(now)}
