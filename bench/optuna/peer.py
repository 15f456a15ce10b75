#!/usr/bin/env python3
"""Peer benchmark: `emend evolve` against Optuna's TPE sampler.

Both optimisers search the same space -- every `x-evolvable` field of the
strategy schema, within its range, on a grid of its `x-step` anchored at the
start value; free-text fields such as the prompts, which need a model role,
keep their start values -- starting from the same strategy
(strategies/default.yaml, which is TPE's first, enqueued trial). Both search on the first three conversations
of a LoCoMo file (by order in the file) and both winners are evaluated on the
remaining ones (the held-out part), with the harness's token ceiling at each
value of --ceilings. TPE gets --tpe-budget full evaluations of the search part;
emend gets at most --emend-budget full-evaluation equivalents.

The ceiling: a context holds at most min(assemble.token_budget,
assemble.token_budget_ceiling, the harness ceiling) tokens. `emend evolve`
takes the ceiling from emend.yaml (harness.budget_ceiling); `emend eval` has no
such option and uses the harness default (2,000), so every strategy this
script evaluates with `emend eval` carries the ceiling in its own locked
`assemble.token_budget_ceiling` (and `assemble.token_budget` is clamped to
it): the same context, token for token. The script checks this by
re-evaluating emend's served strategy on the search part and comparing with
the accuracy `emend evolve` reported.

With --tpe-search-share F (< 1) TPE's trials see only a seeded share F of
each (conversation, category) of the search conversations, and a trial counts
as that share of a full evaluation: with F = 0.5 and the default
--emend-budget (half of --tpe-budget), both sides search on as many questions
with as many full-evaluation equivalents (emend's own split gives it a search
part of half the questions).

emend's budget: `emend evolve --max-evals N` when the binary has it (its
`evaluations_used` is the count). Otherwise rounds run one at a time and a
round is counted as full_evaluations + probe_evaluations * probe_size / n, plus
one for the evaluation of the start strategy (TPE pays it as its first
trial); the project is snapshotted before each round, and a round that would
take emend past its budget is undone and ends the run.

Exit codes: 0 ok, 1 a run failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
HARNESS_DEFAULT_CEILING = 2000
SEARCH_CONVERSATIONS = 3


class BadInput(Exception):
    """Input the benchmark cannot run on (exit 2)."""


class RunFailed(Exception):
    """A command the benchmark ran failed (exit 1)."""


# ---------------------------------------------------------------------------
# The field space, read from the schema


@dataclass
class Field:
    path: str  # dotted, e.g. "retrieve.top_k"
    kind: str  # "int", "float", "bool", "enum"
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: list[Any] = field(default_factory=list)


def get_path(doc: dict, path: str) -> Any:
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def set_path(doc: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def resolve_ref(schema: dict, node: dict) -> dict:
    """A node with a local `$ref` merged under its own keywords."""
    ref = node.get("$ref")
    if ref is None:
        return node
    if not ref.startswith("#/"):
        raise BadInput(f"schema: only local $ref is supported, found {ref!r}")
    target: Any = schema
    for part in ref[2:].split("/"):
        target = target[part]
    merged = dict(resolve_ref(schema, target))
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def evolvable_leaves(schema: dict, node: dict, prefix: str):
    node = resolve_ref(schema, node)
    props = node.get("properties")
    if props:
        for name, child in props.items():
            yield from evolvable_leaves(schema, child, f"{prefix}.{name}" if prefix else name)
    elif node.get("x-evolvable"):
        yield prefix, node


def grid(default: float, low: float, high: float, step: float) -> tuple[float, float]:
    """The bounds of the x-step grid through the start value inside [low, high]."""
    below = math.floor((default - low) / step + 1e-9)
    above = math.floor((high - default) / step + 1e-9)
    # Rounded so that float noise never puts a bound outside the schema's range.
    return round(default - below * step, 10) + 0.0, round(default + above * step, 10) + 0.0


def field_space(schema: dict, start: dict) -> tuple[list[Field], list[str]]:
    """Every x-evolvable field the benchmark can sample, and those it cannot (with why)."""
    fields: list[Field] = []
    skipped: list[str] = []
    for path, node in evolvable_leaves(schema, schema, ""):
        try:
            default = get_path(start, path)
        except KeyError:
            raise BadInput(f"start strategy: no field {path} (x-evolvable in the schema)") from None
        types = node.get("type")
        if "enum" in node:
            choices = list(node["enum"])
            # Options that need a model (x-needs-model) are sampled only when
            # it is installed, exactly as emend's own search does.
            model = node.get("x-needs-model")
            if model and not os.environ.get("EMEND_MINILM_DIR"):
                choices = [c for c in choices if c != model]
                skipped.append(f"{path}={model} (needs the {model} model; set EMEND_MINILM_DIR to include it)")
            fields.append(Field(path, "enum", choices=choices))
        elif types == "boolean":
            fields.append(Field(path, "bool", choices=[False, True]))
        elif types in ("integer", "number"):
            if "minimum" not in node or "maximum" not in node:
                raise BadInput(f"schema: {path} is x-evolvable but has no minimum/maximum")
            low, high = node["minimum"], node["maximum"]
            step = node.get("x-step")
            kind = "int" if types == "integer" else "float"
            if step is None:
                step = 1 if kind == "int" else None
            if step is not None:
                low, high = grid(default, low, high, step)
            if kind == "int":
                low, high, step = int(round(low)), int(round(high)), int(step)
            fields.append(Field(path, kind, low, high, step))
        else:
            why = f"needs role {node['x-needs-role']}" if "x-needs-role" in node else f"type {types} without enum"
            skipped.append(f"{path} ({why}; kept at its start value)")
    return fields, skipped


# ---------------------------------------------------------------------------
# Invariant repair


def field_bounds(schema: dict, path: str) -> dict:
    node: Any = schema
    for part in path.split("."):
        node = resolve_ref(schema, node)["properties"][part]
    return resolve_ref(schema, node)


def repair(strategy: dict, schema: dict) -> list[str]:
    """Make the strategy satisfy the schema's x-invariants by lowering each left side.

    Lowering only ever decreases values, so repeating the pass reaches a fixed
    point (e.g. top_k clamped to pool, then rerank_top_n to the new top_k).
    Returns what was changed.
    """
    changes: list[str] = []
    invariants = schema.get("x-invariants", [])
    for _ in range(len(invariants) + 1):
        changed = False
        for inv in invariants:
            left = inv["left"]
            right = inv["right"]
            bound = get_path(strategy, right) if isinstance(right, str) else right
            value = get_path(strategy, left)
            node = field_bounds(schema, left)
            if inv["op"] == "<=":
                if value <= bound:
                    continue
                new = bound
            elif inv["op"] == "<":
                if value < bound:
                    continue
                new = bound - (1 if node.get("type") == "integer" else node.get("x-step", 1e-6))
            else:
                raise BadInput(f"schema: x-invariants op {inv['op']!r} is not supported ({left})")
            if new < node.get("minimum", -math.inf):
                raise RunFailed(f"cannot repair {left} {inv['op']} {right}: {new} is below the minimum")
            set_path(strategy, left, new)
            changes.append(f"{left} {value} -> {new}")
            changed = True
        if not changed:
            return changes
    raise RunFailed("invariant repair did not reach a fixed point")


def with_ceiling(strategy: dict, schema: dict, ceiling: int) -> dict:
    """The strategy as evaluated under the harness ceiling (see the module doc)."""
    s = copy.deepcopy(strategy)
    s["assemble"]["token_budget_ceiling"] = min(s["assemble"]["token_budget_ceiling"], ceiling)
    repair(s, schema)
    return s


# ---------------------------------------------------------------------------
# emend


def run(cmd: list[str], cwd: Path | None = None) -> str:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RunFailed(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


def emend_eval(emend: str, strategy: dict, tasks: Path, work: Path, name: str) -> dict:
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(strategy, sort_keys=False))
    out = json.loads(run([emend, "eval", "--strategy", str(path), "--tasks", str(tasks), "--json"], cwd=work))
    return {"accuracy": out["accuracy"], "mean_context_tokens": out["mean_context_tokens"], "n": out["n"]}


def parse_setting(text: str) -> tuple[str, str, Any]:
    """`SECTION.KEY=VALUE` of --emend-set; VALUE is read as YAML (0.2, true, a word)."""
    name, sep, value = text.partition("=")
    section, dot, key = name.partition(".")
    if not sep or not dot or not section or not key or "." in key:
        raise argparse.ArgumentTypeError(f"expected SECTION.KEY=VALUE (e.g. gates.lord_w0=0.2), got {text!r}")
    return section, key, yaml.safe_load(value)


def has_max_evals(emend: str) -> bool:
    return "--max-evals" in run([emend, "evolve", "--help"])


def emend_side(args, emend: str, schema: dict, search: Path, held: Path, ceiling: int, seed: int, work: Path) -> dict:
    proj = work / f"emend-c{ceiling}-s{seed}"
    init = json.loads(
        run([emend, "init", str(proj), "--tasks", str(search), "--schema", str(args.schema),
             "--strategy", str(args.start), "--json"])
    )
    n = init["questions"]
    cfg_path = proj / "emend.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["harness"]["budget_ceiling"] = ceiling
    cfg["loop"]["seed"] = seed
    # emend's default (the search proposer) unless --rule-evolver asks for the one-field moves.
    cfg["loop"]["search"] = not args.rule_evolver
    for section, key, value in args.emend_set:
        cfg.setdefault(section, {})[key] = value
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    probe_size = min(cfg["gates"]["probe_size"], n)

    rounds = 0
    runs: list[dict] = []
    if has_max_evals(emend):
        out = json.loads(
            run([emend, "--project", str(proj), "evolve", "--max-evals", str(args.emend_budget),
                 "--rounds", str(args.emend_max_rounds), "--json", "-q"])
        )
        if "evaluations_used" not in out:
            raise RunFailed("emend evolve --max-evals printed no evaluations_used")
        used = float(out["evaluations_used"])
        rounds = out["rounds"]
        runs.append(out)
        counted_by = "evaluations_used"
    else:
        used = 1.0  # the start strategy's full evaluation
        snapshot = work / "snapshot"
        while rounds < args.emend_max_rounds:
            if snapshot.exists():
                shutil.rmtree(snapshot)
            shutil.copytree(proj, snapshot)
            out = json.loads(run([emend, "--project", str(proj), "evolve", "--rounds", "1", "--json", "-q"]))
            cost = out["full_evaluations"] + out["probe_evaluations"] * probe_size / n
            if used + cost > args.emend_budget + 1e-9:
                shutil.rmtree(proj)
                shutil.move(str(snapshot), proj)
                break
            used += cost
            rounds += 1
            runs.append(out)
        if snapshot.exists():
            shutil.rmtree(snapshot)
        counted_by = "1 + full_evaluations + probe_evaluations * probe_size / n"

    if used > args.emend_budget + 1e-9:
        print(f"warning: emend used {used:.2f} full-evaluation equivalents, over its budget of {args.emend_budget}",
              file=sys.stderr)
    served = yaml.safe_load((proj / "strategies" / "served.yaml").read_text())
    evaluated = with_ceiling(served, schema, ceiling)
    s = emend_eval(emend, evaluated, search, work, f"emend-search-c{ceiling}-s{seed}")
    h = emend_eval(emend, evaluated, held, work, f"emend-held-c{ceiling}-s{seed}")
    if runs:
        reported = runs[-1]["served_accuracy"]
        if abs(reported - s["accuracy"]) > 1e-9:
            raise RunFailed(
                f"emend evolve reported served accuracy {reported} on the search part, "
                f"emend eval under the ceiling gives {s['accuracy']}: the ceiling is not applied alike"
            )
    return {
        "search_accuracy": s["accuracy"],
        "heldout_accuracy": h["accuracy"],
        "heldout_mean_context_tokens": h["mean_context_tokens"],
        "evaluations_used": round(used, 4),
        "counted_by": counted_by,
        "rounds": rounds,
        "accepted": sum(r["accepted"] for r in runs),
        "winner": evaluated,
    }


# ---------------------------------------------------------------------------
# Optuna TPE


def tpe_key(args, emend: str, search: Path, held: Path, ceiling: int, seed: int) -> str:
    """What a TPE run depends on: the data parts, schema, start strategy, budget,
    ceiling, seed, the installed Optuna and the evaluating harness (its hash, as
    `emend eval` reports it: a binary whose loop changed evaluates alike)."""
    import optuna

    h = hashlib.sha256()
    for path in (search, held, Path(args.schema), Path(args.start)):
        h.update(hashlib.sha256(path.read_bytes()).digest())
    probe = json.loads(run([emend, "eval", "--strategy", str(args.start), "--tasks", str(search), "--json"]))
    h.update(json.dumps([args.tpe_budget, ceiling, seed, optuna.__version__, probe["harness_hash"]]).encode())
    return h.hexdigest()


def tpe_side(args, emend: str, schema: dict, start: dict, fields: list[Field], search: Path, held: Path,
             ceiling: int, seed: int, work: Path) -> dict:
    """TPE's row; with --tpe-cache DIR, read from DIR when a run with identical
    inputs (same bytes, see tpe_key) is recorded there, written there otherwise."""
    cache = Path(args.tpe_cache) / f"{tpe_key(args, emend, search, held, ceiling, seed)}.json" if args.tpe_cache else None
    if cache is not None and cache.is_file():
        row = json.loads(cache.read_text())
        row["cached"] = str(cache)
        return row
    row = tpe_run(args, emend, schema, start, fields, search, held, ceiling, seed, work)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(row, indent=2) + "\n")
        tmp.replace(cache)
    return row


def tpe_run(args, emend: str, schema: dict, start: dict, fields: list[Field], search: Path, held: Path,
            ceiling: int, seed: int, work: Path) -> dict:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial({f.path: get_path(start, f.path) for f in fields})

    def objective(trial: "optuna.Trial") -> float:
        s = copy.deepcopy(start)
        for f in fields:
            if f.kind in ("enum", "bool"):
                v = trial.suggest_categorical(f.path, f.choices)
            elif f.kind == "int":
                v = trial.suggest_int(f.path, f.low, f.high, step=f.step)
            else:
                v = trial.suggest_float(f.path, f.low, f.high, step=f.step)
                if f.step is not None:
                    v = round(v, 10)
            set_path(s, f.path, v)
        s = with_ceiling(s, schema, ceiling)
        r = emend_eval(emend, s, search, work, f"tpe-c{ceiling}-s{seed}-t{trial.number}")
        trial.set_user_attr("strategy", s)
        trial.set_user_attr("mean_context_tokens", r["mean_context_tokens"])
        return r["accuracy"]

    study.optimize(objective, n_trials=args.tpe_budget)
    best = study.best_trial
    winner = best.user_attrs["strategy"]
    h = emend_eval(emend, winner, held, work, f"tpe-held-c{ceiling}-s{seed}")
    return {
        "search_accuracy": best.value,
        "heldout_accuracy": h["accuracy"],
        "heldout_mean_context_tokens": h["mean_context_tokens"],
        "evaluations_used": len(study.trials),
        "best_trial": best.number,
        "winner": winner,
    }


# ---------------------------------------------------------------------------
# Report

METRICS = ["search_accuracy", "heldout_accuracy", "heldout_mean_context_tokens", "evaluations_used"]


def medians(rows: list[dict]) -> dict:
    return {m: statistics.median(r[m] for r in rows) for m in METRICS}


def markdown(result: dict) -> str:
    lines = [
        f"emend vs Optuna TPE: search on {', '.join(result['search_conversations'])}, "
        f"held out {', '.join(result['heldout_conversations'])} "
        f"(TPE budget {result['tpe_budget']}, emend budget {result['emend_budget']})"
        + "".join(f"; emend {k}={v}" for k, v in result.get("emend_settings", {}).items())
        + (f"; TPE searches on a {result['tpe_search_share']} share of the search questions"
           if result.get("tpe_search_share", 1.0) < 1 else ""),
        "",
        "| ceiling | seed | side | search acc | held-out acc | held-out mean ctx tokens | evals used |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for c in result["ceilings"]:
        for row in c["runs"] + [dict(seed="median", **{s: c["median"][s] for s in ("emend", "tpe")})]:
            for side in ("emend", "tpe"):
                r = row[side]
                lines.append(
                    f"| {c['ceiling']} | {row['seed']} | {side} | {100 * r['search_accuracy']:.1f}% | "
                    f"{100 * r['heldout_accuracy']:.1f}% | {r['heldout_mean_context_tokens']:.1f} | "
                    f"{r['evaluations_used']:.2f} |"
                )
    lines.append("")
    for c in result["ceilings"]:
        m = c["median"]
        ok = (m["emend"]["heldout_accuracy"] >= m["tpe"]["heldout_accuracy"]
              and m["emend"]["evaluations_used"] <= m["tpe"]["evaluations_used"] / 2)
        verdict = f"target (emend >= TPE at <= half the evaluations) {'met' if ok else 'not met'}"
        if result.get("tpe_search_share", 1.0) < 1:
            verdict = "an equal-data comparison: the target is not assessed"
        lines.append(
            f"- ceiling {c['ceiling']}: median held-out emend {100 * m['emend']['heldout_accuracy']:.1f}% vs TPE "
            f"{100 * m['tpe']['heldout_accuracy']:.1f}% "
            f"({100 * (m['emend']['heldout_accuracy'] - m['tpe']['heldout_accuracy']):+.1f} pp); evaluations "
            f"{m['emend']['evaluations_used']:.2f} vs {m['tpe']['evaluations_used']:.2f}; {verdict}"
        )
    return "\n".join(lines) + "\n"


def stratified_share(conversations: list[dict], share: float, seed: int) -> list[dict]:
    """The conversations with only a seeded `share` of each (conversation,
    category) stratum's questions (rounded, at least one of a non-empty
    stratum), in their original order: with 0.5, a search part of the size
    emend's split gives itself (harness.split.confirm_fraction 0.5), also
    stratified by conversation and category, but not the same questions."""
    out = copy.deepcopy(conversations)
    for conv in out:
        strata: dict[str, list[int]] = {}
        for i, q in enumerate(conv.get("qa", [])):
            strata.setdefault(str(q.get("category")), []).append(i)
        keep: set[int] = set()
        for category in sorted(strata):
            idx = strata[category]
            rng = random.Random(f"{seed}:{conv.get('sample_id')}:{category}")
            rng.shuffle(idx)
            keep.update(idx[: max(1, round(share * len(idx)))])
        conv["qa"] = [q for i, q in enumerate(conv.get("qa", [])) if i in keep]
    return out


def questions(conversations: list[dict]) -> int:
    """Questions emend evaluates (the adversarial category 5 is left out by default)."""
    return sum(1 for conv in conversations for q in conv.get("qa", []) if q.get("category") != 5)


def parse_list(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--{what}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise BadInput(f"--{what}: empty")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emend", default=str(REPO / "target" / "release" / "emend"), help="the emend binary")
    ap.add_argument("--data", default=os.environ.get("EMEND_LOCOMO", str(REPO.parent / "shared" / "data" / "locomo10-dev.json")),
                    help="a LoCoMo-format JSON file (default: ../shared/data/locomo10-dev.json or EMEND_LOCOMO)")
    ap.add_argument("--schema", default=str(REPO / "schemas" / "strategy.schema.json"))
    ap.add_argument("--start", default=str(REPO / "strategies" / "default.yaml"), help="the start strategy of both sides")
    ap.add_argument("--tpe-budget", type=int, default=90, help="TPE trials (full evaluations of the search part)")
    ap.add_argument("--emend-budget", type=float, default=None, help="emend's full-evaluation equivalents (default: half of TPE's)")
    ap.add_argument("--emend-max-rounds", type=int, default=60, help="rounds emend may run at most")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--ceilings", default="1000,2000")
    ap.add_argument("--out", default=str(REPO / "target" / "bench-optuna"), help="directory of results.md and results.json")
    ap.add_argument("--rule-evolver", action="store_true",
                    help="run emend with loop.search: false (the one-field rule evolver) instead of the search proposer")
    ap.add_argument("--tpe-cache", default=None,
                    help="directory of recorded TPE runs: a run whose inputs are byte-identical is read, not repeated")
    ap.add_argument("--tpe-only", action="store_true",
                    help="run (or, with --tpe-cache, record) the TPE side only, and write no results")
    ap.add_argument("--emend-set", action="append", default=[], type=parse_setting, metavar="SECTION.KEY=VALUE",
                    help="override one setting of emend.yaml on emend's side (repeatable), e.g. gates.lord_w0=0.2")
    ap.add_argument("--tpe-search-share", type=float, default=1.0, metavar="F",
                    help="TPE's trials see only a seeded share F of each (conversation, category) of the search "
                         "conversations (0.5: as many questions as emend's search part); emend's side is unchanged")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory (projects, strategies)")
    args = ap.parse_args()

    try:
        seeds = parse_list(args.seeds, "seeds")
        ceilings = parse_list(args.ceilings, "ceilings")
        if args.tpe_budget < 1:
            raise BadInput("--tpe-budget: must be at least 1")
        if not 0 < args.tpe_search_share <= 1:
            raise BadInput(f"--tpe-search-share: expected a share in (0, 1], got {args.tpe_search_share}")
        if args.emend_budget is None:
            args.emend_budget = args.tpe_budget / 2
        for c in ceilings:
            if not 50 <= c <= HARNESS_DEFAULT_CEILING:
                raise BadInput(f"--ceilings: {c} is outside 50..{HARNESS_DEFAULT_CEILING} "
                               "(emend eval's harness ceiling; the strategy carries the lower one)")
        if not Path(args.emend).is_file():
            raise BadInput(f"--emend {args.emend}: no such file (cargo build --release -p emend)")
        try:
            data = json.loads(Path(args.data).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise BadInput(f"--data {args.data}: {e}") from None
        if not isinstance(data, list) or len(data) <= SEARCH_CONVERSATIONS:
            raise BadInput(f"--data {args.data}: expected a list of more than {SEARCH_CONVERSATIONS} conversations")
        schema = json.loads(Path(args.schema).read_text())
        start = yaml.safe_load(Path(args.start).read_text())
        fields, skipped = field_space(schema, start)
    except (BadInput, OSError, json.JSONDecodeError, yaml.YAMLError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="emend-bench-optuna-"))
    t0 = time.monotonic()
    try:
        search, held = work / "search.json", work / "heldout.json"
        search.write_text(json.dumps(data[:SEARCH_CONVERSATIONS]))
        held.write_text(json.dumps(data[SEARCH_CONVERSATIONS:]))
        result: dict[str, Any] = {
            "data": args.data,
            "search_conversations": [s["sample_id"] for s in data[:SEARCH_CONVERSATIONS]],
            "heldout_conversations": [s["sample_id"] for s in data[SEARCH_CONVERSATIONS:]],
            "tpe_budget": args.tpe_budget,
            "emend_budget": args.emend_budget,
            "emend_max_rounds": args.emend_max_rounds,
            "emend_settings": {f"{sec}.{key}": value for sec, key, value in args.emend_set},
            "tpe_search_share": args.tpe_search_share,
            "emend_has_max_evals": has_max_evals(args.emend),
            "fields": [f.__dict__ for f in fields],
            "fields_not_sampled": skipped,
            "ceilings": [],
        }
        # TPE's search questions per seed (the same file at every ceiling) and
        # the share of a full evaluation one trial on them costs.
        tpe_search: dict[int, tuple[Path, float]] = {s: (search, 1.0) for s in seeds}
        if args.tpe_search_share < 1:
            for s in seeds:
                part = stratified_share(data[:SEARCH_CONVERSATIONS], args.tpe_search_share, s)
                path = work / f"search-tpe-s{s}.json"
                path.write_text(json.dumps(part))
                tpe_search[s] = (path, questions(part) / questions(data[:SEARCH_CONVERSATIONS]))
        for c in ceilings:
            rows = []
            for s in seeds:
                t = time.monotonic()
                path, cost = tpe_search[s]
                p = tpe_side(args, args.emend, schema, start, fields, path, held, c, s, work)
                if cost < 1:
                    p = dict(p, trials=p["evaluations_used"], evaluations_used=round(p["evaluations_used"] * cost, 4))
                tp = time.monotonic() - t
                if args.tpe_only:
                    print(f"ceiling {c} seed {s}: TPE held-out {p['heldout_accuracy']:.4f} ({tp:.0f} s)", file=sys.stderr)
                    continue
                t = time.monotonic()
                e = emend_side(args, args.emend, schema, search, held, c, s, work)
                te = time.monotonic() - t
                e["seconds"], p["seconds"] = round(te, 1), round(tp, 1)
                print(f"ceiling {c} seed {s}: emend held-out {e['heldout_accuracy']:.4f} ({e['evaluations_used']:.2f} evals, "
                      f"{te:.0f} s); TPE held-out {p['heldout_accuracy']:.4f} ({p['evaluations_used']} evals, {tp:.0f} s)",
                      file=sys.stderr)
                rows.append({"seed": s, "emend": e, "tpe": p})
            if args.tpe_only:
                continue
            result["ceilings"].append({
                "ceiling": c,
                "runs": rows,
                "median": {side: medians([r[side] for r in rows]) for side in ("emend", "tpe")},
            })
        result["seconds"] = round(time.monotonic() - t0, 1)
        if args.tpe_only:
            return 0
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        print(f"work directory kept: {work}", file=sys.stderr)
        return 1
    if not args.keep_work:
        shutil.rmtree(work)
    else:
        print(f"work directory: {work}", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    (out / "results.md").write_text(md)
    print(md)
    print(f"{out / 'results.md'}, {out / 'results.json'} ({result['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
