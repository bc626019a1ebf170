-- refuse: a worker that refused a job's message (not signed with its key) tells the job's
-- host, but only a live host waiting on a job it admitted and no worker took: the host's
-- heartbeat key exists, the job holds an admission slot (only a host's admit.lua puts it
-- there), and the claim is free. The claim is set to the refusal's mark with it, so no copy
-- of the job starts later, and the slot is freed.
-- KEYS: claim, up, host, admission   ARGV: job_id, key_ttl_ms, failed_msg, mark
-- Returns answered | host-gone | not-admitted | claimed.
if redis.call('EXISTS', KEYS[3]) == 0 then return 'host-gone' end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then return 'not-admitted' end
if not redis.call('SET', KEYS[1], ARGV[4], 'PX', tonumber(ARGV[2]), 'NX') then return 'claimed' end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
redis.call('ZREM', KEYS[4], ARGV[1])
return 'answered'
