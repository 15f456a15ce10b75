#!/usr/bin/env python3
"""emend reference adapter: a small BM25 memory over LoCoMo conversations.

Usage: adapter.py STRATEGY TASKS OUT

Speaks emend's external harness protocol (emend-command/1, see
docs/external-harness.md): STRATEGY is the strategy as JSON (fields of
strategy.schema.json beside this file), TASKS a task shard (LoCoMo samples
whose qa lists hold only the questions to answer, each with its id), OUT the
file to write, one outcome record (JSON) per question.

The memory: every session's turns are cut into windows (window_size,
window_overlap), each window one memory item; a BM25 index (k1, b) over the
items; the question is the query, the top_k items are retrieved and packed
best first into a context of token_budget estimated tokens. The judge is the
evidence judge: a question is correct iff every resolvable gold evidence turn
is in the context. Each record carries the trace emend's Layer A reads
(evidence_trace: for every gold turn, the items holding it, whether one was
retrieved, whether it reached the context).

Python 3 standard library only; deterministic (ties break by item order).
"""

import heapq
import json
import math
import re
import sys
from collections import defaultdict

PROTOCOL = "emend-command/1"

STOPWORDS = frozenset(
    """a about after again all also am an and any are as at be been before being both but by can could
    did do does doing done for from had has have having he her here hers him his how i if in into is it
    its just me more most my no nor not of off on once only or other our out over own same she should so
    some such than that the their them then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your""".split()
)

WORD = re.compile(r"[a-z0-9]+")


def stem(term):
    """Crude English suffix stripping; enough to match 'painting' and 'painted'."""
    for suffix in ("ing", "ed", "es", "ly", "s"):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


class Analyzer:
    def __init__(self, index):
        self.stopwords = index["stopwords"]
        self.stem = index["stem"]
        self.cache = {}

    def terms(self, text):
        out = []
        cache = self.cache
        for word in WORD.findall(text.lower()):
            t = cache.get(word)
            if t is None:
                if self.stopwords and word in STOPWORDS:
                    t = ""
                else:
                    t = stem(word) if self.stem else word
                cache[word] = t
            if t:
                out.append(t)
        return out


def tokens(text):
    """Estimated tokens: floor(1.33 x words), as emend's built-in harness counts."""
    return int(1.33 * len(text.split()))


def sessions(conversation):
    """(number, date_time, turns) of every session, ascending."""
    out = []
    for key, value in conversation.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list) and value:
            n = int(m.group(1))
            out.append((n, conversation.get(f"session_{n}_date_time"), value))
    out.sort(key=lambda s: s[0])
    return out


class Memory:
    """One conversation's memory items and their BM25 index."""

    def __init__(self, sample, strategy, analyzer):
        ingest = strategy["ingest"]
        size, overlap = ingest["window_size"], ingest["window_overlap"]
        stride = max(1, size - overlap)
        self.sample_id = sample["sample_id"]
        self.ids, self.texts, self.turns = [], [], []
        for _, date, turns in sessions(sample["conversation"]):
            start = 0
            while start < len(turns):
                window = turns[start : start + size]
                lines, bare = [], []
                for t in window:
                    content = t["text"]
                    if ingest["captions"] and t.get("blip_caption"):
                        content = f"{content} [image: {t['blip_caption']}]"
                    lines.append(f"{t['speaker']}: {content}")
                    bare.append(content)
                if len(" ".join(bare).strip()) >= ingest["min_chars"]:
                    text = "\n".join(lines)
                    if ingest["stamp_date"] and date:
                        text = f"[{date}]\n{text}"
                    self.ids.append(f"{sample['sample_id']}/m{len(self.ids):04d}")
                    self.texts.append(text)
                    self.turns.append([t["dia_id"] for t in window])
                if start + size >= len(turns):
                    break
                start += stride
        self.holding = defaultdict(list)  # dia_id -> item indexes
        for i, ts in enumerate(self.turns):
            for t in ts:
                self.holding[t].append(i)
        self.analyzer = analyzer
        k1, b = strategy["index"]["k1"], strategy["index"]["b"]
        counts = []
        for text in self.texts:
            c = {}
            for t in analyzer.terms(text):
                c[t] = c.get(t, 0) + 1
            counts.append(c)
        lengths = [sum(c.values()) for c in counts]
        n = len(counts)
        avgdl = (sum(lengths) / n) if n else 0.0
        postings = defaultdict(list)  # term -> [(item, tf)]
        for i, c in enumerate(counts):
            for t, tf in c.items():
                postings[t].append((i, tf))
        # A term's BM25 contribution to an item does not depend on the query:
        # compute it once, so that a search only adds.
        self.weights = {}
        for t, p in postings.items():
            idf = math.log(1.0 + (n - len(p) + 0.5) / (len(p) + 0.5))
            self.weights[t] = [
                (i, idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + (b * lengths[i] / avgdl if avgdl else 0.0))))
                for i, tf in p
            ]

    def search(self, question, top_k):
        """The top_k items as (-score, item), best first; ties go to the earlier item."""
        scores = [0.0] * len(self.texts)
        # Terms in sorted order: float sums must not depend on set order
        # (string hashing is randomized per process).
        for term in sorted(set(self.analyzer.terms(question))):
            for i, w in self.weights.get(term, ()):
                scores[i] += w
        return heapq.nsmallest(top_k, [(-s, i) for i, s in enumerate(scores) if s > 0.0])


def answer(memory, qa, strategy):
    retrieved = memory.search(qa["question"], strategy["retrieve"]["top_k"])
    budget = strategy["assemble"]["token_budget"]
    used, context_ids, context_turns = 0, [], set()
    for _, i in retrieved:
        cost = tokens(memory.texts[i])
        if used + cost > budget:
            continue
        used += cost
        context_ids.append(memory.ids[i])
        context_turns.update(memory.turns[i])
    retrieved_items = {i for _, i in retrieved}
    evidence = qa["resolved_evidence"]
    trace = []
    for turn in evidence:
        holding = memory.holding.get(turn, [])
        trace.append(
            {
                "turn": turn,
                "memory_ids": [memory.ids[i] for i in holding],
                "retrieved": any(i in retrieved_items for i in holding),
                "in_context": turn in context_turns,
            }
        )
    return {
        "id": qa["id"],
        "conversation": memory.sample_id,
        "category": qa["category_name"],
        "correct": bool(evidence) and all(s["in_context"] for s in trace),
        "question": qa["question"],
        "gold_answer": qa["answer"],
        "answer": None,
        "evidence": evidence,
        "unresolved_evidence": qa["unresolved_evidence"],
        "evidence_memory_ids": sorted({m for s in trace for m in s["memory_ids"]}),
        "retrieved": [
            {"id": memory.ids[i], "rank": r + 1, "score": round(-neg, 6), "channel": "bm25"}
            for r, (neg, i) in enumerate(retrieved)
        ],
        "context_ids": context_ids,
        "context_turns": sorted(context_turns, key=lambda d: tuple(int(x) for x in d[1:].split(":"))),
        "context_tokens": used,
        "evidence_trace": trace,
    }


def main(argv):
    if len(argv) != 4:
        print("usage: adapter.py STRATEGY TASKS OUT", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        strategy = json.load(f)
    with open(argv[2], encoding="utf-8") as f:
        shard = json.load(f)
    if shard.get("protocol") != PROTOCOL:
        print(f"{argv[2]}: protocol {shard.get('protocol')!r}, this adapter speaks {PROTOCOL}", file=sys.stderr)
        return 2
    analyzer = Analyzer(strategy["index"])
    with open(argv[3], "w", encoding="utf-8") as out:
        for sample in shard["samples"]:
            memory = Memory(sample, strategy, analyzer)
            for qa in sample["qa"]:
                record = answer(memory, qa, strategy)
                out.write(json.dumps(record))
                out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
