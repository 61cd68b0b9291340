-- Acquire and Seize.
-- KEYS: 1 lease record, 2 last token (no expiry), 3 candidates (holder →
-- seen until), 4 their attributes (see common.lua).
-- ARGV: 1 name, 2 holder, 3 ttl µs, 4 dead holder, 5 dead token (Seize;
-- '' and 0 for Acquire), 6 wake-up channel.
-- Reply: result(1, granted record) or result(0, the record that refuses).
local name, holder, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cur = read(KEYS[1])
if cur then
  local blocked = held(cur)
  if blocked and cur.holder == ARGV[4] and cur.token == tonumber(ARGV[5]) then
    blocked = false -- the tenure was proved dead
  end
  if cur.resv > now then
    if cur.succ ~= '' then
      blocked = blocked or holder ~= cur.succ
    elseif cur.excl ~= '' then
      blocked = blocked or holder == cur.excl
    end
  end
  if blocked then
    -- Seen again (lease.SeeAgain): what holder said, if anything, is
    -- kept and lasts as long.
    local seen = int(now + 2 * ttl)
    redis.call('ZADD', KEYS[3], seen, holder)
    local said = findAttrs(KEYS[4], holder)
    if said then
      redis.call('ZADD', KEYS[4], seen, said)
    end
    tidyCandidates(KEYS[3], KEYS[4])
    return result(0, cur)
  end
end
local last = tonumber(redis.call('GET', KEYS[2])) or 0
if cur and cur.token > last then
  last = cur.token
end
local token = math.max(last + 1, math.floor(now / 1000))
redis.call('SET', KEYS[2], int(token))
local r = {name = name, holder = holder, token = token, acq = now, ren = now, exp = now + ttl,
  rel = '0', sd = '0', succ = '', excl = '', resv = 0, where = ''}
write(KEYS[1], r)
redis.call('PUBLISH', ARGV[6], name)
return result(1, r)
