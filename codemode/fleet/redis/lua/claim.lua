-- claim: a worker's first act on a job. The first writer of the claim key wins; a job
-- past its start-by time, or whose host is gone, is marked and never started.
-- KEYS: claim, up, lease, host, admission
-- ARGV: worker_id, start_by_ms, lease_ttl_ms, key_ttl_ms, job_id, started_msg, expired_msg,
--       announce ('1': push started_msg on up; '0': the worker sends it later, if at all)
-- Returns {state, holder}: started | taken (holder: who has it) | expired | host-gone.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('GET', KEYS[1])
if holder then return {'taken', holder} end
local start_by = tonumber(ARGV[2])
local key_ttl = tonumber(ARGV[4])
if now > start_by then
  redis.call('SET', KEYS[1], 'expired', 'PX', key_ttl)
  redis.call('RPUSH', KEYS[2], ARGV[7])
  redis.call('PEXPIRE', KEYS[2], key_ttl)
  redis.call('ZREM', KEYS[5], ARGV[5])
  return {'expired', ''}
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('SET', KEYS[1], 'host-gone', 'PX', key_ttl)
  redis.call('ZREM', KEYS[5], ARGV[5])
  return {'host-gone', ''}
end
-- The claim outlives the start-by time: a duplicate delivered before it is refused by
-- the claim, one delivered after it by the time check above.
redis.call('SET', KEYS[1], ARGV[1], 'PX', math.max(key_ttl, start_by - now + key_ttl))
redis.call('SET', KEYS[3], ARGV[1], 'PX', tonumber(ARGV[3]))
if ARGV[8] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], key_ttl)
end
redis.call('ZADD', KEYS[5], 'XX', now + key_ttl, ARGV[5])
return {'started', ''}
