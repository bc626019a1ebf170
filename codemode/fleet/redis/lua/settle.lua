-- settle: the producer's side of the claim race: mark a job that no worker claimed as
-- expired (at its start-by time), cancelled or worker-gone, so that no worker starts it.
-- KEYS: claim, admission   ARGV: start_by_ms, job_id, key_ttl_ms, mark, force ('1'/'0')
-- Returns {state, holder, wait_ms}: done | taken (holder: the claim's value) | wait (not
-- due yet: look again in wait_ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('GET', KEYS[1])
if holder then return {'taken', holder, 0} end
local start_by = tonumber(ARGV[1])
if ARGV[5] == '0' and now <= start_by then return {'wait', '', start_by - now + 1} end
redis.call('SET', KEYS[1], ARGV[4], 'PX', tonumber(ARGV[3]))
redis.call('ZREM', KEYS[2], ARGV[2])
return {'done', '', 0}
