"""TypeScript accepted: normalize_code blanks the types (every line and column kept) and
refuses, with one sentence naming it and its line, what has a runtime meaning of its own."""

from __future__ import annotations

import re

import pytest

from codemode import SyncIsolateExecutor, normalize_code
from codemode._source.typestrip import strip_types

FENCE = "```"

PROGRAM = """interface Order { id: string; total: number }
type Totals = Record<string, number>
import type { Unused } from './types'
declare const later: number
function sum<T extends Order>(orders: T[], pick?: (o: T) => number): number
function sum(orders: any[], pick: any = (o: Order) => o.total): number {
  return orders.reduce((a: number, o) => a + pick(o)!, 0)
}
abstract class Base<T> implements Iterable<T> {
  private readonly items: T[] = []
  protected count?: number
  declare tag: string
  abstract name(): string
  add(item: T): this { this.items.push(item); return this }
  [Symbol.iterator](): Iterator<T> { return this.items[Symbol.iterator]() }
}
class Orders extends Base<Order> { override name(): string { return 'orders' } }
namespace Types { export type Id = string }
const orders = new Orders().add({ id: 'a', total: 40 } as Order).add(<Order>{ id: 'b', total: 2 })
const byId = new Map<string, number>([...orders].map((o): [string, number] => [o.id, o.total]))
let checked!: number
checked = sum<Order>([...orders]) satisfies number
export default { name: orders.name(), total: checked, ids: [...byId.keys()] as const }"""


def test_a_typescript_program_runs_as_javascript(executor: SyncIsolateExecutor) -> None:
    code = normalize_code(f"{FENCE}ts\n{PROGRAM}\n{FENCE}")
    outcome = executor.execute(code)
    assert outcome.error is None, (outcome.error, code)
    assert outcome.result == {"name": "orders", "total": 42, "ids": ["a", "b"]}


def test_every_line_and_column_stays_in_place() -> None:
    stripped = strip_types(PROGRAM)
    assert stripped.count("\n") == PROGRAM.count("\n")
    for before, after in zip(PROGRAM.splitlines(), stripped.splitlines(), strict=True):
        assert len(before) == len(after), (before, after)
        for column, char in enumerate(after):  # what is left is what was there, or a space
            assert char == before[column] or char == " "
    # Plain JavaScript tokens stay where they were written.
    line = PROGRAM.splitlines()[6]
    assert stripped.splitlines()[6].index("orders.reduce") == line.index("orders.reduce")
    assert re.search(r"\bnumber\b|\binterface\b|\bOrder\b|\bsatisfies\b", stripped) is None


@pytest.mark.parametrize(
    ("source", "stripped"),
    [
        ("const n: number = 1", "const n         = 1"),
        ("(x as any)!.y", "(x       ) .y"),
        ("f<string>('é')", "f        ('é')"),  # columns count characters
        ("const p = <T,>(x: T): T => x", "const p =     (x   )    => x"),
        ("function f(a?: string) {}", "function f(a         ) {}"),
        ("type A = {\n  b: string\n}\nA", "          \n           \n \nA"),
        ("let a = 1 satisfies number", "let a = 1                 "),
    ],
)
def test_what_is_blanked(source: str, stripped: str) -> None:
    assert strip_types(source) == stripped


def test_javascript_is_left_alone() -> None:
    for js in ["async () => a < b > (c)", "const x = 1; x", "async () => 6 * 7"]:
        assert normalize_code(js) == normalize_code(js)  # no error, and
    # A clean JavaScript parse wins outside a ts fence: a < b > (c) stays two comparisons.
    assert normalize_code("async () => a < b > (c)") == "async () => a < b > (c)"


@pytest.mark.parametrize(
    ("source", "construct", "line"),
    [
        ("const a = 1\nenum Color { Red, Green }\nColor.Red", "an enum", 2),
        ("namespace N { export const a = 1 }\nN.a", "a namespace with values", 1),
        ("let a = 1\n\nclass A { constructor(private a: number) {} }\nnew A(1)", "a parameter property", 3),
        ("@sealed\nclass A {}\nnew A()", "a decorator", 1),
    ],
)
def test_what_cannot_be_stripped_is_refused_with_its_line(source: str, construct: str, line: int) -> None:
    with pytest.raises(ValueError) as caught:
        normalize_code(f"{FENCE}ts\n{source}\n{FENCE}")
    message = str(caught.value)
    assert message.startswith(f"The program uses {construct} on line {line}, a TypeScript construct")
    assert message.endswith(".") and message.count(". ") == 0


def test_typescript_without_a_fence_is_recognised() -> None:
    assert normalize_code("async (x?: number): Promise<number> => 42") == (
        "async (x         )                  => 42"
    )


def test_broken_typescript_is_left_for_the_executor_to_report(executor: SyncIsolateExecutor) -> None:
    code = normalize_code(f"{FENCE}ts\nconst x: = 1\nx\n{FENCE}")
    assert "x: = 1" in code
    outcome = executor.execute(code)
    assert outcome.result is None and outcome.error is not None
