"""The host side of the in-process executor: the pool of child processes and what it stands on.

* ``pool.py``: the slots, the line of callers waiting for a child, the standby child.
* ``placement.py``: the core each child is pinned to, counted host-wide.
* ``mark.py``: the started mark, a page each child shares with the host (the child's half
  is here too: both ends read one layout).
* ``turns.py``: at most N holders at once, free to leave the line (a run's tool calls).
* ``eager.py``: a tool call's first step run at once, without a task per call.
* ``nesting.py``: data nested deeper than the stack allows, read again on a fresh stack.
* ``asyncio_internals.py``: every private asyncio API the host relies on, fenced.

One supervised child (spawning, the handshake, reading its frames) is ``codemode/_worker.py``;
the child's own side is ``codemode/_child/``. Nothing is imported here.
"""
