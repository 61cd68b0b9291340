-- Get and List. KEYS: lease records. Reply: the server's now, then one
-- entry per key: its record, or null.
local out = {int(now)}
for i, key in ipairs(KEYS) do
  out[i + 1] = fields(read(key))
end
return out
