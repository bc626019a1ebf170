"""The host side of the in-process executor: the pool of child processes and what it stands on.

* ``runs.py``: a run's life cycle, from a resolved request to its outcome (another child
  when the one it got recycled before taking it).
* ``pool.py``: the slots, the line of callers waiting for a child, the standby child.
* ``child.py``: one supervised child process (``ChildProcess``), and beside it:

  * ``spawn.py``: what a child is started with, its pipes, the handshake;
  * ``reader.py``: its frames, read by the loop itself (the only place its death is seen);
  * ``calls.py``: the run in flight, its tool calls and fetches, its clock, the backstop;
  * ``results.py``: a finished run's result, read from its JSON text;
  * ``exits.py``: a child's death, mapped to a fault or to the program's outcome.

* ``placement.py``: the core each child is pinned to, counted host-wide.
* ``mark.py``: the started mark, a page each child shares with the host (the child's half
  is here too: both ends read one layout).
* ``turns.py``: at most N holders at once, free to leave the line (a run's tool calls).
* ``eager.py``: a tool call's first step run at once, without a task per call.
* ``nesting.py``: data nested deeper than the stack allows, read again on a fresh stack.
* ``asyncio_internals.py``: every private asyncio API the host relies on, fenced.

The child's own side is ``codemode/_child/``. Nothing is imported here.
"""
