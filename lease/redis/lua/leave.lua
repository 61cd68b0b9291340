-- Leave. ARGV (after group.lua's): 4 member. Reply: {1 or 0, now}.
if redis.call('ZREM', KEYS[2], ARGV[4]) == 0 then
  return {0, int(now)}
end
redis.call('PUBLISH', channel, group)
return {1, int(now)}
