"""The fleet's host side: what runs in the process that calls ``FleetExecutor.execute``.

::

    client.py      FleetExecutor: validate, admit and enqueue, wait
    session.py     one job from the host's side (reply channel, dispatch, policy, liveness)
    up_reader.py   the BLPOPs on one job's reply channel (calls served where they are read)
    watch.py       Redis's view of a quiet job: its lease, its claim, settling a queued one
    producer.py    a job's Celery task message (the admission script enqueues it)
    heartbeat.py   the host's heartbeat key, refreshed from a thread of its own
    handles.py     the table of retained handles this host holds
"""

from .client import FleetExecutor

__all__ = ["FleetExecutor"]
