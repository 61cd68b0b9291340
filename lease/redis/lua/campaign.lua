-- Campaign (lease.Campaign). KEYS: 1 candidates (holder → seen until µs),
-- 2 their attributes (see common.lua). ARGV: 1 holder, 2 ttl µs,
-- 3 priority, 4 preempt ('0' or '1'), 5 ineligible µs (≤ 0: eligible),
-- 6 note. Reply: {now}.
local holder, ttl = ARGV[1], tonumber(ARGV[2])
local priority, preempt, ineligible, note = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), ARGV[6]
local untilUS = 0
if ineligible > 0 then
  untilUS = now + ineligible
end
local seen = int(now + 2 * ttl)
redis.call('ZADD', KEYS[1], seen, holder)
local said = findAttrs(KEYS[2], holder)
if said then
  redis.call('ZREM', KEYS[2], said)
end
if priority ~= 0 or preempt ~= '0' or untilUS ~= 0 or note ~= '' then
  redis.call('ZADD', KEYS[2], seen, holder .. '\0' .. int(priority) .. ' ' .. preempt .. ' ' .. int(untilUS) .. ' ' .. note)
end
tidyCandidates(KEYS[1], KEYS[2])
return {int(now)}
