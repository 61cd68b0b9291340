-- RenewMember: a member's whole renewal round. ARGV (after group.lua's):
-- 4 member, 5 ttl µs, then pairs of partition and token, the member's
-- claims. Each claimed partition lease that member still holds with that
-- token is extended to now + ttl, as renew.lua would.
-- Reply: view(1, n), or {0, now} for a group never joined.
local n = partitions()
if not n then
  return {0, int(now)}
end
local member, ttl = ARGV[4], tonumber(ARGV[5])
keep(member, ttl)
local exp = int(now + ttl)
for i = 6, #ARGV - 1, 2 do
  local p = tonumber(ARGV[i])
  if p and p >= 0 and p < n then
    local key = stem .. int(p)
    if heldBy(read(key), member, tonumber(ARGV[i + 1])) then
      redis.call('HSET', key, 'ren', int(now), 'exp', exp)
    end
  end
end
return view(1, n)
