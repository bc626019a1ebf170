"""A V8 startup snapshot holding the runtime, so that every fresh isolate starts with it.

Most of a trivial run's CPU went into installing the runtime in each new isolate:
compiling and running the runtime's JavaScript. V8 can instead start an isolate from a
*startup snapshot*: a serialized heap in which a script has already run. The child makes
one snapshot when it starts, with its runtime (and the child's settings) already run in it
(runtime.install_runtime); from then on each isolate deserializes that heap. Each isolate
is still fresh, its own heap made from the same bytes: nothing one run does reaches the
next.

What a snapshot cannot hold (a SharedArrayBuffer) and what each isolate must have of its
own (a random seed, a time origin) is made by the runtime's ``boot``, once per isolate.
V8 reseeds ``Math.random`` for each isolate made from a snapshot (tests/test_snapshot.py).

How it is made and installed rests on mini-racer's library internals (V8's C++ exports,
the layout of ``CreateParams``, a redirected offset table slot): that part lives with the
rest of them in miniracer_internals.py. This module names it for the code that asks.
"""

from __future__ import annotations

from .miniracer_internals import install_snapshot as install
from .miniracer_internals import redirected
from .miniracer_internals import snapshot_installed as installed

__all__ = ["install", "installed", "redirected"]
