"""performance and navigator."""

from __future__ import annotations

import time

from tests.stdlib.conftest import Guest


def test_performance(guest: Guest) -> None:
    before = time.time() * 1000
    out = guest.run(
        """
        const a = performance.now();
        await new Promise((r) => setTimeout(r, 20));
        const b = performance.now();
        return [a >= 0, b - a >= 15, performance.timeOrigin, typeof performance.toJSON().timeOrigin,
                Object.prototype.toString.call(performance)];
        """
    )
    assert out[0] is True and out[1] is True
    assert abs(out[2] - before) < 10_000
    assert out[3:] == ["number", "[object Performance]"]


def test_navigator(guest: Guest) -> None:
    out = guest.run("return [navigator.userAgent, navigator instanceof Navigator];")
    assert out == ["codemode", True]
