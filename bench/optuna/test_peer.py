"""Tests of the benchmark's pure parts: the field space and the invariant repair.

Run: target/bench-optuna/venv/bin/python -m unittest discover bench/optuna
"""

import argparse
import copy
import json
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
        self.assertEqual(peer.parse_setting("gates.lord_w0=0.2"), ("gates", "lord_w0", 0.2))
        self.assertEqual(peer.parse_setting("loop.search=false"), ("loop", "search", False))
        self.assertEqual(peer.parse_setting("gates.cluster_check=require"), ("gates", "cluster_check", "require"))

    def test_malformed_setting_is_refused(self):
        for text in ("gates.lord_w0", "lord_w0=0.2", "gates.=1", ".x=1", "gates.a.b=1"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=text):
                peer.parse_setting(text)


if __name__ == "__main__":
    unittest.main()
