-- record: kombu's unacked record of a delivery (worker/transport.py): its tag in the
-- index, scored by the time, and the message in the hash.
-- KEYS: unacked index, unacked hash   ARGV: time, delivery tag, record
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
