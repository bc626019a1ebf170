"""DOMException, Event/EventTarget/CustomEvent, AbortController/AbortSignal."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_domexception(guest: Guest) -> None:
    out = guest.run(
        """
        const e = new DOMException('boom', 'AbortError');
        const d = new DOMException();
        const o = new DOMException('m', { name: 'DataCloneError', cause: 1 });
        return [e.name, e.message, e.code, e instanceof Error, String(e),
                e.stack.split('\\n')[0], DOMException.ABORT_ERR, e.ABORT_ERR,
                d.name, d.message, d.code, o.name, o.code, o.cause,
                Object.prototype.toString.call(e), Object.keys(e).length];
        """
    )
    assert out == [
        "AbortError",
        "boom",
        20,
        True,
        "AbortError: boom",
        "AbortError: boom",
        20,
        20,
        "Error",
        "",
        0,
        "DataCloneError",
        25,
        1,
        "[object DOMException]",
        0,
    ]


def test_event_target_dispatch(guest: Guest) -> None:
    out = guest.run(
        """
        const t = new EventTarget();
        const seen = [];
        const h = (e) => seen.push(['h', e.type, e.target === t, e.eventPhase]);
        t.addEventListener('x', h);
        t.addEventListener('x', h);               // duplicate ignored
        t.addEventListener('x', { handleEvent(e) { seen.push(['obj', this !== t]); } });
        t.addEventListener('x', () => seen.push(['once']), { once: true });
        t.addEventListener('x', (e) => { e.preventDefault(); });
        const ev = new Event('x', { cancelable: true });
        const r1 = t.dispatchEvent(ev);
        const r2 = t.dispatchEvent(new Event('x'));
        t.removeEventListener('x', h);
        t.dispatchEvent(new Event('x'));
        return { seen, r1, r2, phase: ev.eventPhase, prevented: ev.defaultPrevented,
                 trusted: ev.isTrusted, cur: ev.currentTarget };
        """
    )
    assert out["seen"] == [
        ["h", "x", True, 2],
        ["obj", True],
        ["once"],
        ["h", "x", True, 2],
        ["obj", True],
        ["obj", True],
    ]
    assert out["r1"] is False and out["r2"] is True
    assert out["phase"] == 0 and out["prevented"] is True and out["trusted"] is False
    assert out["cur"] is None


def test_stop_immediate_and_throwing_listener(guest: Guest) -> None:
    out = guest.run(
        """
        const t = new EventTarget();
        const seen = [];
        t.addEventListener('a', () => { throw new Error('listener broke'); });
        t.addEventListener('a', (e) => { seen.push(1); e.stopImmediatePropagation(); });
        t.addEventListener('a', () => seen.push(2));
        t.dispatchEvent(new Event('a'));
        return seen;
        """
    )
    assert out == [1]
    logs = guest.logs()
    assert logs[0]["level"] == "error" and "listener broke" in logs[0]["text"]


def test_custom_event_and_subclass(guest: Guest) -> None:
    out = guest.run(
        """
        class Bus extends EventTarget {}
        const b = new Bus();
        let got;
        b.addEventListener('msg', (e) => { got = [e.detail, e instanceof Event, e.type]; });
        b.dispatchEvent(new CustomEvent('msg', { detail: { n: 1 } }));
        let err;
        try { new Event(); } catch (e) { err = e.constructor.name; }
        return [got, new CustomEvent('z').detail, err];
        """
    )
    assert out == [[{"n": 1}, True, "msg"], None, "TypeError"]


def test_abort_controller(guest: Guest) -> None:
    out = guest.run(
        """
        const c = new AbortController();
        const order = [];
        c.signal.onabort = (e) => order.push(['onabort', e.type, e.isTrusted]);
        c.signal.addEventListener('abort', () => order.push(['listener']));
        c.abort();
        c.abort('again');
        let thrown;
        try { c.signal.throwIfAborted(); } catch (e) { thrown = [e.name, e.message]; }
        let illegal;
        try { new AbortSignal(); } catch (e) { illegal = e.constructor.name; }
        const r = new AbortController(); r.abort('why');
        return { order, aborted: c.signal.aborted, reason: c.signal.reason.name, thrown, illegal,
                 custom: r.signal.reason, pre: AbortSignal.abort().reason.name };
        """
    )
    assert out == {
        "order": [["onabort", "abort", True], ["listener"]],
        "aborted": True,
        "reason": "AbortError",
        "thrown": ["AbortError", "This operation was aborted"],
        "illegal": "TypeError",
        "custom": "why",
        "pre": "AbortError",
    }


def test_abort_signal_timeout_and_any(guest: Guest) -> None:
    out = guest.run(
        """
        const t = AbortSignal.timeout(5);
        const a = new AbortController(), b = new AbortController();
        const any = AbortSignal.any([a.signal, b.signal, t]);
        const anyAborted = AbortSignal.any([AbortSignal.abort('x')]);
        let fired = 0;
        any.addEventListener('abort', () => fired++);
        b.abort('from b');
        await new Promise((r) => setTimeout(r, 20));
        return { t: [t.aborted, t.reason.name], any: [any.aborted, any.reason, fired],
                 pre: [anyAborted.aborted, anyAborted.reason] };
        """
    )
    assert out == {"t": [True, "TimeoutError"], "any": [True, "from b", 1], "pre": [True, "x"]}


def test_listener_removed_by_signal(guest: Guest) -> None:
    out = guest.run(
        """
        const t = new EventTarget(), c = new AbortController();
        let n = 0;
        t.addEventListener('e', () => n++, { signal: c.signal });
        t.dispatchEvent(new Event('e'));
        c.abort();
        t.dispatchEvent(new Event('e'));
        return n;
        """
    )
    assert out == 1
