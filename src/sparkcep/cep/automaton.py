"""The automaton a pattern compiles to (Flink CEP's NFA model): numbered states, each with TAKE, IGNORE and
PROCEED edges to the states they lead to, and the kind of each state (see sparkcep.cep.compiler for how a
pattern becomes one, sparkcep.cep.nfa for how it runs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.cep.conditions import Condition
from sparkcep.cep.shapes import Shape
from sparkcep.cep.spec import PatternSpec

TAKE, IGNORE, PROCEED = "TAKE", "IGNORE", "PROCEED"
NORMAL, FINAL, STOP, PENDING = "normal", "final", "stop", "pending"


@dataclass(eq=False)
class Edge:
    action: str
    target: AutomatonState
    condition: Condition
    shape: Shape | None = None  # set by compile_automaton


@dataclass(eq=False)
class AutomatonState:
    index: int
    stage: str
    kind: str = NORMAL
    edges: list[Edge] = field(default_factory=list)

    def add(self, action: str, target: AutomatonState, condition: Condition) -> None:
        self.edges.append(Edge(action, target, condition))


@dataclass(frozen=True)
class Automaton:
    states: tuple[AutomatonState, ...]
    start: int
    spec: PatternSpec
    type_field: str | None = None
