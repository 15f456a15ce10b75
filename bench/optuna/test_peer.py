"""Tests of the benchmark's pure parts: the field space, the invariant repair,
SMAC3's configuration space, the fields-changed count, the cache keys, the
verdict and the --peers option.

Run: target/bench-optuna/venv/bin/python -m unittest discover bench/optuna
"""

import argparse
import contextlib
import copy
import hashlib
import io
import json
import tempfile
import unittest
from pathlib import Path

import yaml

import peer

REPO = Path(__file__).resolve().parents[2]


class FieldSpace(unittest.TestCase):
    def test_synthetic_schema(self):
        schema = {
            "properties": {
                "a": {
                    "properties": {
                        "n": {"type": "integer", "minimum": 1, "maximum": 20, "x-evolvable": True, "x-step": 4},
                        "locked": {"type": "integer", "minimum": 0, "maximum": 9},
                        "o": {"$ref": "#/$defs/mult"},
                    }
                },
                "e": {"type": "string", "enum": ["x", "y"], "x-evolvable": True},
                "b": {"type": "boolean", "x-evolvable": True},
                "p": {"type": "string", "x-evolvable": True, "x-needs-role": "answerer"},
            },
            "$defs": {"mult": {"properties": {"m": {"type": "number", "minimum": 0.5, "maximum": 4.0,
                                                   "x-evolvable": True, "x-step": 0.25}}}},
        }
        start = {"a": {"n": 6, "locked": 3, "o": {"m": 1.0}}, "e": "x", "b": False, "p": "prompt"}
        fields, skipped = peer.field_space(schema, start)
        by = {f.path: f for f in fields}
        self.assertEqual(sorted(by), ["a.n", "a.o.m", "b", "e"])
        self.assertEqual((by["a.n"].kind, by["a.n"].low, by["a.n"].high, by["a.n"].step), ("int", 2, 18, 4))
        self.assertEqual((by["a.o.m"].low, by["a.o.m"].high), (0.5, 4.0))
        self.assertEqual(by["e"].choices, ["x", "y"])
        self.assertEqual(by["b"].choices, [False, True])
        self.assertEqual(len(skipped), 1)
        self.assertIn("p (needs role answerer", skipped[0])

    def test_grid_passes_through_the_start_value(self):
        self.assertEqual(peer.grid(0.75, 0.0, 1.0, 0.1), (0.05, 0.95))
        self.assertEqual(peer.grid(256, 32, 4096, 128), (128, 4096))
        low, _ = peer.grid(1.2, 0.0, 3.0, 0.2)
        self.assertEqual(str(low), "0.0")  # never -0.0 or a hair below the minimum

    def test_missing_start_field_is_bad_input(self):
        schema = {"properties": {"k": {"type": "integer", "minimum": 0, "maximum": 3, "x-evolvable": True}}}
        with self.assertRaises(peer.BadInput):
            peer.field_space(schema, {})


class StratifiedShare(unittest.TestCase):
    def conversations(self):
        qa = lambda n, cat: [{"question": f"{cat}-{i}", "category": cat} for i in range(n)]
        return [{"sample_id": "a", "qa": qa(10, 1) + qa(4, 2) + qa(1, 3)}, {"sample_id": "b", "qa": qa(6, 1)}]

    def test_half_of_every_stratum_seeded_and_in_order(self):
        convs = self.conversations()
        half = peer.stratified_share(convs, 0.5, 7)
        count = lambda conv, cat: sum(1 for q in conv["qa"] if q["category"] == cat)
        self.assertEqual([count(half[0], c) for c in (1, 2, 3)], [5, 2, 1])
        self.assertEqual(count(half[1], 1), 3)
        self.assertEqual(half, peer.stratified_share(convs, 0.5, 7))
        self.assertNotEqual(half, peer.stratified_share(convs, 0.5, 8))
        order = [q["question"] for q in convs[0]["qa"]]
        kept = [order.index(q["question"]) for q in half[0]["qa"]]
        self.assertEqual(kept, sorted(kept))
        self.assertEqual(len(convs[0]["qa"]), 15, "the input is not changed")

    def test_share_one_keeps_everything(self):
        convs = self.conversations()
        self.assertEqual(peer.stratified_share(convs, 1.0, 0), convs)


class Repair(unittest.TestCase):
    def setUp(self):
        self.schema = json.loads((REPO / "schemas" / "strategy.schema.json").read_text())
        self.start = yaml.safe_load((REPO / "strategies" / "default.yaml").read_text())

    def test_default_needs_no_repair(self):
        s = copy.deepcopy(self.start)
        self.assertEqual(peer.repair(s, self.schema), [])
        self.assertEqual(s, self.start)

    def test_chained_invariants_reach_a_fixed_point(self):
        s = copy.deepcopy(self.start)
        s["retrieve"]["pool"] = 5
        s["retrieve"]["top_k"] = 10
        s["retrieve"]["rerank_top_n"] = 12
        s["ingest"]["window_size"] = 2
        s["ingest"]["window_overlap"] = 3
        s["retrieve"]["expansion"]["terms"] = 30
        peer.repair(s, self.schema)
        self.assertEqual(s["retrieve"]["top_k"], 5)
        self.assertEqual(s["retrieve"]["rerank_top_n"], 5)
        self.assertEqual(s["ingest"]["window_overlap"], 1)
        self.assertEqual(s["retrieve"]["expansion"]["terms"], 20)

    def test_ceiling_clamps_the_budget(self):
        s = copy.deepcopy(self.start)
        s["assemble"]["token_budget"] = 1500
        c = peer.with_ceiling(s, self.schema, 1000)
        self.assertEqual((c["assemble"]["token_budget"], c["assemble"]["token_budget_ceiling"]), (1000, 1000))
        self.assertEqual(s["assemble"]["token_budget"], 1500)  # the input is not changed


class EmendSetting(unittest.TestCase):
    def test_value_is_read_as_yaml(self):
        self.assertEqual(peer.parse_setting("gates.lord_initial_wealth=0.2"), ("gates", "lord_initial_wealth", 0.2))
        self.assertEqual(peer.parse_setting("loop.search=false"), ("loop", "search", False))
        self.assertEqual(peer.parse_setting("gates.cluster_check=require"), ("gates", "cluster_check", "require"))

    def test_words_stay_words_as_emend_reads_them(self):
        self.assertEqual(peer.parse_setting("gates.step_bound=off"), ("gates", "step_bound", "off"))
        self.assertEqual(peer.parse_setting("gates.cluster_check=on"), ("gates", "cluster_check", "on"))
        text = "gates:\n  step_bound: off\n  cluster_check: no\n  alpha: 0.05\nloop:\n  search: true\n"
        cfg = peer.load_config(text)
        self.assertEqual(cfg, {"gates": {"step_bound": "off", "cluster_check": "no", "alpha": 0.05},
                               "loop": {"search": True}})
        # Written back, the words are quoted (so emend reads the same word).
        self.assertEqual(peer.load_config(yaml.safe_dump(cfg)), cfg)
        self.assertIn("step_bound: 'off'", yaml.safe_dump(cfg))

    def test_malformed_setting_is_refused(self):
        for text in ("gates.lord_initial_wealth", "lord_initial_wealth=0.2", "gates.=1", ".x=1", "gates.a.b=1"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=text):
                peer.parse_setting(text)


def synthetic_fields():
    """A Field list with every kind: stepped ints and floats, an unstepped
    float, a one-point grid, an enum and a bool; and its start values."""
    fields = [
        peer.Field("a.n", "int", 2, 18, 4),
        peer.Field("a.k", "int", 0, 15, 1),
        peer.Field("a.m", "float", 0.5, 4.0, 0.25),
        peer.Field("a.t", "float", 0.05, 0.95, 0.1),
        peer.Field("a.x", "float", 0.0, 1.0, None),
        peer.Field("a.one", "int", 7, 7, 3),
        peer.Field("e", "enum", choices=["rrf", "weighted_sum"]),
        peer.Field("b", "bool", choices=[False, True]),
    ]
    start = {"a": {"n": 6, "k": 3, "m": 1.0, "t": 0.75, "x": 0.3, "one": 7}, "e": "weighted_sum", "b": False}
    return fields, start


class SmacSpace(unittest.TestCase):
    def test_sampled_values_lie_on_the_grid(self):
        fields, start = synthetic_fields()
        cs = peer.smac_space(fields, start)
        cs.seed(3)
        by = {f.path: f for f in fields}
        seen: dict[str, set] = {f.path: set() for f in fields}
        for config in cs.sample_configuration(300):
            values = peer.from_config(fields, config)
            self.assertEqual(sorted(values), sorted(by))
            for path, v in values.items():
                f = by[path]
                seen[path].add(v)
                if f.kind in ("enum", "bool"):
                    self.assertIn(v, f.choices)
                    self.assertIs(type(v), type(f.choices[0]), path)  # plain Python values, not numpy's
                    continue
                self.assertTrue(f.low - 1e-12 <= v <= f.high + 1e-12, (path, v))
                self.assertIs(type(v), int if f.kind == "int" else float, path)
                if f.step is not None:
                    i = round((v - f.low) / f.step)
                    self.assertAlmostEqual(v, f.low + i * f.step, places=9, msg=path)
                    self.assertEqual(v, round(v, 10), path)  # as the Optuna peers round it
        self.assertEqual(seen["e"], {"rrf", "weighted_sum"})
        self.assertEqual(seen["b"], {False, True})
        self.assertEqual(seen["a.one"], {7})
        self.assertEqual(seen["a.n"], {2, 6, 10, 14, 18})
        self.assertEqual(seen["a.t"], {round(0.05 + i * 0.1, 10) for i in range(10)})
        self.assertEqual(len(seen["a.m"]), 15)

    def test_choices_and_default_are_the_start_strategy(self):
        fields, start = synthetic_fields()
        cs = peer.smac_space(fields, start)
        self.assertEqual(list(cs["e"].choices), ["rrf", "weighted_sum"])
        self.assertEqual(list(cs["b"].choices), [False, True])
        self.assertEqual((cs["a.n"].lower, cs["a.n"].upper), (0, 4))  # 2, 6, ..., 18 by index
        self.assertEqual((cs["a.t"].lower, cs["a.t"].upper), (0, 9))
        default = peer.from_config(fields, cs.get_default_configuration())
        self.assertEqual(default, {f.path: peer.get_path(start, f.path) for f in fields})

    def test_the_real_schema_start_is_the_default_configuration(self):
        schema = json.loads((REPO / "schemas" / "strategy.schema.json").read_text())
        start = yaml.safe_load((REPO / "strategies" / "default.yaml").read_text())
        fields, _ = peer.field_space(schema, start)
        default = peer.from_config(fields, peer.smac_space(fields, start).get_default_configuration())
        w = copy.deepcopy(start)
        for path, value in default.items():
            peer.set_path(w, path, value)
        self.assertEqual(peer.fields_changed(fields, start, w), [])
        self.assertEqual(w, start)

    def test_a_start_value_off_the_grid_or_the_choices_is_bad_input(self):
        fields, start = synthetic_fields()
        for path, value in (("a.n", 7), ("e", "none"), ("b", 0)):
            s = copy.deepcopy(start)
            peer.set_path(s, path, value)
            with self.assertRaises(peer.BadInput, msg=path):
                peer.smac_space(fields, s)


class FieldsChanged(unittest.TestCase):
    def test_counts_fields_that_differ_beyond_the_tolerance(self):
        fields, start = synthetic_fields()
        self.assertEqual(peer.fields_changed(fields, start, copy.deepcopy(start)), [])
        w = copy.deepcopy(start)
        w["a"]["m"] = 1.0 + 1e-12  # float noise is no change
        w["a"]["x"] = 0.30000000000000004
        w["a"]["n"] = 6.0  # an int read back as a float is the same number
        self.assertEqual(peer.fields_changed(fields, start, w), [])
        w["a"]["t"] = 0.85
        w["e"] = "rrf"
        w["b"] = True
        w["a"]["k"] = 4
        self.assertEqual(peer.fields_changed(fields, start, w), ["a.k", "a.t", "e", "b"])

    def test_only_fields_of_the_field_space_count(self):
        fields, start = synthetic_fields()
        start["locked"] = 1
        w = copy.deepcopy(start)
        w["locked"] = 2
        self.assertEqual(peer.fields_changed(fields, start, w), [])

    def test_a_bool_is_not_a_number(self):
        f = [peer.Field("b", "bool", choices=[False, True])]
        self.assertEqual(peer.fields_changed(f, {"b": True}, {"b": 1}), ["b"])


class CacheKey(unittest.TestCase):
    def setUp(self):
        self.files = [b"search", b"held", b"schema", b"start"]
        self.fields, _ = synthetic_fields()

    def old_tpe_key(self, budget, ceiling, seed, optuna_version, harness_hash):
        """tpe_key of the TPE-only benchmark (0e6e710), with its file reads and
        `emend eval` probe replaced by their results."""
        h = hashlib.sha256()
        for data in self.files:
            h.update(hashlib.sha256(data).digest())
        h.update(json.dumps([budget, ceiling, seed, optuna_version, harness_hash]).encode())
        return h.hexdigest()

    def key(self, peer_name, versions, **kw):
        items = dict(budget=90, ceiling=1000, seed=3, harness_hash="abc123")
        items.update(kw)
        return peer.cache_key(self.files, peer.key_items(peer_name, items["budget"], items["ceiling"], items["seed"],
                                                         versions, items["harness_hash"], self.fields))

    def test_tpe_keeps_the_key_of_the_tpe_only_benchmark(self):
        for budget, ceiling, seed in ((90, 1000, 0), (45, 2000, 6)):
            self.assertEqual(self.key("tpe", {"optuna": "5.0.0"}, budget=budget, ceiling=ceiling, seed=seed),
                             self.old_tpe_key(budget, ceiling, seed, "5.0.0", "abc123"))

    def test_peers_and_versions_have_keys_of_their_own(self):
        keys = {
            self.key("tpe", {"optuna": "5.0.0"}),
            self.key("tpe", {"optuna": "5.1.0"}),
            self.key("random", {"optuna": "5.0.0"}),
            self.key("random", {"optuna": "5.1.0"}),
            self.key("smac", {"smac": "2.4.1", "ConfigSpace": "1.2.2", "scikit-learn": "1.9.1"}),
            self.key("smac", {"smac": "2.4.1", "ConfigSpace": "1.2.2", "scikit-learn": "1.9.0"}),
            self.key("smac", {"smac": "2.4.1", "ConfigSpace": "1.2.2", "scikit-learn": "1.9.1"}, seed=4),
        }
        self.assertEqual(len(keys), 7)

    def test_the_field_space_is_part_of_the_other_peers_keys(self):
        before = self.key("random", {"optuna": "5.0.0"})
        self.fields[0] = peer.Field("a.n", "int", 2, 14, 4)
        self.assertNotEqual(self.key("random", {"optuna": "5.0.0"}), before)


class Verdict(unittest.TestCase):
    def median(self, emend, tpe, random, smac, emend_fields=2, tpe_fields=10):
        m = {p: {"heldout_accuracy": a, "fields_changed": 20} for p, a in (("tpe", tpe), ("random", random), ("smac", smac))}
        m["emend"] = {"heldout_accuracy": emend, "fields_changed": emend_fields}
        m["tpe"]["fields_changed"] = tpe_fields
        return m

    def test_against_the_best_peer(self):
        v = peer.verdict(self.median(0.70, 0.71, 0.65, 0.69), ["tpe", "random", "smac"], 90, 44.5, 1.0)
        self.assertEqual((v["best_peer"], v["accuracy_met"], v["fields_met"]), ("tpe", False, True))
        v = peer.verdict(self.median(0.71, 0.71, 0.65, 0.69, 6, 10), ["tpe", "random", "smac"], 90, 45.0, 1.0)
        self.assertEqual((v["accuracy_met"], v["fields_met"]), (True, False))
        v = peer.verdict(self.median(0.75, 0.71, 0.65, 0.69), ["tpe", "random", "smac"], 90, 45.5, 1.0)
        self.assertFalse(v["accuracy_met"], "over half the peer budget")

    def test_an_equal_data_tpe_is_not_assessed(self):
        v = peer.verdict(self.median(0.70, 0.75, 0.65, 0.69), ["tpe", "random", "smac"], 90, 44.0, 0.5)
        self.assertEqual((v["best_peer"], v["accuracy_met"], v["fields_met"], v["not_assessed"]),
                         ("smac", True, None, ["tpe"]))
        v = peer.verdict(self.median(0.70, 0.75, 0.65, 0.69), ["tpe"], 90, 44.0, 0.5)
        self.assertEqual((v["best_peer"], v["accuracy_met"], v["fields_met"]), (None, None, None))


    def test_the_worst_seed_must_be_within_a_point_of_the_best_peers(self):
        rows = [{"emend": {"heldout_accuracy": e}, "tpe": {"heldout_accuracy": t}}
                for e, t in ((0.70, 0.70), (0.72, 0.71), (0.66, 0.68))]
        m = self.median(0.70, 0.70, 0.60, 0.60)
        v = peer.verdict(m, ["tpe", "random", "smac"], 90, 44.0, 1.0, rows)
        self.assertEqual((v["worst_emend"], v["worst_best_peer"], v["worst_met"], v["accuracy_met"]),
                         (0.66, 0.68, False, False))
        rows[2]["emend"]["heldout_accuracy"] = 0.67
        v = peer.verdict(m, ["tpe", "random", "smac"], 90, 44.0, 1.0, rows)
        self.assertEqual((v["worst_met"], v["accuracy_met"]), (True, True))


class HeldoutData(unittest.TestCase):
    def args(self, held):
        return argparse.Namespace(data="dev.json", heldout_data=held)

    def test_without_it_the_first_three_conversations_search(self):
        data = [{"sample_id": f"c{i}"} for i in range(5)]
        search, held = peer.parts(self.args(None), data)
        self.assertEqual(([s["sample_id"] for s in search], [s["sample_id"] for s in held]),
                         (["c0", "c1", "c2"], ["c3", "c4"]))

    def test_with_it_every_conversation_searches_and_an_overlap_is_refused(self):
        data = [{"sample_id": f"c{i}"} for i in range(5)]
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "held.json"
            path.write_text(json.dumps([{"sample_id": "c7"}, {"sample_id": "c8"}]))
            search, held = peer.parts(self.args(str(path)), data)
            self.assertEqual((len(search), [s["sample_id"] for s in held]), (5, ["c7", "c8"]))
            path.write_text(json.dumps([{"sample_id": "c7"}, {"sample_id": "c3"}]))
            with self.assertRaisesRegex(peer.BadInput, "conversation c3 is also in --data"):
                peer.parts(self.args(str(path)), data)
            with self.assertRaisesRegex(peer.BadInput, "--heldout-data .*missing"):
                peer.parts(self.args(str(Path(d) / "missing")), data)


class PeersOption(unittest.TestCase):
    def test_subsets_in_a_fixed_order(self):
        self.assertEqual(peer.parse_peers("tpe,random,smac"), ["tpe", "random", "smac"])
        self.assertEqual(peer.parse_peers("smac, tpe"), ["tpe", "smac"])
        self.assertEqual(peer.parse_peers("random"), ["random"])
        self.assertEqual(peer.parse_peers("none"), [])

    def test_bad_peers_exit_2_with_one_line(self):
        for text in ("tpe,cma", "", "tpe,,smac", "TPE", "tpe,tpe"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = peer.main(["--peers", text, "--emend", "/nonexistent/emend"])
            self.assertEqual(code, 2, text)
            lines = err.getvalue().splitlines()
            self.assertEqual(len(lines), 1, lines)
            self.assertTrue(lines[0].startswith("error: --peers: expected a comma-separated list of tpe, random, smac"),
                            lines[0])

    def test_old_option_names_still_work(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = peer.main(["--tpe-budget", "0", "--tpe-only", "--tpe-cache", "/tmp/x", "--emend", "/nonexistent"])
        self.assertEqual(code, 2)
        self.assertEqual(err.getvalue(), "error: --peer-budget: must be at least 1\n")


if __name__ == "__main__":
    unittest.main()
