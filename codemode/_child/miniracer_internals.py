"""Every use of mini-racer's private API, in one place.

mini-racer's public ``MiniRacer`` evaluates its own ``setTimeout`` into every context and
converts every value through wrappers with finalizers; the child builds bare contexts from
the layer under it and talks to the engine's library directly. That layer has no stability
promise, so everything the child relies on lives here, and :func:`check` (run at child
start-up, before V8 loads, and by tests/test_private_apis.py) names whatever an installed
release lacks. What this module relies on:

* modules ``py_mini_racer._context`` (``Context``, ``ContextType``), ``py_mini_racer._dll``
  (``init_mini_racer`` returning the library, ``mr_callback_func``, the ``_RawValue``
  layout: ``type``, ``len``, ``value.bytes_val``), ``py_mini_racer._exc``
  (``JSEvalException``), ``py_mini_racer._objects`` (``ObjectFactoryImpl``,
  ``_MiniRacerTypes``: ``str_utf8``, ``integer``, ``undefined``, ``execute_exception``);
* ``Context``'s fields, in its constructor's order: ``_dll``, ``_ctx``, ``event_loop``,
  ``_object_factory``, ``_next_async_callback_id``, ``_active_cancelable_mr_task_callbacks``,
  ``_non_cancelable_mr_task_results_queue``; its methods ``handle_callback_from_v8``,
  ``_register_cancelable_mr_task_callback``, ``_value_handle_to_python``,
  ``_wrap_raw_handle``, and its ``_free`` (replaced: value handles are freed in batches);
* the library's C functions (:data:`LIBRARY_FUNCTIONS`), and callback id 0 answered on
  the queue of tasks it never cancels;
* for the runtime's snapshot (optional: without it the runtime is evaluated per isolate,
  see miniracer_snapshot.py): V8's C++ exports ``CreateSnapshotDataBlobInternal``,
  ``Isolate::New``, ``Isolate::CreateParams::CreateParams``, the ``CreateParams`` layout of
  V8 14.4, and the library calling ``Isolate::New`` through its ``.got.plt``;
* optionally ``v8::V8::SetEntropySource`` (V8 then reads ``/dev/urandom`` itself).

The snapshot's part of this fenced area is ``miniracer_snapshot.py`` (re-exported here:
:func:`install_snapshot`, :func:`snapshot_installed`, :data:`redirected`).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import itertools
import os
import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .miniracer_snapshot import install_snapshot, redirected, snapshot_installed

if TYPE_CHECKING:
    from .threads import CallbackThread

__all__ = [
    "FIRST_ERROR",
    "INTEGER",
    "LIBRARY_FUNCTIONS",
    "STRING",
    "UNDEFINED",
    "JSEvalException",
    "RawContext",
    "await_drain",
    "check",
    "engine_library",
    "install_snapshot",
    "new_context",
    "post_drain",
    "read_text",
    "redirected",
    "snapshot_installed",
]

LIBRARY_FUNCTIONS = (
    "mr_init_context",
    "mr_free_context",
    "mr_eval",
    "mr_call_function",
    "mr_get_object_item",
    "mr_make_js_callback",
    "mr_cancel_task",
    "mr_free_value",
    "mr_alloc_string_val",
    "mr_alloc_int_val",
    "mr_v8_version",
)
"""The library's C functions the child calls."""
_CONTEXT_FIELDS = (
    "_dll",
    "_ctx",
    "event_loop",
    "_object_factory",
    "_next_async_callback_id",
    "_active_cancelable_mr_task_callbacks",
    "_non_cancelable_mr_task_results_queue",
)
"""``Context``'s fields in its constructor's order (see :func:`new_context`)."""
_CONTEXT_METHODS = (
    "handle_callback_from_v8",
    "_register_cancelable_mr_task_callback",
    "_value_handle_to_python",
    "_wrap_raw_handle",
    "eval_cancelable",
    "set_hard_memory_limit",
    "set_soft_memory_limit",
    "was_hard_memory_limit_reached",
)
_TYPE_NAMES = {"str_utf8": 5, "integer": 3, "undefined": 11, "execute_exception": 200}
"""``_MiniRacerTypes`` codes the child reads raw values by, and the values it expects."""


def check() -> list[str]:
    """What an installed mini-racer lacks of what this module relies on, each a sentence
    naming the missing piece (empty: all there). Needs no engine: cheap at start-up."""
    import dataclasses

    missing: list[str] = []
    modules: dict[str, Any] = {}
    for name in ("_context", "_dll", "_exc", "_objects"):
        try:
            modules[name] = __import__(f"py_mini_racer.{name}", fromlist=["_"])
        except ImportError as exc:
            missing.append(f"mini-racer has no module py_mini_racer.{name} ({exc}).")
    wanted = {
        "_context": ("Context", "ContextType"),
        "_dll": ("init_mini_racer", "mr_callback_func", "_RawValue"),
        "_exc": ("JSEvalException",),
        "_objects": ("ObjectFactoryImpl", "_MiniRacerTypes"),
    }
    for module, names in wanted.items():
        for name in names:
            if module in modules and not hasattr(modules[module], name):
                missing.append(f"mini-racer's py_mini_racer.{module} has no {name}.")
    context = getattr(modules.get("_context"), "Context", None)
    if context is not None:
        fields = [f.name for f in dataclasses.fields(context)] if dataclasses.is_dataclass(context) else []
        if fields[: len(_CONTEXT_FIELDS)] != list(_CONTEXT_FIELDS):
            missing.append(
                "mini-racer's Context no longer has the fields "
                + ", ".join(_CONTEXT_FIELDS)
                + " in that order."
            )
        for name in _CONTEXT_METHODS:
            if not hasattr(context, name):
                missing.append(f"mini-racer's Context has no method {name}.")
    types = getattr(modules.get("_objects"), "_MiniRacerTypes", None)
    if types is not None:
        for name, code in _TYPE_NAMES.items():
            if getattr(types, name, None) != code:
                missing.append(f"mini-racer's value type {name} is no longer {code}.")
    raw_value = getattr(modules.get("_dll"), "_RawValue", None)
    if raw_value is not None:
        fields = [f[0] for f in getattr(raw_value, "_fields_", ())]
        if fields[:3] != ["value", "len", "type"]:
            missing.append("mini-racer's raw value no longer has the fields value, len and type.")
    return missing


def check_library(dll: Any) -> list[str]:
    """What the loaded library lacks of :data:`LIBRARY_FUNCTIONS`, each a sentence."""
    return [
        f"mini-racer's library does not export {name}."
        for name in LIBRARY_FUNCTIONS
        if not hasattr(dll, name)
    ]


try:
    from py_mini_racer._context import Context, ContextType
    from py_mini_racer._dll import init_mini_racer, mr_callback_func
    from py_mini_racer._exc import JSEvalException
    from py_mini_racer._objects import ObjectFactoryImpl
except ImportError:  # pragma: no cover - check() names what is missing; the child stops there
    pass

STRING, INTEGER, UNDEFINED, FIRST_ERROR = 5, 3, 11, 200
"""mini-racer's type codes of a UTF-8 string, an integer and ``undefined``; codes from
:data:`FIRST_ERROR` on are errors (``_MiniRacerTypes``)."""
DRAIN_TIMEOUT_S = 5.0
"""How long closing an isolate waits for its thread to finish what was posted to it."""


def engine_library() -> Any:
    """mini-racer's loaded library (V8 initialized with the child's flags before), with
    V8's entropy source set (see :func:`_os_entropy`)."""
    dll = init_mini_racer(ignore_duplicate_init=True)
    _use_os_entropy(dll)
    return dll


class RawContext:
    """A bare context's raw operations, bound once per context: the library's functions
    with the context's handle already given (partials, so a call through one adds no
    Python frame), and the context's private fields the isolate uses."""

    __slots__ = (
        "_dll",
        "_raw",
        "alloc_int",
        "call_function",
        "callbacks",
        "cancel_task",
        "ctx",
        "eval",
        "free_value",
        "get_object_item",
        "make_js_callback",
        "next_callback_id",
        "register_callback",
        "results",
        "to_python",
        "wrap",
    )

    def __init__(self, ctx: Any) -> None:
        raw, dll = ctx._ctx, ctx._dll
        self.ctx = ctx
        self._dll = dll
        self._raw = raw
        self.call_function = functools.partial(dll.mr_call_function, raw)
        self.cancel_task = functools.partial(dll.mr_cancel_task, raw)
        self.free_value = functools.partial(dll.mr_free_value, raw)
        self.eval = functools.partial(dll.mr_eval, raw)
        self.get_object_item = functools.partial(dll.mr_get_object_item, raw)
        self.alloc_int = functools.partial(dll.mr_alloc_int_val, raw)
        self.make_js_callback = functools.partial(dll.mr_make_js_callback, raw)
        self.to_python = ctx._value_handle_to_python
        self.wrap = ctx._wrap_raw_handle
        self.next_callback_id: Callable[[], int] = ctx._next_async_callback_id.__next__
        self.callbacks: dict[int, Any] = ctx._active_cancelable_mr_task_callbacks
        self.results: Any = ctx._non_cancelable_mr_task_results_queue
        self.register_callback = ctx._register_cancelable_mr_task_callback

    def string(self, text: str) -> Any:
        """A raw value handle of ``text`` (mini-racer's allocation, no wrapper)."""
        data = text.encode("utf-8")
        return self._dll.mr_alloc_string_val(self._raw, data, len(data), STRING)

    def python_value(self, raw: Any) -> Any:
        """``raw``'s value through mini-racer's general conversion (which frees the handle
        with its wrapper); raises the error a raw error value holds."""
        return self.to_python(self.wrap(raw))

    def get(self, obj: Any, key: Any) -> Any:
        """``obj[key]`` (raw value handles), read on the isolate's thread (a synchronous
        trip there); the raw handle of the value, or raises what the read threw."""
        raw = self.get_object_item(obj, key)
        if raw.contents.type >= FIRST_ERROR:
            self.python_value(raw)  # raises it
        return raw

    def run_now(self, method: Callable[..., Any], *args: Any) -> Any:
        """Run one engine task (a partial of this context's) to its end, from a thread other
        than the loop's. Its value comes back through mini-racer's queue for the tasks it
        never cancels (callback id 0), not through the loop: what mini-racer's own
        ``_run_uncancelable_mr_task`` does, which refuses to run anywhere but on the
        context's event loop."""
        method(*args, 0)
        return self.to_python(self.results.get())  # (mini-racer's wrapper: not a raw handle)

    def hold_frees(self, hold: Callable[[Any], None]) -> None:
        """Have mini-racer hand each value handle it frees to ``hold`` instead."""
        object.__setattr__(self.ctx, "_free", hold)  # mini-racer's Context is frozen

    def forget(self) -> None:
        """Undo the links that keep the context in a cycle (its free, the handles left on
        its queue), so that reference counting frees it once it is closed."""
        object.__setattr__(self.ctx, "_free", _ignore)
        results = self.results
        while not results.empty():
            results.get_nowait()


def _ignore(*_: Any) -> None:
    """A closed context's free: nothing."""


def read_text(raw_context: RawContext, raw: Any) -> str | None:
    """The string a call returned, read in place (the caller holds its handle, to free it
    with the others), or None for any other value; raises what stopped the call (a
    termination, a runtime the program broke). Reading the usual value, a string, here
    skips mini-racer's general conversion and its finalizer-holding wrapper."""
    value = raw.contents
    if value.type == STRING:
        text: str = value.value.bytes_val[0 : value.len].decode("utf-8")
        return text
    raw_context.python_value(raw)
    return None


def post_drain(raw_context: RawContext) -> None:
    """Post the task that marks the end of what this context's thread has to do (see
    :func:`await_drain`): an evaluation of a handle that names no value, which mini-racer
    answers with an error without entering the engine, so it is safe to run whenever it
    runs, the context's teardown included."""
    raw_context.eval(None, 0)


def await_drain(raw_context: RawContext) -> None:
    """Wait for the answer of :func:`post_drain`. The thread runs its tasks in order, so
    every task posted before it has returned by then, and the context can be freed. (The
    answer is the first in mini-racer's queue for the tasks it never cancels: the only
    other such tasks, a preparation's steps in :meth:`Isolate._run_now`, are each waited
    for before the next is posted.)

    Freeing a context with a task of its still starting crashes the process: mini-racer's
    teardown cancels the tasks it knows of but does not wait for one that is already
    running (its ``CancelableTaskBase::Await`` discards the task's future unwaited), then
    takes the engine context out of its holder, so a task that reads it next reads a null
    pointer (SIGSEGV in ``CodeEvaluator::Eval``, seen once under load when the release of
    the thread's state was a real evaluation posted unwaited just before the free).
    Raises TimeoutError if the thread does not answer (a wedged engine: recycle)."""
    try:
        raw_context.results.get(timeout=DRAIN_TIMEOUT_S)
    except queue.Empty:
        raise TimeoutError("the isolate's thread did not finish its tasks") from None


_ENTROPY_SETTER = "_ZN2v82V816SetEntropySourceEPFbPhmE"
"""``v8::V8::SetEntropySource(bool (*)(unsigned char*, size_t))``, exported by mini-racer's
library (the Itanium name: mini-racer's Python layer does not wrap it)."""
_Entropy = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t)
_entropy_given = False


def _os_entropy(buffer: int, length: int) -> bool:
    """V8's entropy source: the kernel's random bytes, with one ``getrandom`` call.

    Without one, V8 seeds each of the seven random number generators of a new isolate by
    opening ``/dev/urandom`` through stdio, which reads a whole 4 KB buffer each time and
    closes it again: many kilobytes of random bytes and tens of system calls per isolate,
    a measurable part of preparing one. False (V8 then reads ``/dev/urandom`` itself) if
    this fails in any way."""
    try:
        ctypes.memmove(buffer, os.urandom(length), length)
    except BaseException:  # a callback from V8 must not raise
        return False
    return True


_os_entropy_for_v8 = _Entropy(_os_entropy)  # module-level: V8 calls it as long as the process lives


def _use_os_entropy(dll: Any) -> None:
    """Give V8 :func:`_os_entropy`, once per process, before its first isolate. A library
    that does not export the setter keeps V8's own way."""
    global _entropy_given
    if _entropy_given:
        return
    _entropy_given = True
    setter = getattr(dll, _ENTROPY_SETTER, None)
    if setter is not None:
        setter.argtypes = [_Entropy]
        setter.restype = None
        setter(_os_entropy_for_v8)


def new_context(
    loop: asyncio.AbstractEventLoop, on_thread: Callable[[int, Any], bool], thread: CallbackThread
) -> tuple[Any, Callable[[], None]]:
    """A bare context and the function that frees it: mini-racer's ``_make_context``, called
    off the event loop (see engine.Isolate.prepare). Its calls back come to ``loop``.

    ``on_thread`` runs first in every callback, on the isolate's thread, while the program
    waits for the callback to return (the memory guard, the early tool-call sends, the
    callbacks the loop need not hear of: see engine.Isolate._on_thread), with the
    callback's id and raw value handle; it returns True when it has dealt with the
    callback, handle included. ``thread`` keeps that thread's Python state."""
    dll = engine_library()
    contexts: list[Any] = []

    @mr_callback_func
    def callback(callback_id: int, raw_val_handle: Any) -> None:
        # Callbacks answer calls made after the context exists (none can come sooner).
        thread.enter()
        if not on_thread(callback_id, raw_val_handle):
            contexts[0].handle_callback_from_v8(callback_id, raw_val_handle)
        thread.leave()

    raw = ContextType(dll.mr_init_context(callback))
    # Callback id 0 is mini-racer's own, for the tasks it never cancels.
    # The queue of the tasks mini-racer never cancels (the drain's answer, the setup's) is a
    # SimpleQueue: a queue.Queue's three conditions and their Python-level waits cost
    # Python calls per isolate, on the engine thread and the isolate's.
    results: Any = queue.SimpleQueue()  # (mini-racer's annotation says queue.Queue: put and get suffice)
    contexts.append(Context(dll, raw, loop, ObjectFactoryImpl(), itertools.count(1), {}, results))

    def free(keep_alive: Any = callback) -> None:  # the engine calls back until freed
        dll.mr_free_context(raw)

    return contexts[0], free
