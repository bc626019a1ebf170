-- renew: a running job's lease, renewed by its worker's lease keeper (worker/leases.py),
-- with the expiries of the job's keys and its admission slot; answers whether its host
-- is still there. A host found gone frees the slot here.
-- KEYS: lease, host, up, down, claim, admission   ARGV: worker_id, lease_ttl, key_ttl, job_id
-- Returns 1 (host there), 0 (host gone: its slot is freed), -1 (the lease is not ours).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key_ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
for i = 3, 5 do
  if redis.call('PTTL', KEYS[i]) < key_ttl then redis.call('PEXPIRE', KEYS[i], key_ttl) end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[6], ARGV[4])
  return 0
end
redis.call('ZADD', KEYS[6], 'XX', now + key_ttl, ARGV[4])
if redis.call('PTTL', KEYS[6]) < key_ttl then redis.call('PEXPIRE', KEYS[6], key_ttl) end
return 1
