-- A key's time to live, for keys that are not strings (a string's is set by SET … PX, which has no
-- such issue). Up to 7.0, Redis's PEXPIRE reads the clock twice, once for the base of `ms` and once
-- to see whether that time has come; when `ms` passes between the two reads, the key is deleted at
-- once, with what the script just wrote to it. A millisecond ending between them is enough for a
-- TTL of 1 ms, and Redis descheduled between them for a TTL of 2, on a machine with more busy
-- processes than cores (bench/README.md has the counts). No TTL under 100 ms: a key kept longer
-- holds nothing that counts, as its entries are read by their own times.
local function expire_in(key, ms)
  call('PEXPIRE', key, max(ms, 100))
end
