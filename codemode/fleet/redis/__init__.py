"""The fleet's Redis plumbing, shared by its host side and its worker side.

::

    link.py      the fleet's own connections (hiredis on the socket), pipelined per loop
    channel.py   reply channels: Redis lists with expiries, read with BLPOP
    scripts.py   the Lua scripts (lua/*.lua, loaded once) and how they are run
    keys.py      the keyspace and what expires when
    clock.py     Redis time, as a host estimates it
    client.py    redis-py clients made from the fleet's settings
    beat.py      a daemon thread for liveness beats (the host's heartbeat, a worker's leases)
"""
