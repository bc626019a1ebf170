"""The Lua scripts that make the fleet's decisions atomic in Redis.

All times are Redis time (``TIME``), so hosts and workers with skewed clocks agree on
deadlines. Each script touches one job's keys plus a fleet-wide key; the fleet does not
support Redis Cluster (the admission key lives in another slot).

* ``admit``: the fleet-wide bound. Drop lapsed slots, refuse past ``limit``, else take one
  and enqueue the job's Celery message (and refresh the host's heartbeat): an admitted job
  is always queued, a refused one never (see ``_producer.py``).
* ``claim``: a worker's first act on a job. The first writer of the claim key wins; a job
  past its start-by time, or whose host is gone, is marked and never started.
* (a running job's lease is renewed from a thread of its own: ``_leases.py``)
* ``settle``: the producer's side of the claim race: mark a job that no worker claimed
  as expired (at its start-by time) or cancelled, so that no worker starts it later.
* ``finish``: a worker's last act on a job: its outcome on up (and the reader's close on
  down), its admission slot freed, its lease dropped, atomically.

They run over links (``_link.py``): hiredis on the socket, pipelined on one connection per
event loop, instead of redis-py's client, whose Python cost per command exceeded the
command's own round trip. A script Redis does not know (after a restart) is sent whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ._link import Links

__all__ = ["Admission", "ClaimResult", "FleetScripts", "SettleResult"]

_NOW: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

_ADMIT: Final = (
    _NOW
    + """
-- KEYS: admission, host, queue   ARGV: job_id, limit, hold_ms, host_ttl_ms, message
-- The host's heartbeat is refreshed with every admission, so a worker never finds the
-- host of a job it was just handed gone (after a Redis restart, say).
redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[4]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then return {0, now, n} end
local hold = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + hold, ARGV[1])
if redis.call('PTTL', KEYS[1]) < hold then redis.call('PEXPIRE', KEYS[1], hold) end
redis.call('LPUSH', KEYS[3], ARGV[5])
return {1, now, n + 1}
"""
)

_CLAIM: Final = (
    _NOW
    + """
-- KEYS: claim, up, lease, host, admission
-- ARGV: worker_id, start_by_ms, lease_ttl_ms, key_ttl_ms, job_id, started_msg, expired_msg,
--       announce ('1': push started_msg on up; '0': the worker sends it later, if at all)
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
"""
)

_FINISH: Final = """
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
"""

_SETTLE: Final = (
    _NOW
    + """
-- KEYS: claim, admission   ARGV: start_by_ms, job_id, key_ttl_ms, mark, force
local holder = redis.call('GET', KEYS[1])
if holder then return {'taken', holder, 0} end
local start_by = tonumber(ARGV[1])
if ARGV[5] == '0' and now <= start_by then return {'wait', '', start_by - now + 1} end
redis.call('SET', KEYS[1], ARGV[4], 'PX', tonumber(ARGV[3]))
redis.call('ZREM', KEYS[2], ARGV[2])
return {'done', '', 0}
"""
)


@dataclass(frozen=True)
class Admission:
    admitted: bool
    now_ms: int
    count: int


@dataclass(frozen=True)
class ClaimResult:
    state: str  # started | taken | expired | host-gone
    holder: str = ""


@dataclass(frozen=True)
class SettleResult:
    state: str  # done | taken | wait
    holder: str = ""
    wait_ms: int = 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FleetScripts:
    """The scripts, run over one event loop's links."""

    def __init__(self, links: Links) -> None:
        self.links = links
        self._admit = links.script(_ADMIT)
        self._claim = links.script(_CLAIM)
        self._settle = links.script(_SETTLE)
        self._finish = links.script(_FINISH)

    async def admit(
        self,
        admission: str,
        host: str,
        queue: str,
        job_id: str,
        message: bytes,
        *,
        limit: int,
        hold_ms: int,
        host_ttl_ms: int,
    ) -> Admission:
        """Take a slot for ``job_id`` and push ``message`` onto the list ``queue``, or refuse
        (nothing pushed) when ``limit`` jobs already hold one."""
        ok, now, count = await self._admit(
            [admission, host, queue], [job_id, limit, hold_ms, host_ttl_ms, message]
        )
        return Admission(bool(ok), int(now), int(count))

    async def claim(
        self,
        keys: list[str],
        *,
        worker: str,
        start_by_ms: int,
        lease_ttl_ms: int,
        key_ttl_ms: int,
        job_id: str,
        started: bytes,
        expired: bytes,
        announce: bool = True,
    ) -> ClaimResult:
        """``announce``: push ``started`` on up with the claim (else the worker sends it)."""
        state, holder = await self._claim(
            keys,
            [
                worker,
                start_by_ms,
                lease_ttl_ms,
                key_ttl_ms,
                job_id,
                started,
                expired,
                "1" if announce else "0",
            ],
        )
        return ClaimResult(_text(state), _text(holder))

    async def finish(
        self, keys: list[str], *, key_ttl_ms: int, job_id: str, final: bytes, close: bytes | None
    ) -> None:
        """``keys``: up, down, admission, lease. ``close`` goes on down when a reader waits."""
        await self._finish(keys, [key_ttl_ms, job_id, final, close or b""])

    async def settle(
        self,
        claim: str,
        admission: str,
        *,
        start_by_ms: int,
        job_id: str,
        key_ttl_ms: int,
        mark: str,
        force: bool,
    ) -> SettleResult:
        state, holder, wait_ms = await self._settle(
            [claim, admission], [start_by_ms, job_id, key_ttl_ms, mark, "1" if force else "0"]
        )
        return SettleResult(_text(state), _text(holder), int(wait_ms))
