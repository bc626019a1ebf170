-- finish: a worker's last act on a job: its outcome on up (and the reader's close on
-- down), its admission slot freed, its lease dropped, atomically.
-- KEYS: up, down, admission, lease   ARGV: key_ttl_ms, job_id, final_msg, close_msg or ''
local ttl = tonumber(ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[4] ~= '' then
  redis.call('RPUSH', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('DEL', KEYS[4])
return 1
