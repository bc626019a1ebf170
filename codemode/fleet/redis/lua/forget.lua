-- forget: kombu's ack (worker/transport.py): the delivery's record out of both keys.
-- KEYS: unacked index, unacked hash   ARGV: delivery tag
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
