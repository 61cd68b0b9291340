-- GetGroup. Reply: view(1, n), or {0, now} for a group never joined.
local n = partitions()
if not n then
  return {0, int(now)}
end
return view(1, n)
