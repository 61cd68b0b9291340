-- Candidates. KEYS: 1 candidates, 2 their attributes. Reply: {now, then
-- per live candidate: holder, seen until µs, attributes or false}.
local said = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. int(now), '+inf')) do
  local at = string.find(m, '\0', 1, true)
  if at then
    said[string.sub(m, 1, at - 1)] = string.sub(m, at + 1)
  end
end
local out = {int(now)}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = int(tonumber(live[i + 1]))
  out[#out + 1] = said[live[i]] or false
end
return out
