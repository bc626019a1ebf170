"""The Lua scripts that make the fleet's decisions atomic in Redis, and how they are run.

Each script is a file of its own in ``lua/`` (package data), read once per process
(:func:`lua_source`) and run by its SHA1 (sent whole when Redis does not know it). All
times are Redis time (``TIME``), so hosts and workers with skewed clocks agree on
deadlines. Each script touches one job's keys plus a fleet-wide key; the fleet does not
support Redis Cluster (the admission key lives in another slot).

* ``admit.lua``: the fleet-wide bound. Drop lapsed slots, refuse past ``limit``, else take
  one and enqueue the job's Celery message (and refresh the host's heartbeat): an admitted
  job is always queued, a refused one never (see ``host/producer.py``).
* ``claim.lua``: a worker's first act on a job. The first writer of the claim key wins; a
  job past its start-by time, or whose host is gone, is marked and never started.
* ``renew.lua``: a running job's lease, renewed from a thread of its own
  (``worker/leases.py``).
* ``settle.lua``: the producer's side of the claim race: mark a job that no worker claimed
  as expired (at its start-by time) or cancelled, so that no worker starts it later.
* ``finish.lua``: a worker's last act on a job: its outcome on up (and the reader's close
  on down), its admission slot freed, its lease dropped, atomically.
* ``refuse.lua``: a worker's answer to a job it refused (not signed with its key): the
  job's host is told INVALID_REQUEST and the claim marked ``refused``, only for a live
  host's admitted, unclaimed job (``worker/intake.py``).

:class:`FleetScripts` runs the job scripts over links (``link.py``): hiredis on the socket,
pipelined on one connection per event loop, instead of redis-py's client, whose Python
cost per command exceeds the command's own round trip.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from .link import Links

__all__ = ["Admission", "ClaimResult", "FleetScripts", "SettleResult", "lua_source"]

LUA_DIR: Final = "lua"
"""The package folder the scripts live in, one ``<name>.lua`` each (package data)."""


@functools.cache
def lua_source(name: str) -> str:
    """The source of ``lua/<name>.lua``, read once per process."""
    return (resources.files(__name__.rpartition(".")[0]) / LUA_DIR / f"{name}.lua").read_text(
        encoding="utf-8"
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
        self._admit = links.script(lua_source("admit"))
        self._claim = links.script(lua_source("claim"))
        self._settle = links.script(lua_source("settle"))
        self._finish = links.script(lua_source("finish"))

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
