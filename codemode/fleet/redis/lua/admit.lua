-- admit: the fleet-wide bound. Drop lapsed slots, refuse past the limit, else take one
-- and enqueue the job's Celery message; an admitted job is always queued, a refused one
-- never. The host's heartbeat is refreshed with every admission, so a worker never finds
-- the host of a job it was just handed gone (after a Redis restart, say).
-- KEYS: admission, host, queue   ARGV: job_id, limit, hold_ms, host_ttl_ms, message
-- Returns {admitted (0/1), Redis time (ms), jobs holding a slot}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[4]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then return {0, now, n} end
local hold = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + hold, ARGV[1])
if redis.call('PTTL', KEYS[1]) < hold then redis.call('PEXPIRE', KEYS[1], hold) end
redis.call('LPUSH', KEYS[3], ARGV[5])
return {1, now, n + 1}
