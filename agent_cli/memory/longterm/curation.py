"""The `facts` collection of long-term memory: facts, notes and procedures, their hits and expiry.

Given the `Store` (store.py) whose `facts` and `archive` collections it reads and writes;
it never imports chromadb. Every item carries `kind` (fact, note, procedure), `trust`,
`topic` and `topic_alt` (the repository it is about: the first and second of its identity's keys,
see `topic_keys`), `hit_count`, `confirmations` and, when it names files,
`files`: a JSON object of path -> the git blob id it saw, so a recall can tell it is stale.

An item's id comes from its content (`content_id`: `mem_` and the hash of its normalized
text and repository, or of a procedure's command and repository), so two runs that store the
same item at once write the same record instead of two. Stores written before have dated
random ids (`mem_YYYYMMDD_xxxxxx`); the named upgrade `CONTENT_UPGRADE` (`upgrade_ids`)
gives their items content ids and merges those of one content (see `merged`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from agent_cli.core.errors import UsageError
from agent_cli.core.protocols import Recalled
from agent_cli.memory.longterm.place import Refused
from agent_cli.memory.longterm.records import (
    DAY_S,
    ItemMeta,
    Result,
    expiry,
    item_meta,
    one_line,
    public_meta,
    stamp,
    text_hash,
    unreadable,
)
from agent_cli.memory.longterm.store import BATCH, Meta, Store, Where, count, matches

HitWriter = Callable[[list[str], list[Meta]], None]

ITEM_KINDS = ("fact", "note", "procedure")
PROCEDURES_READ = 1000  # the procedures of a repository read to find its most confirmed
LISTED_WHOLE = 20_000  # a `facts` collection up to this size is listed through Chroma's filter
IDENTITY_UPGRADE = "repo-identity"  # items of an older topic, moved to the repository's keys
CONTENT_UPGRADE = "content-ids"  # dated random ids replaced by content ids, duplicates merged


def content_id(key: str) -> str:
    """The id of the item whose merge key (`text_hash` metadata) is `key`."""
    return f"mem_{key}"


IDENTITY_KEYS = ("git:", "url:", "dir:")  # what each key of a repository's identity starts with


def topic_keys(topic: str) -> list[str]:
    """The keys of a topic: a repository's identity is its whitespace-separated keys (root
    commit, remote), a match on any one of which is a match; "" is no repository. A topic of
    an earlier version (a folder's name, which may hold a blank: `my calc`) is one key."""
    keys = topic.split()
    if keys and not all(key.startswith(IDENTITY_KEYS) for key in keys):
        return [topic]
    return keys or [""]


def topic_fields(topic: str) -> dict[str, str]:
    """The metadata naming the repository `topic` on an item or an episode."""
    keys = topic_keys(topic)
    return {"topic": keys[0], "topic_alt": keys[1] if len(keys) > 1 else ""}


def topic_where(topics: list[str]) -> Where:
    """A filter of the items of any of `topics` (an item matches on either of its keys)."""
    keys = [k for t in topics for k in topic_keys(t)]
    named = [k for k in keys if k]
    first: Where = {"topic": {"$in": keys}}
    return {"$or": [first, {"topic_alt": {"$in": named}}]} if named else first


ROOT_SHOWN = 12  # the hex digits of a root commit a repository's label shows


def repo_label(meta: Meta) -> str:
    """The repository an item or episode is filed under, in brief (its metadata's `topic`
    and `topic_alt`): its remote (`url:`, normalized) when it was stored with one, else its
    root commit's short hash (`git:` and 12 digits), else the key as stored (`dir:`, an
    earlier version's folder name); "" when it names none."""
    keys = [str(meta.get(name) or "") for name in ("topic", "topic_alt")]
    for prefix in ("url:", "git:"):
        for key in keys:
            if key.startswith(prefix):
                return key[len(prefix) :] if prefix == "url:" else key[: len(prefix) + ROOT_SHOWN]
    return next((key for key in keys if key), "")


def item_key(topic: str, text: str) -> str | None:
    """The key that merges an item with the same text in the same repository (None: its text's)."""
    first = topic_keys(topic)[0]
    return text_hash(f"{first}\n{text}") if first else None


def key_of(doc: str, meta: Meta) -> str:
    """The merge key of a stored item: a procedure's repository and command, else its
    repository and text (`item_key`), else its text alone."""
    topic, cmd = str(meta.get("topic", "")), str(meta.get("command", ""))
    if meta.get("kind") == "procedure" and cmd:
        return text_hash(f"procedure {topic} {cmd}")
    return item_key(topic, doc) or text_hash(doc)


def where(*conditions: Where | None) -> Where | None:
    """A Chroma filter of every condition given (None when there is none)."""
    given = [c for c in conditions if c]
    if not given:
        return None
    return given[0] if len(given) == 1 else {"$and": given}


def item_result(score: float, item_id: str, doc: str, meta: Meta) -> Result | None:
    """A recalled fact, note or procedure; None when its metadata does not check (`ItemMeta`):
    a record another tool or version wrote in another shape is not recalled."""
    checked = item_meta(meta)
    if checked is None:
        return None
    return Result(
        score,
        checked.kind,
        item_id,
        doc,
        checked.gist,
        checked.source,
        checked.confirmed_at,
        public_meta(meta),
        trust=1.0 if checked.trust is None else checked.trust,
        hit_count=checked.hit_count,
    )


def item_results(rows: Sequence[tuple[float, str, str, Meta | None]]) -> list[Result]:
    """The facts, notes and procedures of (score, id, document, metadata) rows, those whose
    metadata does not check left out."""
    found = (item_result(score, i, doc, meta or {}) for score, i, doc, meta in rows)
    return [r for r in found if r is not None]


def hit_updates(results: Sequence[Recalled], now: datetime | None) -> tuple[list[str], list[Meta]]:
    """Count one hit on each fact, note or procedure of `results`: (their ids, the metadata
    to store for them); one whose metadata does not check is not counted."""
    iso, ts = stamp(now)
    ids: list[str] = []
    metas: list[Meta] = []
    for r in results:
        checked = item_meta(r.metadata) if r.kind in ITEM_KINDS else None
        if checked is None:
            continue
        r.hit_count += 1
        r.metadata.update(hit_count=r.hit_count, last_hit_at=iso)
        ids.append(r.id)
        metas.append(
            {
                "hit_count": r.hit_count,
                "last_hit_at": iso,
                "last_hit_ts": ts,
                "expires_ts": expiry(checked.confirmed_ts, ts, checked.ttl_days),
            }
        )
    return ids, metas


def merged(metas: list[ItemMeta], ids: list[str]) -> Meta:
    """One item's metadata from the checked metadata of the items of one content (`ids`,
    stored apart by runs before content ids): every confirmation and hit counts (summed), the
    highest trust (with its kind and source), the first creation, the last confirmation and
    hit; it never expires when one of them would not, else it lives as long as the
    longest-lived; it names every id it was merged from, those its members had been merged
    from included."""
    newest = max(metas, key=lambda m: m.confirmed_ts)
    trusted = max(metas, key=lambda m: (m.trust or 0.0, m.confirmed_ts))
    ttls = [m.ttl_days for m in metas]
    ttl = 0.0 if 0.0 in ttls else max(ttls)
    confirmed_ts = max(m.confirmed_ts for m in metas)
    last_hit = max(metas, key=lambda m: m.last_hit_ts)
    return {
        **newest.model_dump(exclude_unset=True),  # what it holds, without the defaults
        "kind": trusted.kind,
        "source": trusted.source,
        "trust": trusted.trust or 0.0,
        "created_at": min(m.created_at for m in metas),
        "confirmations": sum(m.confirmations for m in metas),
        "hit_count": sum(m.hit_count for m in metas),
        "last_hit_at": last_hit.last_hit_at,
        "last_hit_ts": last_hit.last_hit_ts,
        "ttl_days": ttl,
        "expires_ts": expiry(confirmed_ts, last_hit.last_hit_ts, ttl),
        "id_upgrade": CONTENT_UPGRADE,
        "merged_ids": ",".join(sorted(set(ids).union(*(_merged_ids(m) for m in metas)))),
    }


def _merged_ids(meta: ItemMeta) -> set[str]:
    """The ids an item was merged from before (none for an item never merged)."""
    return {i for i in meta.merged_ids.split(",") if i}


class Curation:
    """Facts, notes and procedures in `store`: adding (or re-confirming), searching, hits,
    expiry. Counted hits go to `write_hits` when given, else into the store."""

    def __init__(
        self,
        store: Store,
        associate_threshold: float,
        write_hits: HitWriter | None = None,
        listed_whole: int = LISTED_WHOLE,
    ) -> None:
        self.store = store
        self.associate_threshold = associate_threshold
        self.listed_whole = listed_whole
        self._write_hits = write_hits or self.write_hits

    def add_fact(
        self,
        text: str,
        source: str,
        trust: float = 1.0,
        *,
        now: datetime | None = None,
        ttl_days: float = 0,
        topic: str = "",
        run_id: str = "",
        files: dict[str, str] | None = None,
    ) -> str:
        """Store a fact (trust 1.0 when the harness observed it); the same text re-confirms it."""
        return self.put_item(
            text,
            kind="fact",
            source=source,
            trust=trust,
            now=now,
            ttl_days=ttl_days,
            run_id=run_id,
            files=files,
            key=item_key(topic, self.store.redact(text).strip()),
            topic=topic,
        )

    def curate(
        self,
        text: str,
        *,
        topic: str,
        origin_event_id: str,
        now: datetime | None = None,
        trust: float = 0.5,
        ttl_days: float = 90,
        run_id: str = "",
        task: str = "",
    ) -> str:
        """Keep a note the run found worth remembering; returns its id (`content_id`)."""
        source = f"run {run_id}" if run_id else f"event {origin_event_id}"
        return self.put_item(
            text,
            kind="note",
            source=source,
            trust=trust,
            now=now,
            ttl_days=ttl_days,
            origin_event_id=origin_event_id,
            run_id=run_id,
            task=task,
            key=item_key(topic, self.store.redact(text).strip()),
            topic=topic,
        )

    def add_procedure(
        self,
        cmd: str,
        task: str,
        *,
        topic: str,
        run_id: str = "",
        files: dict[str, str] | None = None,
        now: datetime | None = None,
        ttl_days: float = 0,
    ) -> str:
        """Keep how this repository's checks are run; the same command in the same repository
        is merged into one procedure whose `confirmations` go up."""
        text = f"`{cmd}` checks work in this repository (the harness saw it exit 0 after: {task})"
        return self.put_item(
            text,
            kind="procedure",
            source=f"harness, run {run_id}",
            trust=1.0,
            now=now,
            ttl_days=ttl_days,
            run_id=run_id,
            task=task,
            files=files,
            key=text_hash(f"procedure {topic_keys(topic)[0]} {cmd}"),
            command=cmd,
            topic=topic,
        )

    def put_item(
        self,
        text: str,
        *,
        kind: str,
        source: str,
        trust: float,
        now: datetime | None,
        ttl_days: float,
        files: dict[str, str] | None = None,
        key: str | None = None,
        topic: str = "",
        **extra: str,
    ) -> str:
        """Add an item to `facts`, or re-confirm the one with the same key (by default its text)."""
        self.store.require_match()
        text, source = self.store.redact(text).strip(), self.store.redact(source)
        if not text:
            raise UsageError("a memory item needs some text")
        iso, ts = stamp(now)
        col, digest = self.store.cols["facts"], key or text_hash(text)
        item_id = content_id(digest)
        with self.store.guard("reading"):
            got = col.get(ids=[item_id], include=["metadatas", "documents"])
            if not got["ids"]:  # an item stored before CONTENT_UPGRADE, under a dated id
                got = col.get(
                    where={"text_hash": digest}, include=["metadatas", "documents"], limit=1
                )
        fresh = {
            "confirmed_at": iso,
            "confirmed_ts": ts,
            "gist": one_line(text, 200),
            **({"files": json.dumps(files, sort_keys=True)} if files is not None else {}),
            **{k: self.store.redact(v) for k, v in extra.items() if v},
            **(topic_fields(topic) if topic.strip() else {}),
        }
        if got["ids"]:
            old = item_meta(got["metadatas"][0])
            if old is None:  # another shape's: not re-confirmed, nor rewritten in ours
                raise Refused(
                    f"memory item {got['ids'][0]} holds this {kind} already, with "
                    f"{unreadable(got['metadatas'][0])}; it is left as it is",
                    f"`agent memory forget {got['ids'][0]}` deletes it; a later run stores "
                    f"the {kind} anew",
                )
            meta = {
                **(got["metadatas"][0] or {}),
                **fresh,
                "trust": max(old.trust or 0.0, trust),
                "confirmations": old.confirmations + 1,
                "expires_ts": expiry(ts, old.last_hit_ts, old.ttl_days),
            }
            if trust > (old.trust or 0.0):
                meta.update(kind=kind, source=source)
            if text != got["documents"][0]:
                self.store.upsert(col, got["ids"], [text], [meta])
            else:
                with self.store.guard("writing"):
                    col.update(ids=got["ids"], metadatas=[meta])
            return str(got["ids"][0])
        meta = {
            "kind": kind,
            "source": source,
            "trust": float(trust),
            "created_at": iso,
            "confirmations": 1,
            "hit_count": 0,
            "last_hit_at": "",
            "last_hit_ts": 0.0,
            "ttl_days": float(ttl_days),
            "expires_ts": expiry(ts, 0, ttl_days),
            "text_hash": digest,
            "topic": "",
            "topic_alt": "",
            "origin_event_id": "",
            **fresh,
        }
        self.store.upsert(col, [item_id], [text], [meta])
        return item_id

    def search_items(
        self,
        vec: Any,
        k: int,
        min_trust: float,
        kinds: tuple[str, ...] = ITEM_KINDS,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """Facts, notes and procedures nearest to `vec`, trusted at least `min_trust`."""
        kind = {"kind": {"$in": list(kinds)}} if tuple(kinds) != ITEM_KINDS else None
        scope = topic_where(topics) if topics else None
        filters = where({"trust": {"$gte": float(min_trust)}}, kind, scope)
        hits = self.store.query("facts", vec, k, filters, scope or kind)
        return item_results([(score, i, doc, meta) for i, doc, meta, score in hits])

    def associate(
        self,
        text: str,
        *,
        now: datetime | None = None,
        k: int = 3,
        threshold: float | None = None,
        min_trust: float = 0.0,
        kinds: tuple[str, ...] = ITEM_KINDS,
        topics: list[str] | None = None,
        count: bool = True,
    ) -> list[Result]:
        """The top `k` active items closer than the threshold to `text`; counts a hit on each
        unless `count` is false."""
        self.store.require_match()
        limit = self.associate_threshold if threshold is None else threshold
        if not text.strip():
            return []
        found = self.search_items(self.store.embed([text])[0], k, min_trust, kinds, topics)
        close = [r for r in found if r.score > limit]
        if count:
            self.count_hits(close, now)
        return close

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        """Count one hit (recalled into a run) on each fact, note or procedure of `results`."""
        self._write_hits(*hit_updates(results, now))

    def write_hits(self, ids: list[str], metas: list[Meta]) -> None:
        """Store counted hits (`hit_updates`) on the items still stored whose metadata
        checks: one another tool or version wrote over since it was read is left as it is."""
        if not ids:
            return
        col = self.store.cols["facts"]
        with self.store.guard("reading"):
            got = col.get(ids=ids, include=["metadatas"])
        metas_now = zip(got["ids"], got["metadatas"], strict=False)
        held = {i for i, m in metas_now if item_meta(m) is not None}
        kept = [(i, meta) for i, meta in zip(ids, metas, strict=True) if i in held]
        if kept:
            with self.store.guard("writing"):
                col.update(ids=[i for i, _ in kept], metadatas=[meta for _, meta in kept])

    def procedures(self, topic: str, k: int = 5) -> list[Result]:
        """The procedures of repository `topic`, the most confirmed first (of at most
        `PROCEDURES_READ` of them: a repository with more has them mostly as repeats)."""
        with self.store.guard("reading"):
            got = self.store.cols["facts"].get(
                where=where({"kind": "procedure"}, topic_where([topic])),
                include=["documents", "metadatas"],
                limit=PROCEDURES_READ,
            )
        found = item_results(
            [
                (1.0, i, d, m)
                for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=False)
            ]
        )
        found.sort(key=lambda r: r.date, reverse=True)
        found.sort(key=lambda r: -int(r.metadata.get("confirmations", 1)))  # stable: newest first
        return found[:k]

    def listing(self, topics: list[str], min_trust: float = 0.5, limit: int = 1000) -> list[Result]:
        """The facts, notes and procedures of the repositories `topics` (at most `limit`):
        the most trusted first, then the most used, then the newest. Of a collection larger
        than `listed_whole`, those among its first `limit` rows: Chroma would evaluate the
        filter over every row it holds."""
        col = self.store.cols["facts"]
        cond = where(
            {"kind": {"$in": list(ITEM_KINDS)}},
            {"trust": {"$gte": min_trust}},
            topic_where(topics),
        )
        with self.store.guard("reading"):
            large = col.count() > self.listed_whole
            got = col.get(
                where=None if large else cond, include=["documents", "metadatas"], limit=limit
            )
        found = item_results(
            [
                (1.0, i, d, m)
                for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=False)
                if not large or matches(m or {}, cond)
            ]
        )
        found.sort(key=lambda r: (r.trust, r.hit_count, r.date), reverse=True)
        return found

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        """How many facts, notes and procedures of the repositories `topics` trusted at least
        `min_trust` the store holds (what `listing` gives without its limit), at any size:
        those of the repositories less the few trusted less, two filters Chroma answers from
        its indexes (a filter on trust at least would be evaluated over all of them)."""
        col = self.store.cols["facts"]
        scope = topic_where(topics)
        distrusted = where(scope, {"trust": {"$lt": float(min_trust)}})
        with self.store.guard("counting"):
            return count(col, scope) - count(col, distrusted)

    def adopt(self, legacy: str, topic: str) -> int:
        """The named upgrade `IDENTITY_UPGRADE`: the items stored under the older topic `legacy`
        (a folder's name, or a root commit key an earlier version named the repository by)
        become items of the repository `topic`; how many were upgraded."""
        if not legacy or legacy in topic_keys(topic) or not topic.strip():
            return 0
        col = self.store.cols["facts"]
        with self.store.guard("reading"):
            got = col.get(where={"topic": legacy}, include=["documents", "metadatas"])
        fields = topic_fields(topic)
        ids: list[str] = []
        metas: list[Meta] = []
        for item_id, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=False):
            if item_meta(meta) is None:  # another shape's is left as it is
                continue
            ids.append(item_id)
            metas.append(
                {
                    **meta,
                    **fields,
                    "text_hash": key_of(doc, {**meta, **fields}),
                    "upgraded": IDENTITY_UPGRADE,
                    "legacy_topic": legacy,
                }
            )
        if not ids:
            return 0
        with self.store.guard("writing"):
            col.update(ids=ids, metadatas=metas)
        self.store.mark_upgraded("facts", CONTENT_UPGRADE, done=False)  # their keys changed
        return len(metas)

    def upgrade_ids(self, whole: bool = False) -> int:
        """The named upgrade `CONTENT_UPGRADE`: every item whose id is not its content id gets it,
        the items of one content merged into one (`merged`); how many old ids went.

        Done once: the collection's metadata records it (a collection this version creates
        has it from the start; an import of older records or a change of repository keys
        clears it), so a run does not read every item again. A collection of more than
        `listed_whole` items is upgraded only when `whole` (`agent memory reindex`): the
        end of a run does not read a large store through; until then its older items are
        found by their `text_hash`, as before the upgrade."""
        if CONTENT_UPGRADE in self.store.upgrades("facts"):
            return 0
        col = self.store.cols["facts"]
        if not whole:
            with self.store.guard("counting"):
                if col.count() > self.listed_whole:
                    return 0
        groups: dict[str, list[str]] = {}
        offset = 0
        while True:  # in pages: the keys are kept, not the documents
            with self.store.guard("reading"):
                got = col.get(include=["documents", "metadatas"], limit=BATCH, offset=offset)
            for item_id, doc, meta in zip(
                got["ids"], got["documents"], got["metadatas"], strict=False
            ):
                if item_meta(meta) is not None:  # another shape's is left as it is
                    groups.setdefault(key_of(doc, meta or {}), []).append(item_id)
            if len(got["ids"]) < BATCH:
                break
            offset += BATCH
        moving = {key: ids for key, ids in groups.items() if ids != [content_id(key)]}
        if not moving:
            self.store.mark_upgraded("facts", CONTENT_UPGRADE)
            return 0
        wanted = [i for ids in moving.values() for i in ids]
        with self.store.guard("reading"):
            rows = col.get(ids=wanted, include=["documents", "metadatas", "embeddings"])
        by_id = {
            i: (d, checked, v)
            for i, d, m, v in zip(
                rows["ids"], rows["documents"], rows["metadatas"], rows["embeddings"], strict=False
            )
            if (checked := item_meta(m)) is not None
        }
        ids, docs, metas, vectors, gone = [], [], [], [], []
        for key, members in moving.items():
            found = [(i, *by_id[i]) for i in members if i in by_id]
            if not found:
                continue
            newest = max(found, key=lambda f: f[2].confirmed_ts)
            ids.append(content_id(key))
            docs.append(newest[1])
            metas.append({**merged([f[2] for f in found], [f[0] for f in found]), "text_hash": key})
            vectors.append(newest[3])
            gone += [f[0] for f in found if f[0] != content_id(key)]
        with self.store.guard("writing"):
            for i in range(0, len(ids), BATCH):
                col.upsert(
                    ids=ids[i : i + BATCH],
                    embeddings=vectors[i : i + BATCH],
                    documents=docs[i : i + BATCH],
                    metadatas=metas[i : i + BATCH],
                )
            for i in range(0, len(gone), BATCH):
                col.delete(ids=gone[i : i + BATCH])
        self.store.mark_upgraded("facts", CONTENT_UPGRADE)
        return len(gone)

    def expire(
        self,
        now: datetime | None = None,
        ttl_days: float | None = None,
        topics: list[str] | None = None,
    ) -> int:
        """Move items into the archive: unused (neither confirmed nor recalled) for longer than
        `ttl_days` when given (0: nothing expires), else than each item's own ttl_days; of the
        repositories `topics` only, when given (a store several repositories share). How many
        were moved."""
        iso, ts = stamp(now)
        if ttl_days is not None and ttl_days <= 0:
            return 0
        old: Where | None
        if ttl_days is None:
            old = {"expires_ts": {"$lt": ts}}
        else:
            cutoff = ts - float(ttl_days) * DAY_S
            if cutoff <= 0:
                return 0  # nothing was used before 1970 (a huge time to live overflows to -inf)
            old = where({"confirmed_ts": {"$lt": cutoff}}, {"last_hit_ts": {"$lt": cutoff}})
        old = where(old, topic_where(topics) if topics else None)
        facts, archive = self.store.cols["facts"], self.store.cols["archive"]
        with self.store.guard("expiring"):
            got = facts.get(where=old, include=["documents", "metadatas", "embeddings"])
            if not got["ids"]:
                return 0
            metas = [{**m, "archived_at": iso} for m in got["metadatas"]]
            archive.upsert(
                ids=got["ids"],
                embeddings=got["embeddings"],
                documents=got["documents"],
                metadatas=metas,
            )
            facts.delete(ids=got["ids"])
        return len(got["ids"])

    def kind_counts(self, where: Where | None = None) -> dict[str, int]:
        """How many facts, notes and procedures are active (of those matching `where`): the
        notes' and procedures' ids are read, the facts are the rest (the most numerous kind is
        not listed unless `where` narrows them)."""
        col, out = self.store.cols["facts"], {}
        with self.store.guard("counting"):
            for kind in ("note", "procedure"):
                of_kind: Where = {"kind": kind}
                if where is not None:
                    of_kind = {"$and": [where, of_kind]}
                out[f"{kind}s"] = len(col.get(where=of_kind, include=[])["ids"])
            out["facts"] = count(col, where) - out["notes"] - out["procedures"]
        return {f"{kind}s": out[f"{kind}s"] for kind in ITEM_KINDS}
