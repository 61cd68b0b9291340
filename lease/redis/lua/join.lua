-- Join. ARGV (after group.lua's): 4 partitions, 5 member, 6 ttl µs.
-- Reply: view(1, n), or {0, now, n} when the group has another number of
-- partitions.
local want = tonumber(ARGV[4])
redis.call('HSETNX', KEYS[1], 'partitions', int(want))
local n = partitions()
if n ~= want then
  return {0, int(now), n}
end
keep(ARGV[5], tonumber(ARGV[6]))
return view(1, n)
