"""The repository's memory digest: what every plan and every task's first request carries of
its long-term memory, within a token share.

When the repository's facts, notes and procedures fit the share, all of them are sent, the
most trusted first, then the most used, then the newest: a store that small costs little,
and nothing the next goal needs can be missed by a wording the embedder does not connect.
Beyond the share, three rankings say what the goal is about: the embedding's (cosine to the
goal), the names the items share with it (lexical.py: an embedding misses `bump_major`
beside `bump_minor`) and the code it names (codemap.py: "number formatting" is number.py,
which defines `intcomma`), fused (rank.py). Two kinds of item get a share of their own,
ranked among their kind: the notes that state a rule of the whole repository (rules.py: a
task needs them whatever its words), 30% of the share, by the embedding's ranking of the notes
(not of every kind: most rules of a large store are past its nearest hundred items), the
names' and the code's fused, the two the embedding ranks closest first when above associate's
floor (a close match by meaning says more than a name the goal shares with a rule about
other work); and the ways to check work,
one procedure per test file, the ones tied to the goal's code first, each after the first
shown as its command on another target (procedures.py), a quarter. Then the other items by
the fused rankings, an item that repeats one already taken in other words put off; then
those recalled before, the most used first; then the rest the embedding ranked, below its
floor; one line says how many more there are and how to recall them (alone, when the share
holds no item but holds that line). The run's closest episodes come before all of them,
within a third of the share. The count in that line is the repository's: the store's count
of its facts, notes and procedures (`listed_count`), not of those read to choose from, less
those shown. The whole block keeps to the share: its header and fence, and the line counting
the rest, are set aside first; an item's text is costed as its line shows it
(`format_for_context`, brief), at 3.1 characters a token, and the rest of its line (kind, id,
trust, a stale mark, date: ids tokenize densely) at what o200k counts for it at most. That
estimate chooses; the block as it is sent is then counted exactly (`fit`, o200k, once), and
when it is over (commit ids, addresses, numbers and UUIDs run at 1.5 to 1.8 characters a
token) its last items are dropped, and join the count of the rest, until it fits. A block of
no more bytes than the share has tokens is not counted (a token is at least a byte): the
tokenizer is not loaded for it before the first request. The share is at most half of what
a request may take: a request is never cut inside it to fit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_cli.agent.learn import lexical, procedures, rank, rules
from agent_cli.agent.learn.codemap import CodeMap
from agent_cli.core import tokens
from agent_cli.core.protocols import LongTermStore, Recalled
from agent_cli.memory.longterm.records import context_line, format_for_context, shown_text

SCAN = 2000  # items read to choose from: beyond this the store is searched, not listed
EPISODES = 3
MIN_TRUST = 0.5  # the items a digest lists, recalls and counts: trusted at least this
ASSOCIATE_K = 10  # the items associate finds for the goal (memory/thresholds.py: OFFLINE)
NEAREST = 100  # items ranked by the embedding, to fuse with the names' ranking
# kind, id, trust, a stale mark and date around an item's text on a brief line: o200k counts
# 28 on average and 37 at most (a content id's 16 hex digits cut fine)
LINE_TOKENS = 37
FRAME_TOKENS = 27  # the block's header and its fence tags
MORE_TOKENS = 32  # the line counting what was left out and naming the recall tool
CHARS_PER_10_TOKENS = 31
RULE_SHARE = 30  # percent of the share kept for the notes that state a rule of the repository
CLOSEST_RULES = 2  # the rules first in their share by the embedding alone, when above its floor
PROCEDURE_SHARE = 25  # percent kept for the ways to check work, one per test file
WINDOW_SHARE = 50  # percent of what a request may take that the digest may take at most


@dataclass(frozen=True)
class Digest:
    """The items to send, and how many of the repository's items were left out."""

    items: list[Recalled]
    left_out: int

    def more_line(self) -> str:
        """The line that names what was left out ("" when nothing was)."""
        if not self.left_out:
            return ""
        return (
            f"- {self.left_out} more facts, notes and procedures of this repository are not "
            "shown: the recall tool (or `agent recall QUERY`) finds them by meaning"
        )


def cost(item: Recalled) -> int:
    """The tokens `item` takes on its line of the fenced block: its text as the line shows it
    at 3.1 characters a token (English runs near 4; paths are cut finer), and the rest of
    the line. A character past ASCII counts as its UTF-8 bytes: Chinese runs near 1.4
    characters a token, and 3 bytes each keep it to the rate."""
    shown = shown_text(item).encode("utf-8", "replace")
    return -(-len(shown) * 10 // CHARS_PER_10_TOKENS) + LINE_TOKENS


def share_of(setting: int, request_tokens: int) -> int:
    """The digest's share of a request that may take `request_tokens`: the setting, within
    half the request, so that the request is not cut inside the digest to fit (an item cut
    off there would have had its hit counted, and the line counting the rest is its last)."""
    return min(setting, request_tokens * WINDOW_SHARE // 100)


def render(found: Digest, budget_tokens: int) -> str:
    """The fenced block of `found`: its items, then the line counting the rest when the
    share holds that line alone; "" when there is nothing to show. `fit` keeps it to
    `budget_tokens`."""
    more = found.more_line()
    if more and _over(_block([], more), budget_tokens) > 0:
        more = ""
    return _block(found.items, more)


def fit(found: Digest, budget_tokens: int) -> Digest:
    """`found` with its block (`render`) within `budget_tokens` as the tokenizer counts it:
    the block is counted once and, when over, its last items are dropped (each one left out
    joins the count of the rest) by what their lines count, and what is left counted again."""
    items, left_out = list(found.items), found.left_out
    while True:
        over = _over(render(Digest(items, left_out), budget_tokens), budget_tokens)
        if over <= 0 or not items:
            return Digest(items, left_out)
        while items and over > 0:
            last = items.pop()
            over -= tokens.count(context_line(last, brief=True)) + 1  # and its line break
            left_out += last.kind != "episode"  # the count line names the others only


def _block(items: Sequence[Recalled], more: str) -> str:
    return format_for_context(
        items, max_chars=sys.maxsize, max_lines=len(items), more=more, brief=True
    )


def _over(block: str, budget_tokens: int) -> int:
    """How many tokens `block` takes past `budget_tokens` (not counted when it has no more
    bytes than that: a token is at least one byte)."""
    if len(block.encode("utf-8", "replace")) <= budget_tokens:
        return 0
    return tokens.count(block) - budget_tokens


def build(
    longterm: LongTermStore,
    goal: str,
    topics: list[str],
    budget_tokens: int,
    *,
    min_score: float,
    k: int = ASSOCIATE_K,
    episode_min_score: float | None = None,
    code: Callable[[], CodeMap] | None = None,
) -> Digest:
    """The digest of the repositories `topics` (its identity first; "" for items of no
    repository) for `goal`: associate's top `k` above `min_score` and the items sharing a name
    with the goal ahead, then the most used, then the rest of the embedding's nearest; episodes
    at least `episode_min_score` close (None: the store's floor)."""
    budget = max(0, budget_tokens - FRAME_TOKENS)
    close = longterm.recall(
        goal, k=EPISODES, kind="episode", topics=topics[:1], min_score=episode_min_score
    )
    episodes = _fitting(close, budget // 3)
    budget -= sum(cost(e) for e in episodes)
    items = list(longterm.listing(topics, min_trust=MIN_TRUST, limit=SCAN))
    if len(items) < SCAN and sum(cost(i) for i in items) <= budget:
        return Digest(episodes + items, 0)
    budget = max(0, budget - MORE_TOKENS)  # something is left out: the line counting it
    near = longterm.associate(  # the embedding's ranking, floor or not: fused below
        goal,
        k=max(NEAREST, k),
        threshold=-1.0,
        min_trust=MIN_TRUST,
        kinds=("fact", "note", "procedure"),
        topics=topics,
        count=False,
    )
    named = lexical.scores(goal, [_words_of(r) for r in items])
    ranked = sorted(zip(named, items, strict=True), key=lambda pair: -pair[0])
    by_name = [r for score, r in ranked if score > 0]
    tied = code().ranking(goal, items) if code is not None else []
    by_code = [r for _, r in tied]
    fused = rank.fuse([[r.id for r in near], [r.id for r in by_name], [r.id for r in by_code]])
    pool = {r.id: r for r in [*items, *near]}  # an embedding hit keeps its cosine as its score
    # associate's rule (the top k above the floor) puts its matches ahead of the most used;
    # the rest of the nearest follow them
    related = {r.id for r in near[:k] if r.score > min_score} | {r.id for r in [*by_name, *by_code]}
    order = sorted(fused, key=lambda i: -fused[i])
    used = [r for r in items if r.hit_count > 0]  # never recalled: left to the count line
    most_used = sorted(used, key=lambda r: (r.hit_count, r.trust, r.date), reverse=True)
    ahead = [pool[i] for i in order if i in related]
    behind = [pool[i] for i in order if i not in related]  # only near by a low cosine
    queue = rank.distinct_first(_unique([*ahead, *most_used, *behind]), _words_of)
    # every rule and every way to check work is a candidate, ranked or not, each kind
    # ranked among its own: the rankings fused again without the other kinds' items; a
    # procedure tied to the code the goal names first (a command's words and its embedding
    # say little of which tests it runs)
    rankings = [[r.id for r in near], [r.id for r in by_name], [r.id for r in by_code]]
    checks = _ranked_among([r for r in items if r.kind == "procedure"], rankings)
    code_score = {r.id: score for score, r in tied}
    checks.sort(key=lambda r: -code_score.get(r.id, 0.0))  # stable: fused order within a score
    checks = procedures.one_per_file(checks)
    standing = [*_rules_ranked(longterm, goal, topics, items, near, rankings, min_score), *checks]
    lead = [
        *_fitting([r for r in standing if r.kind == "note"], budget * RULE_SHARE // 100),
        *_fitting(procedures.briefly(checks), budget * PROCEDURE_SHARE // 100),
    ]
    taken = {r.id for r in lead} | {r.id for r in items if r.kind == "procedure"}
    rest = [r for r in queue if r.id not in taken]
    chosen = _fitting(procedures.briefly([*lead, *rest]), budget)
    # the repository's count, not what was read to choose from (at most SCAN listed): those
    # associate found are of the same items, and those seen count when the store counts fewer
    # (items written since it was read)
    total = max(longterm.listed_count(topics, min_trust=MIN_TRUST), len(_unique([*near, *items])))
    return Digest(episodes + chosen, total - len(chosen))


def _rules_ranked(
    longterm: LongTermStore,
    goal: str,
    topics: list[str],
    items: Sequence[Recalled],
    near: Sequence[Recalled],
    rankings: Sequence[Sequence[str]],
    min_score: float,
) -> list[Recalled]:
    """The notes of `items` that state a rule of the repository, ranked among their kind: the
    embedding's ranking of the notes (the nearest of every kind would leave out most rules of
    a large store), the names' and the code's (`rankings` [1:]) fused; the `CLOSEST_RULES` the
    embedding ranks first come first when closer than `min_score` (associate's floor), since a
    close match by meaning says more than a name the goal shares with a rule about other work.
    The notes are searched only when `near` (the nearest of every kind) lacks a rule of `items`."""
    chosen = [r for r in items if rules.is_rule(r)]
    if not {r.id for r in chosen} <= {r.id for r in near}:
        near = longterm.associate(
            goal,
            k=NEAREST,
            threshold=-1.0,
            min_trust=MIN_TRUST,
            kinds=("note",),
            topics=topics,
            count=False,
        )
    by_meaning = [r.id for r in near if rules.is_rule(r)]
    ranked = _ranked_among(chosen, [by_meaning, *rankings[1:]])
    score = {r.id: r.score for r in near}
    closest = [i for i in by_meaning[:CLOSEST_RULES] if score[i] > min_score]
    return sorted(ranked, key=lambda r: closest.index(r.id) if r.id in closest else len(closest))


def _ranked_among(chosen: Sequence[Recalled], rankings: Sequence[Sequence[str]]) -> list[Recalled]:
    """`chosen` by the rankings fused over them alone, then the most used, then the newest."""
    ids = {r.id for r in chosen}
    fused = rank.fuse([[i for i in ranking if i in ids] for ranking in rankings])
    return sorted(chosen, key=lambda r: (fused.get(r.id, 0.0), r.hit_count, r.date), reverse=True)


def _words_of(item: Recalled) -> str:
    """What an item is matched on by name: its text, and the task a procedure checked."""
    return f"{item.text} {item.metadata.get('task', '')}"


def _fitting(items: Sequence[Recalled], budget: int) -> list[Recalled]:
    """The leading `items` whose lines fit `budget` tokens, in order."""
    chosen, used = [], 0
    for item in items:
        if used + cost(item) > budget:
            break
        chosen.append(item)
        used += cost(item)
    return chosen


def _unique(items: Sequence[Recalled]) -> list[Recalled]:
    """`items` without repeats of an id, first occurrence kept."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out
