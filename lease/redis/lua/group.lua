-- Shared by the group scripts.
-- KEYS: 1 the group (a hash: partitions), 2 its members (a sorted set:
-- identity → expiry µs).
-- ARGV: 1 the stem of its partitions' lease keys (the key of partition p
-- is stem .. p), 2 the group's name, 3 the wake-up channel; each script's
-- own arguments follow.

local stem, group, channel = ARGV[1], ARGV[2], ARGV[3]

local function partitions()
  return tonumber(redis.call('HGET', KEYS[1], 'partitions'))
end

-- keep extends member's record to now + ttl, and wakes the group's waiters
-- if that adds a member (new, expired or gone). It also forgets members
-- expired for longer than ttl.
local function keep(member, ttl)
  local old = tonumber(redis.call('ZSCORE', KEYS[2], member))
  redis.call('ZADD', KEYS[2], int(now + ttl), member)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. int(now - ttl))
  if not old or old <= now then
    redis.call('PUBLISH', channel, group)
  end
end

-- view is every group script's reply: a status, the server's now, the
-- number of partitions n, the live members with their expiry, and the n
-- partitions' records (null for one never acquired).
local function view(status, n)
  local members = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. int(now), '+inf', 'WITHSCORES')
  for i = 2, #members, 2 do
    members[i] = int(tonumber(members[i])) -- however the server formats a double
  end
  local leases = {}
  for p = 0, n - 1 do
    leases[p + 1] = fields(read(stem .. int(p)))
  end
  return {status, int(now), n, members, leases}
end
