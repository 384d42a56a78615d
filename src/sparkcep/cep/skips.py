"""After-match skip strategies (Flink CEP's ``AfterMatchSkipStrategy``): which matches are handed out when, and
which partial matches a match prunes."""

from __future__ import annotations

from sparkcep.cep.partials import NEVER, Found, Partial, Result, match_order, path_of, seqs_of
from sparkcep.cep.spec import SkipSpec


def emit(
    skip: SkipSpec, partials: list[Partial], completed: list[Found], matches: list[Found], out: list[Result]
) -> None:
    """Hand ``matches`` out, in (start, seqs) order: at once without a skip strategy; with one, a match waits until
    no partial match that started earlier is alive (a longer match from an earlier start comes first), then prunes
    the partial matches and waiting matches its strategy skips."""
    if len(matches) > 1:  # (most often there is one)
        matches.sort(key=lambda found: match_order(found[0]))
    if skip.strategy == "NO_SKIP":
        out.extend(Result(False, at, path_of(match)) for match, at in matches)
        return
    completed.extend(matches)
    if len(completed) > 1:
        completed.sort(key=lambda found: match_order(found[0]))
    while completed:
        # Partial matches are in start order, the start partial match last: the first one started earliest.
        earliest = partials[0] if partials and partials[0][2] != NEVER else None
        match, at = completed[0]
        if earliest is not None and (match[1], match[2]) > (earliest[1], earliest[2]):
            break
        completed.pop(0)
        bound = _pruning_seq(skip, match)
        if bound is not None:
            inclusive = skip.strategy in ("SKIP_TO_NEXT", "SKIP_PAST_LAST_EVENT")
            partials[:] = [p for p in partials if not _pruned(p, bound, inclusive)]
            completed[:] = [f for f in completed if not _pruned(f[0], bound, inclusive)]
        out.append(Result(False, at, path_of(match)))


def _pruning_seq(skip: SkipSpec, match: Partial) -> int | None:
    """The seq before (or at) which a match's strategy prunes partial matches; None: it prunes nothing."""
    seqs = seqs_of(match)
    strategy = skip.strategy
    if strategy == "SKIP_TO_NEXT":
        return min(seqs)
    if strategy == "SKIP_PAST_LAST_EVENT":
        return max(seqs)
    in_stage: list[int] = [event[0] for stage, event in path_of(match) if stage == skip.stage]
    if not in_stage:
        return None
    return min(in_stage) if strategy == "SKIP_TO_FIRST" else max(in_stage)


def _pruned(partial: Partial, bound: int, inclusive: bool) -> bool:
    start: int = partial[2]
    if start == NEVER:
        return False
    return start <= bound if inclusive else start < bound
