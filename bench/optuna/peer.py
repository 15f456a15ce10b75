#!/usr/bin/env python3
"""Peer benchmark: `emend evolve` against Optuna's TPE, random search and SMAC3.

Every side searches the same space -- every `x-evolvable` field of the
strategy schema, within its range, on a grid of its `x-step` anchored at the
start value; free-text fields such as the prompts, which need a model role,
keep their start values -- starting from the same strategy
(strategies/default.yaml: each peer's first trial). Every side searches on the
first three conversations of a LoCoMo file (by order in the file) and every
winner is evaluated on the remaining ones (the held-out part), with the
harness's token ceiling at each value of --ceilings. With --heldout-data FILE
every side searches on all of --data's conversations and every winner is
evaluated on FILE's, which must share no conversation with --data: for example
the five dev conversations against the other five of LoCoMo's locomo10.json,
data neither side tuned on.

The peers (--peers, default all three), each with --peer-budget full
evaluations of the search part (--tpe-budget is the older name):

  tpe     Optuna's TPESampler(seed=seed), the start strategy enqueued first.
  random  Optuna's RandomSampler(seed=seed), the same enqueued start trial.
  smac    SMAC3's HyperparameterOptimizationFacade (random forest),
          Scenario(deterministic=True, n_trials=budget, seed=seed), cost =
          1 - accuracy. Each stepped int or float is an Integer hyperparameter
          over its grid index (ConfigSpace 1.x has no quantisation), so every
          value lies on the same grid as the other peers'; enums and bools are
          categoricals; the start strategy is the default configuration and
          the first configuration of the initial design (then SMAC's Sobol
          points). SMAC orders the start points of its local search through a
          Python set, so its runs are reproducible only under one string-hash
          seed: the script re-executes itself with PYTHONHASHSEED=0 when smac
          runs and the variable is not already 0.

Every peer's trial is repaired to the schema's x-invariants and carries the
ceiling (with_ceiling) before it is evaluated; its winner is the evaluated
trial with the highest search accuracy (the first of equals). emend gets at
most --emend-budget full-evaluation equivalents (default: half the peer
budget).

The ceiling: a context holds at most min(assemble.token_budget,
assemble.token_budget_ceiling, the harness ceiling) tokens. `emend evolve`
takes the ceiling from emend.yaml (harness.budget_ceiling); `emend eval` has no
such option and uses the harness default (2,000), so every strategy this
script evaluates with `emend eval` carries the ceiling in its own locked
`assemble.token_budget_ceiling` (and `assemble.token_budget` is clamped to
it): the same context, token for token. The script checks this by
re-evaluating emend's served strategy on the search part and comparing with
the accuracy `emend evolve` reported.

With --tpe-search-share F (< 1) TPE's trials (TPE's only) see only a seeded
share F of each (conversation, category) of the search conversations, and a
trial counts as that share of a full evaluation: with F = 0.5 and the default
--emend-budget (half the peer budget), TPE and emend search on as many
questions with as many full-evaluation equivalents (emend's own split gives it
a search part of half the questions). results.md names this mode, and the
target is not assessed against TPE.

emend's budget: `emend evolve --max-evals N` when the binary has it (its
`evaluations_used` is the count, its `stopped` why it ended). Otherwise rounds
run one at a time and a round is counted as full_evaluations +
probe_evaluations * probe_size / n, plus one for the evaluation of the start
strategy (a peer pays it as its first trial); the project is snapshotted
before each round, and a round that would take emend past its budget is
undone and ends the run.

The cache (--peer-cache DIR, or --tpe-cache DIR): each peer run is recorded in
DIR under a key of its inputs (the data parts, schema, start strategy, budget,
ceiling, seed, the evaluating harness's hash as `emend eval` reports it, and
the installed library: Optuna; SMAC3 with ConfigSpace and scikit-learn) and
read back, with the wall time it took when it ran, when they are identical.
TPE's key is the one TPE-only versions of this script wrote, so their records
are still found; the other peers' keys add the peer's name, the library
versions and the field space. --peers-only (or --tpe-only) runs or records
the peers without emend's side.

Reported per ceiling and seed, and as medians over seeds, for emend and every
peer: search and held-out accuracy, held-out mean context tokens, evaluations
used (full-evaluation equivalents), wall time in seconds (recorded, for a
cached run), and the fields changed: how many fields of the field space have
another value in the side's winner than in the start strategy (both under the
ceiling; numbers equal within 1e-9). For emend also why the run stopped and
its accepted changes. Per ceiling, the verdict: the target is emend's median
held-out accuracy >= the best peer's median, with at most half the peer
budget in every run, and emend's worst seed no more than 1 pp below that
peer's worst seed; and emend's winner changing at most half as many fields
as TPE's (medians).

Exit codes: 0 ok, 1 a run failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import random
import re
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


class ConfigLoader(yaml.SafeLoader):
    """YAML as emend reads emend.yaml (YAML 1.2): only true/false are booleans.
    PyYAML's YAML 1.1 would read `off`, `on`, `yes` and `no` as booleans, and
    a settings file read and written back would then say `false` where emend
    expects the word (e.g. gates.cluster_check: off); the word read as a string is
    written back quoted, which emend reads as the same word."""


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))


def load_config(text: str) -> Any:
    return yaml.load(text, Loader=ConfigLoader)


def parse_setting(text: str) -> tuple[str, str, Any]:
    """`SECTION.KEY=VALUE` of --emend-set; VALUE is read as YAML (0.2, true, a word)."""
    name, sep, value = text.partition("=")
    section, dot, key = name.partition(".")
    if not sep or not dot or not section or not key or "." in key:
        raise argparse.ArgumentTypeError(f"expected SECTION.KEY=VALUE (e.g. gates.lord_initial_wealth=0.2), got {text!r}")
    return section, key, load_config(value)


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
    cfg = load_config(cfg_path.read_text())
    cfg["harness"]["budget_ceiling"] = ceiling
    cfg["loop"]["seed"] = seed
    # emend's default (the global search) unless --rule-evolver asks for the one-field moves.
    if args.rule_evolver:
        cfg.setdefault("search", {})["method"] = "rules"
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
        stopped = out.get("stopped", "unknown")
        runs.append(out)
        counted_by = "evaluations_used"
    else:
        used = 1.0  # the start strategy's full evaluation
        stopped = "rounds"
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
                stopped = "max_evals"
                break
            used += cost
            rounds += 1
            runs.append(out)
            stopped = out.get("stopped", "rounds")
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
        "stopped": stopped,
        "accepted": sum(r["accepted"] for r in runs),
        "winner": evaluated,
    }


# ---------------------------------------------------------------------------
# The peers

PEERS = ("tpe", "random", "smac")
PEER_LABELS = {"tpe": "TPE", "random": "random", "smac": "SMAC3"}
# The installed distributions a peer's runs depend on (part of its cache key).
PEER_LIBRARIES = {"tpe": ("optuna",), "random": ("optuna",), "smac": ("smac", "ConfigSpace", "scikit-learn")}


def parse_peers(text: str) -> list[str]:
    """--peers: a comma-separated subset of tpe, random, smac, returned in that
    order, or `none` (emend's side alone, to explore its settings)."""
    if text.strip() == "none":
        return []
    expected = f"expected a comma-separated list of {', '.join(PEERS)} (or none)"
    given: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if name not in PEERS:
            raise BadInput(f"--peers: {expected}, got {name!r} in {text!r}")
        if name in given:
            raise BadInput(f"--peers: {expected}, each at most once, got {name} twice in {text!r}")
        given.append(name)
    return [p for p in PEERS if p in given]


def library_versions(peer: str) -> dict[str, str]:
    """The installed versions of the peer's libraries, e.g. {"optuna": "5.0.0"}."""
    versions = {}
    for dist in PEER_LIBRARIES[peer]:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise BadInput(f"--peers: {peer} needs {dist}, which is not installed "
                           "(pip install -r bench/optuna/requirements.txt)") from None
    return versions


def key_items(peer: str, budget: int, ceiling: int, seed: int, versions: dict[str, str], harness_hash: str,
              fields: list[Field]) -> list:
    """The non-file inputs of a peer run, as hashed into its cache key. TPE's are
    exactly those of the TPE-only benchmark (budget, ceiling, seed, Optuna's
    version, the harness hash), so its records stay valid; the other peers add
    their name, their libraries' versions and the field space."""
    if peer == "tpe":
        return [budget, ceiling, seed, versions["optuna"], harness_hash]
    return [budget, ceiling, seed, harness_hash, peer, versions, [f.__dict__ for f in fields]]


def cache_key(files: list[bytes], items: list) -> str:
    """sha256 over the sha256 of each file's bytes, then the JSON of `items`."""
    h = hashlib.sha256()
    for data in files:
        h.update(hashlib.sha256(data).digest())
    h.update(json.dumps(items).encode())
    return h.hexdigest()


def harness_hash(emend: str, start: Path, tasks: Path, memo: dict) -> str:
    """The evaluating harness's hash as `emend eval` reports it (a binary whose
    loop changed evaluates alike), once per (binary, start, tasks)."""
    k = (emend, str(start), str(tasks))
    if k not in memo:
        probe = json.loads(run([emend, "eval", "--strategy", str(start), "--tasks", str(tasks), "--json"]))
        memo[k] = probe["harness_hash"]
    return memo[k]


def peer_key(args, peer: str, versions: dict[str, str], fields: list[Field], search: Path, held: Path,
             ceiling: int, seed: int, harness: str) -> str:
    """What a peer run depends on: the data parts (the search questions it sees),
    schema, start strategy, budget, ceiling, seed, libraries and harness."""
    files = [p.read_bytes() for p in (search, held, Path(args.schema), Path(args.start))]
    return cache_key(files, key_items(peer, args.peer_budget, ceiling, seed, versions, harness, fields))


class EvalClock:
    """`emend eval` for one peer run, adding up the seconds its calls take."""

    def __init__(self, emend: str, work: Path):
        self.emend, self.work, self.seconds = emend, work, 0.0

    def __call__(self, strategy: dict, tasks: Path, name: str) -> dict:
        t = time.monotonic()
        try:
            return emend_eval(self.emend, strategy, tasks, self.work, name)
        finally:
            self.seconds += time.monotonic() - t


def peer_side(args, peer: str, versions: dict[str, str], schema: dict, start: dict, fields: list[Field],
              search: Path, held: Path, ceiling: int, seed: int, work: Path, memo: dict) -> dict:
    """A peer's row; with --peer-cache DIR, read from DIR when a run with identical
    inputs (see peer_key) is recorded there (its `seconds` are those of the
    recorded run, and `cached` names the file), written there otherwise."""
    cache = None
    if args.peer_cache:
        harness = harness_hash(args.emend, Path(args.start), search, memo)
        cache = Path(args.peer_cache) / f"{peer_key(args, peer, versions, fields, search, held, ceiling, seed, harness)}.json"
        if cache.is_file():
            row = json.loads(cache.read_text())
            row["cached"] = str(cache)
            return row
    t = time.monotonic()
    run_peer = smac_run if peer == "smac" else optuna_run
    row = run_peer(args, peer, schema, start, fields, search, held, ceiling, seed, work)
    row["seconds"] = round(time.monotonic() - t, 1)
    row["peer"] = peer
    row["versions"] = versions
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(row, indent=2) + "\n")
        tmp.replace(cache)
    return row


def peer_row(accuracies: list[float], winner: dict, held: dict, evaluate: EvalClock) -> dict:
    """A peer run's row: its winner is the first trial of the highest search
    accuracy; `trial_accuracies` is every trial's search accuracy in order."""
    best = max(range(len(accuracies)), key=lambda i: (accuracies[i], -i))
    return {
        "search_accuracy": accuracies[best],
        "heldout_accuracy": held["accuracy"],
        "heldout_mean_context_tokens": held["mean_context_tokens"],
        "evaluations_used": len(accuracies),
        "best_trial": best,
        "winner": winner,
        "trial_accuracies": accuracies,
        "eval_seconds": round(evaluate.seconds, 1),
    }


def optuna_run(args, peer: str, schema: dict, start: dict, fields: list[Field], search: Path, held: Path,
               ceiling: int, seed: int, work: Path) -> dict:
    """TPE or random search: Optuna's TPESampler / RandomSampler seeded by the
    seed, the start strategy enqueued as the first trial."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if peer == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed)
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial({f.path: get_path(start, f.path) for f in fields})
    evaluate = EvalClock(args.emend, work)

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
        r = evaluate(s, search, f"{peer}-c{ceiling}-s{seed}-t{trial.number}")
        trial.set_user_attr("strategy", s)
        trial.set_user_attr("mean_context_tokens", r["mean_context_tokens"])
        return r["accuracy"]

    study.optimize(objective, n_trials=args.peer_budget)
    best = study.best_trial  # the first trial of the highest accuracy, as peer_row picks it
    winner = best.user_attrs["strategy"]
    h = evaluate(winner, held, f"{peer}-held-c{ceiling}-s{seed}")
    row = peer_row([t.value for t in study.trials], winner, h, evaluate)
    if row["best_trial"] != best.number:
        raise RunFailed(f"Optuna's best trial is {best.number}, the first of the highest accuracy {row['best_trial']}")
    return row


def grid_size(f: Field) -> int:
    """The number of steps of a stepped field's grid (its points are 0..size)."""
    return round((f.high - f.low) / f.step)


def grid_value(f: Field, index: int) -> int | float:
    """The value at a grid index, as Optuna's suggest_int / suggest_float(step=) give it."""
    if f.kind == "int":
        return f.low + int(index) * f.step
    return round(f.low + int(index) * f.step, 10) + 0.0


def grid_index(f: Field, value: float) -> int:
    i = round((value - f.low) / f.step)
    if not 0 <= i <= grid_size(f) or abs(grid_value(f, i) - value) > 1e-9:
        raise BadInput(f"start strategy: {f.path} = {value} is not on the grid {f.low}..{f.high} step {f.step}")
    return i


def smac_space(fields: list[Field], start: dict):
    """SMAC3's ConfigSpace of the field space (unseeded: the facade seeds it).

    A stepped int or float is an Integer hyperparameter over its grid index
    0..size (ConfigSpace 1.x has no quantisation; the index keeps the order
    for the random forest and the local search), decoded by grid_value; a
    float without a step is a Float; enums and bools are categoricals. Every
    default is the start strategy's value, so the default configuration is the
    start strategy."""
    from ConfigSpace import Categorical, ConfigurationSpace, Constant, Float, Integer

    cs = ConfigurationSpace()
    for f in fields:
        value = get_path(start, f.path)
        if f.kind in ("enum", "bool"):
            if not any(type(c) is type(value) and c == value for c in f.choices):
                raise BadInput(f"start strategy: {f.path} = {value!r} is not one of {f.choices}")
            cs.add(Categorical(f.path, f.choices, default=value))
        elif f.step is None:
            cs.add(Float(f.path, (f.low, f.high), default=value))
        elif grid_size(f) == 0:
            cs.add(Constant(f.path, 0))  # a one-point grid: the start value
        else:
            cs.add(Integer(f.path, (0, grid_size(f)), default=grid_index(f, value)))
    return cs


def from_config(fields: list[Field], config) -> dict[str, Any]:
    """Each field's value in a SMAC configuration, as a plain Python value
    (a choice of the field's own list, a grid value)."""
    values: dict[str, Any] = {}
    for f in fields:
        v = config[f.path]
        if f.kind in ("enum", "bool"):
            values[f.path] = next(c for c in f.choices if c == v)
        elif f.step is None:
            values[f.path] = float(v)
        else:
            values[f.path] = grid_value(f, v)
    return values


def smac_run(args, peer: str, schema: dict, start: dict, fields: list[Field], search: Path, held: Path,
             ceiling: int, seed: int, work: Path) -> dict:
    """SMAC3's HyperparameterOptimizationFacade (random forest, expected
    improvement), Scenario(deterministic=True, n_trials=budget, seed=seed),
    cost 1 - accuracy; the start strategy is its first trial."""
    from smac import Callback, HyperparameterOptimizationFacade, Scenario
    from smac.initial_design import SobolInitialDesign

    cs = smac_space(fields, start)
    first = cs.get_default_configuration()

    class StartFirst(SobolInitialDesign):
        """SMAC's Sobol initial design with the start strategy in front."""

        def select_configurations(self):
            return [first] + [c for c in super().select_configurations() if c != first]

    failed: list[BaseException] = []

    class StopOnFailure(Callback):
        """SMAC records a failing target function as a crash and goes on; this ends the run."""

        def on_tell_end(self, smbo, info, value):
            return False if failed else None

    budget = args.peer_budget
    scenario = Scenario(cs, deterministic=True, n_trials=budget, seed=seed,
                        output_directory=work / "smac" / f"c{ceiling}-s{seed}")
    # The facade's default design (10 configurations a hyperparameter, at most
    # a quarter of the trials), plus the start strategy.
    sobol = max(0, min(10 * len(fields), int(0.25 * budget), budget - 1))
    initial = StartFirst(scenario, n_configs=sobol, additional_configs=[first])
    evaluate = EvalClock(args.emend, work)
    trials: list[tuple[float, dict]] = []

    def train(config, seed: int = 0) -> float:
        try:
            s = copy.deepcopy(start)
            for path, v in from_config(fields, config).items():
                set_path(s, path, v)
            s = with_ceiling(s, schema, ceiling)
            r = evaluate(s, search, f"smac-c{ceiling}-s{scenario.seed}-t{len(trials)}")
        except BaseException as e:
            failed.append(e)
            raise
        trials.append((r["accuracy"], s))
        return 1.0 - r["accuracy"]

    facade = HyperparameterOptimizationFacade(scenario, train, initial_design=initial, callbacks=[StopOnFailure()],
                                              overwrite=True, logging_level=logging.ERROR)
    facade.optimize()
    if failed:
        e = failed[0]
        raise e if isinstance(e, (RunFailed, BadInput)) else RunFailed(f"SMAC3 trial {len(trials)}: {e}")
    if not trials:
        raise RunFailed("SMAC3 evaluated no configuration")
    accuracies = [a for a, _ in trials]
    winner = trials[max(range(len(trials)), key=lambda i: (accuracies[i], -i))][1]
    h = evaluate(winner, held, f"smac-held-c{ceiling}-s{seed}")
    return dict(peer_row(accuracies, winner, h, evaluate), sobol_configs=sobol)


# ---------------------------------------------------------------------------
# Report


def fields_changed(fields: list[Field], start: dict, winner: dict) -> list[str]:
    """The fields of the field space whose value in `winner` is not the one in
    `start`: numbers compared within 1e-9, bools and strings exactly."""
    changed = []
    for f in fields:
        a, b = get_path(start, f.path), get_path(winner, f.path)
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
        if numbers:
            same = abs(a - b) <= 1e-9
        else:
            same = type(a) is type(b) and a == b
        if not same:
            changed.append(f.path)
    return changed


METRICS = ["search_accuracy", "heldout_accuracy", "heldout_mean_context_tokens", "evaluations_used",
           "fields_changed", "seconds"]


def medians(rows: list[dict]) -> dict:
    """The median over seeds of every metric (of the rows that have it; None if none does)."""
    out: dict[str, Any] = {}
    for m in METRICS + ["accepted"]:
        values = [r[m] for r in rows if r.get(m) is not None]
        if values or m in METRICS:
            out[m] = statistics.median(values) if values else None
    if any("stopped" in r for r in rows):
        reasons: dict[str, int] = {}
        for r in rows:
            reasons[r.get("stopped", "unknown")] = reasons.get(r.get("stopped", "unknown"), 0) + 1
        out["stopped"] = reasons
    return out


WORST_SEED_MARGIN = 0.01


def worst(rows: list[dict], side: str) -> float:
    """The side's lowest held-out accuracy over the seeds."""
    return min(r[side]["heldout_accuracy"] for r in rows)


def verdict(median: dict, peers: list[str], peer_budget: int, emend_most_used: float, tpe_share: float,
            rows: list[dict] | None = None) -> dict:
    """The target at one ceiling: emend's median held-out accuracy >= the best
    peer's, emend using at most half the peer budget in every run, and (given
    the per-seed `rows`) emend's worst seed no more than 1 pp below the best
    peer's worst seed; and the median number of fields emend's winner changes
    at most half of TPE's.
    With a TPE search share < 1, TPE is an equal-data comparison and neither
    part is assessed against it."""
    tpe_assessed = "tpe" in peers and tpe_share >= 1
    assessed = [p for p in peers if p != "tpe" or tpe_assessed]
    out: dict[str, Any] = {"not_assessed": [p for p in peers if p not in assessed],
                           "emend_most_evaluations": emend_most_used, "evaluations_allowed": peer_budget / 2}
    if assessed:
        best = max(assessed, key=lambda p: (median[p]["heldout_accuracy"], -assessed.index(p)))
        out["best_peer"] = best
        out["accuracy_met"] = (median["emend"]["heldout_accuracy"] >= median[best]["heldout_accuracy"]
                               and emend_most_used <= peer_budget / 2 + 1e-9)
        if rows:
            out["worst_emend"], out["worst_best_peer"] = worst(rows, "emend"), worst(rows, best)
            out["worst_met"] = out["worst_emend"] >= out["worst_best_peer"] - WORST_SEED_MARGIN - 1e-12
            out["accuracy_met"] = out["accuracy_met"] and out["worst_met"]
    else:
        out["best_peer"] = out["accuracy_met"] = None
    if tpe_assessed:
        out["fields_met"] = median["emend"]["fields_changed"] <= median["tpe"]["fields_changed"] / 2
    else:
        out["fields_met"] = None
    return out


def side_label(side: str, tpe_share: float) -> str:
    if side == "tpe" and tpe_share < 1:
        return f"TPE (share {tpe_share:g})"
    return PEER_LABELS.get(side, side)


def mode(result: dict) -> str:
    share = result.get("tpe_search_share", 1.0)
    if result.get("peers_only"):
        return "peers only (no emend side)"
    if share < 1 and "tpe" in result["peers"]:
        return (f"TPE at equal data (its trials see a {share:g} share of each search conversation's questions per "
                f"category, a trial counting as {share:g} of a full evaluation; the target is not assessed against it)"
                + ("; the other peers at full data" if len(result["peers"]) > 1 else ""))
    return "every peer at full data, emend at most half the peer budget"


def markdown(result: dict) -> str:
    share = result.get("tpe_search_share", 1.0)
    peers = result["peers"]
    sides = peers if result.get("peers_only") else ["emend"] + peers
    lines = [
        ("Peers " if result.get("peers_only") else "emend vs " if peers else "emend alone")
        + f"{', '.join(side_label(p, share) for p in peers)}: search on "
        f"{', '.join(result['search_conversations'])}, held out {', '.join(result['heldout_conversations'])} "
        f"(peer budget {result['peer_budget']} full evaluations each"
        + ("" if result.get("peers_only") else f", emend budget {result['emend_budget']:g} equivalents") + ")"
        + "".join(f"; emend {k}={v}" for k, v in result.get("emend_settings", {}).items()),
        "",
        f"Mode: {mode(result)}.",
        "",
        "| ceiling | seed | side | search acc | held-out acc | held-out mean ctx tokens | evals used | fields changed "
        "| wall s | stopped | accepted |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]

    def cells(r: dict, median: bool) -> str:
        wall = "—" if r.get("seconds") is None else f"{r['seconds']:.0f}"
        if not median and r.get("cached"):
            wall += " (cached)"
        if "stopped" not in r:
            stopped = "—"
        elif isinstance(r["stopped"], dict):
            stopped = ", ".join(f"{k} ×{n}" for k, n in sorted(r["stopped"].items()))
        else:
            stopped = r["stopped"]
        accepted = "—" if r.get("accepted") is None else f"{r['accepted']:g}"
        return (f"{100 * r['search_accuracy']:.1f}% | {100 * r['heldout_accuracy']:.1f}% | "
                f"{r['heldout_mean_context_tokens']:.1f} | {r['evaluations_used']:.2f} | {r['fields_changed']:g} | "
                f"{wall} | {stopped} | {accepted}")

    for c in result["ceilings"]:
        for row in c["runs"]:
            for side in sides:
                lines.append(f"| {c['ceiling']} | {row['seed']} | {side_label(side, share)} | {cells(row[side], False)} |")
    for c in result["ceilings"]:
        for side in sides:
            lines.append(f"| {c['ceiling']} | median | {side_label(side, share)} | {cells(c['median'][side], True)} |")
    lines.append("")
    for c in result["ceilings"]:
        m, v = c["median"], c.get("verdict")
        if v is None:
            lines.append(f"- ceiling {c['ceiling']}: median held-out "
                         + ", ".join(f"{side_label(p, share)} {100 * m[p]['heldout_accuracy']:.1f}%" for p in peers))
            continue
        e = m["emend"]["heldout_accuracy"]
        others = ", ".join(f"{side_label(p, share)} {100 * m[p]['heldout_accuracy']:.1f}%"
                           for p in peers if p != v["best_peer"])
        if v["best_peer"] is not None:
            b = m[v["best_peer"]]["heldout_accuracy"]
            acc = (f"median held-out emend {100 * e:.1f}% vs the best peer, {side_label(v['best_peer'], share)}, "
                   f"{100 * b:.1f}% ({100 * (e - b):+.1f} pp" + (f"; {others}" if others else "") + "), emend using "
                   f"at most {v['emend_most_evaluations']:.2f} equivalents (half the peer budget: "
                   f"{v['evaluations_allowed']:g})"
                   + (f", worst seed emend {100 * v['worst_emend']:.1f}% vs {100 * v['worst_best_peer']:.1f}% "
                      f"(at most 1 pp below)" if "worst_emend" in v else "")
                   + f": target {'met' if v['accuracy_met'] else 'not met'}")
        else:
            acc = f"median held-out emend {100 * e:.1f}% vs {others}: no peer at full data, the target is not assessed"
        if v["fields_met"] is not None:
            fields = (f"fields changed (medians) emend {m['emend']['fields_changed']:g} vs TPE "
                      f"{m['tpe']['fields_changed']:g} (at most half): target {'met' if v['fields_met'] else 'not met'}")
        elif "tpe" in peers:
            fields = (f"fields changed (medians) emend {m['emend']['fields_changed']:g} vs TPE "
                      f"{m['tpe']['fields_changed']:g}: TPE is an equal-data comparison, not assessed")
        else:
            fields = "fields changed: TPE not run, not assessed"
        if v["not_assessed"]:
            acc += f"; {', '.join(side_label(p, share) for p in v['not_assessed'])}: an equal-data comparison, not assessed"
        lines.append(f"- ceiling {c['ceiling']}: {acc}; {fields}")
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


def parts(args, data: Any) -> tuple[list[dict], list[dict]]:
    """The search and held-out conversations: --data's first three and the
    rest, or with --heldout-data all of --data's and all of that file's."""
    if args.heldout_data is None:
        if not isinstance(data, list) or len(data) <= SEARCH_CONVERSATIONS:
            raise BadInput(f"--data {args.data}: expected a list of more than {SEARCH_CONVERSATIONS} conversations")
        return data[:SEARCH_CONVERSATIONS], data[SEARCH_CONVERSATIONS:]
    if not isinstance(data, list) or not data:
        raise BadInput(f"--data {args.data}: expected a list of conversations")
    try:
        held = json.loads(Path(args.heldout_data).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BadInput(f"--heldout-data {args.heldout_data}: {e}") from None
    if not isinstance(held, list) or not held:
        raise BadInput(f"--heldout-data {args.heldout_data}: expected a list of conversations")
    both = sorted({s.get("sample_id") for s in data} & {s.get("sample_id") for s in held})
    if both:
        raise BadInput(f"--heldout-data {args.heldout_data}: conversation {both[0]} is also in --data {args.data} "
                       "(a held-out part must be new to the search)")
    return data, held


def parse_list(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--{what}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise BadInput(f"--{what}: empty")
    return values


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emend", default=str(REPO / "target" / "release" / "emend"), help="the emend binary")
    ap.add_argument("--data", default=os.environ.get("EMEND_LOCOMO", str(REPO.parent / "shared" / "data" / "locomo10-dev.json")),
                    help="a LoCoMo-format JSON file (default: ../shared/data/locomo10-dev.json or EMEND_LOCOMO)")
    ap.add_argument("--heldout-data", default=None, metavar="FILE",
                    help="evaluate every winner on FILE's conversations and search on all of --data's "
                         "(default: search on --data's first three, hold out the rest)")
    ap.add_argument("--schema", default=str(REPO / "schemas" / "strategy.schema.json"))
    ap.add_argument("--start", default=str(REPO / "strategies" / "default.yaml"), help="the start strategy of every side")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"the peers to run, a comma-separated subset of {', '.join(PEERS)} (default: all), or none")
    ap.add_argument("--peer-budget", "--tpe-budget", dest="peer_budget", type=int, default=90,
                    help="each peer's trials (full evaluations of the search part); --tpe-budget is the older name")
    ap.add_argument("--emend-budget", type=float, default=None,
                    help="emend's full-evaluation equivalents (default: half the peer budget)")
    ap.add_argument("--emend-max-rounds", type=int, default=60, help="rounds emend may run at most")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--ceilings", default="1000,2000")
    ap.add_argument("--out", default=str(REPO / "target" / "bench-optuna"), help="directory of results.md and results.json")
    ap.add_argument("--rule-evolver", action="store_true",
                    help="run emend with search.method: rules (the one-field rule evolver) instead of the global search")
    ap.add_argument("--peer-cache", "--tpe-cache", dest="peer_cache", default=None, metavar="DIR",
                    help="directory of recorded peer runs: a run whose inputs are identical is read, not repeated "
                         "(--tpe-cache is the older name)")
    ap.add_argument("--peers-only", "--tpe-only", dest="peers_only", action="store_true",
                    help="run (or, with --peer-cache, record) the peers only, without emend's side "
                         "(--tpe-only is the older name)")
    ap.add_argument("--emend-set", action="append", default=[], type=parse_setting, metavar="SECTION.KEY=VALUE",
                    help="override one setting of emend.yaml on emend's side (repeatable), e.g. gates.lord_initial_wealth=0.2")
    ap.add_argument("--tpe-search-share", type=float, default=1.0, metavar="F",
                    help="TPE's trials see only a seeded share F of each (conversation, category) of the search "
                         "conversations (0.5: as many questions as emend's search part); emend's side and the other "
                         "peers are unchanged")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory (projects, strategies)")
    args = ap.parse_args(argv)

    try:
        peers = parse_peers(args.peers)
        if not peers and args.peers_only:
            raise BadInput("--peers none with --peers-only: nothing to run")
        seeds = parse_list(args.seeds, "seeds")
        ceilings = parse_list(args.ceilings, "ceilings")
        if args.peer_budget < 1:
            raise BadInput("--peer-budget: must be at least 1")
        if not 0 < args.tpe_search_share <= 1:
            raise BadInput(f"--tpe-search-share: expected a share in (0, 1], got {args.tpe_search_share}")
        if args.emend_budget is None:
            args.emend_budget = args.peer_budget / 2
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
        search_data, held_data = parts(args, data)
        schema = json.loads(Path(args.schema).read_text())
        start = yaml.safe_load(Path(args.start).read_text())
        fields, skipped = field_space(schema, start)
        versions = {p: library_versions(p) for p in peers}
        if "smac" in peers:
            smac_space(fields, start)  # the start strategy must be a configuration of it
    except (BadInput, OSError, json.JSONDecodeError, yaml.YAMLError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    if "smac" in peers and os.environ.get("PYTHONHASHSEED") != "0":
        # SMAC3 orders its local search's start points through a set of
        # configurations: reproducible only under a fixed string-hash seed.
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)

    work = Path(tempfile.mkdtemp(prefix="emend-bench-optuna-"))
    t0 = time.monotonic()
    try:
        search, held = work / "search.json", work / "heldout.json"
        search.write_text(json.dumps(search_data))
        held.write_text(json.dumps(held_data))
        result: dict[str, Any] = {
            "data": args.data,
            "heldout_data": args.heldout_data,
            "search_conversations": [s["sample_id"] for s in search_data],
            "heldout_conversations": [s["sample_id"] for s in held_data],
            "peers": peers,
            "peer_versions": versions,
            "peer_budget": args.peer_budget,
            "tpe_budget": args.peer_budget,
            "emend_budget": args.emend_budget,
            "emend_max_rounds": args.emend_max_rounds,
            "emend_settings": {f"{sec}.{key}": value for sec, key, value in args.emend_set},
            "tpe_search_share": args.tpe_search_share,
            "peers_only": args.peers_only,
            "emend_has_max_evals": None if args.peers_only else has_max_evals(args.emend),
            "fields": [f.__dict__ for f in fields],
            "fields_not_sampled": skipped,
            "ceilings": [],
        }
        result["mode"] = mode(result)
        # TPE's search questions per seed (the same file at every ceiling) and
        # the share of a full evaluation one trial on them costs.
        tpe_search: dict[int, tuple[Path, float]] = {s: (search, 1.0) for s in seeds}
        if args.tpe_search_share < 1:
            for s in seeds:
                part = stratified_share(search_data, args.tpe_search_share, s)
                path = work / f"search-tpe-s{s}.json"
                path.write_text(json.dumps(part))
                tpe_search[s] = (path, questions(part) / questions(search_data))
        memo: dict = {}
        for c in ceilings:
            start_c = with_ceiling(start, schema, c)  # what "changed from the start" compares with
            rows = []
            for s in seeds:
                row: dict[str, Any] = {"seed": s}
                for p in peers:
                    path, cost = tpe_search[s] if p == "tpe" else (search, 1.0)
                    r = peer_side(args, p, versions[p], schema, start, fields, path, held, c, s, work, memo)
                    if cost < 1:
                        r = dict(r, trials=r["evaluations_used"], evaluations_used=round(r["evaluations_used"] * cost, 4))
                    changed = fields_changed(fields, start_c, r["winner"])
                    row[p] = r = dict(r, fields_changed=len(changed), changed_fields=changed)
                    wall = "?" if r.get("seconds") is None else f"{r['seconds']:.0f}"
                    print(f"ceiling {c} seed {s}: {side_label(p, args.tpe_search_share)} held-out "
                          f"{r['heldout_accuracy']:.4f}, {len(changed)} fields changed, {r['evaluations_used']:g} evals, "
                          f"{wall} s" + (" (cached)" if r.get("cached") else ""), file=sys.stderr)
                if not args.peers_only:
                    t = time.monotonic()
                    e = emend_side(args, args.emend, schema, search, held, c, s, work)
                    e["seconds"] = round(time.monotonic() - t, 1)
                    changed = fields_changed(fields, start_c, e["winner"])
                    row["emend"] = e = dict(e, fields_changed=len(changed), changed_fields=changed)
                    print(f"ceiling {c} seed {s}: emend held-out {e['heldout_accuracy']:.4f}, {len(changed)} fields "
                          f"changed, {e['evaluations_used']:.2f} evals, stopped {e['stopped']}, {e['seconds']:.0f} s",
                          file=sys.stderr)
                rows.append(row)
            sides = peers + ([] if args.peers_only else ["emend"])
            entry: dict[str, Any] = {
                "ceiling": c,
                "runs": rows,
                "median": {side: medians([r[side] for r in rows]) for side in sides},
            }
            if not args.peers_only:
                entry["verdict"] = verdict(entry["median"], peers, args.peer_budget,
                                           max(r["emend"]["evaluations_used"] for r in rows), args.tpe_search_share,
                                           rows)
            result["ceilings"].append(entry)
        result["seconds"] = round(time.monotonic() - t0, 1)
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
