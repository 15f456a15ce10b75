"""Tests of the driver's own logic, without a cluster: the shard attempt on
a worker (placeholders, timeout, stderr tail), the answer for each way a
command can end, and the serve loop's protocol with a stand-in for Ray.

Run: python3 -m unittest discover examples/ray
(scripts/check-ray.sh runs them with Ray installed; they need only the
standard library.)
"""

import io
import json
import os
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emend_ray  # noqa: E402


class RunShard(unittest.TestCase):
    def test_placeholders_are_files_with_the_shard_bytes(self):
        r = emend_ray.run_shard(["sh", "-c", 'cat "$0" "$1" > "$2"', "{strategy}", "{tasks}", "{out}"],
                                None, {}, 10, b"S\n", b"T\n")
        self.assertEqual((r["returncode"], r["timed_out"], r["out"]), (0, False, b"S\nT\n"))

    def test_env_reaches_the_command_and_the_worker_pid_is_set(self):
        r = emend_ray.run_shard(["sh", "-c", 'echo "$K $EMEND_RAY_WORKER_PID" > "$0"', "{out}"],
                                None, {"K": "v"}, 10, b"", b"")
        self.assertEqual(r["out"], f"v {os.getpid()}\n".encode())

    def test_a_command_past_its_timeout_is_killed_on_time(self):
        t = time.monotonic()
        r = emend_ray.run_shard(["sh", "-c", "echo started >&2; exec sleep 30"], None, {}, 0.3, b"", b"")
        self.assertLess(time.monotonic() - t, 5)
        self.assertTrue(r["timed_out"])
        self.assertEqual(r["stderr"], b"started\n")
        self.assertIsNone(r["out"])

    def test_outcomes_of_a_failed_command_are_not_returned(self):
        r = emend_ray.run_shard(["sh", "-c", 'echo x > "$0"; exit 3', "{out}"], None, {}, 10, b"", b"")
        self.assertEqual((r["returncode"], r["out"]), (3, None))

    def test_a_missing_program_or_workdir_is_a_spawn_error(self):
        r = emend_ray.run_shard(["/no/such/program"], None, {}, 10, b"", b"")
        self.assertIn("cannot start '/no/such/program'", r["spawn_error"])
        r = emend_ray.run_shard(["true"], "/no/such/dir", {}, 10, b"", b"")
        self.assertIn("workdir /no/such/dir: no such directory", r["spawn_error"])

    def test_the_stderr_tail_is_bounded(self):
        r = emend_ray.run_shard(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a >&2"], None, {}, 10, b"", b"")
        self.assertEqual(len(r["stderr"]), emend_ray.STDERR_TAIL)


class Outcome(unittest.TestCase):
    def answer(self, r, out="/nonexistent/out"):
        err = io.BytesIO()
        return emend_ray.outcome(r, 7, out, err), err.getvalue()

    def test_each_ending_has_its_answer(self):
        base = {"returncode": 0, "timed_out": False, "stderr": b"", "out": None}
        self.assertEqual(self.answer({**base, "returncode": 3, "stderr": b"boom\n"}), ({"exit": 3}, b"boom\n"))
        self.assertEqual(self.answer({**base, "returncode": -9})[0], {"signal": 9})
        status, said = self.answer({**base, "returncode": -9, "timed_out": True})
        self.assertEqual(status, {"exit": emend_ray.EXIT_TIMEOUT})
        self.assertIn(b"timed out after 7 s", said)
        status, said = self.answer({"spawn_error": "cannot start 'x'"})
        self.assertEqual((status, said), ({"exit": emend_ray.EXIT_SPAWN}, b"emend-ray: cannot start 'x'\n"))

    def test_outcomes_are_written_whole(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.jsonl")
            status, _ = self.answer({"returncode": 0, "timed_out": False, "stderr": b"", "out": b"{}\n"}, out)
            self.assertEqual(status, {"exit": 0})
            with open(out, "rb") as f:
                self.assertEqual(f.read(), b"{}\n")
            self.assertEqual(os.listdir(d), ["out.jsonl"])


class FakeRay:
    """Runs each task in a thread; `get` waits for it; a task whose argv is
    ["crash"] raises like a lost worker; `cancel` is recorded."""

    class Ref:
        def __init__(self, fn, args):
            self.done = threading.Event()
            self.value = self.error = None

            def go():
                try:
                    if args[0] == ["crash"]:
                        raise RuntimeError("worker died\nmore detail")
                    self.value = fn(*args)
                except Exception as e:  # noqa: BLE001 - handed to get()
                    self.error = e
                self.done.set()

            threading.Thread(target=go, daemon=True).start()

    def __init__(self):
        self.cancelled = []

    def remote(self, fn):
        ray = self

        class Task:
            def options(self, **_):
                return self

            def remote(self, *args):
                return ray.Ref(fn, args)

        return Task()

    def get(self, ref):
        ref.done.wait(30)
        if ref.error:
            raise ref.error
        return ref.value

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)

    def shutdown(self):
        self.shut = True


class Serve(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name
        for name in ("s.json", "t.json"):
            with open(os.path.join(self.d, name), "w") as f:
                f.write("{}")
        self.answers = io.StringIO()
        self.ray = FakeRay()
        self.server = emend_ray.Server(self.ray, self.answers)

    def tearDown(self):
        self.dir.cleanup()

    def req(self, rid, argv, tasks="t.json"):
        p = lambda n: os.path.join(self.d, n)  # noqa: E731
        return {"id": rid, "strategy": p("s.json"), "tasks": p(tasks), "out": p(f"o{rid}"), "stderr": p(f"e{rid}"),
                "timeout": 10, "workdir": None, "env": {}, "argv": argv}

    def read(self, name):
        with open(os.path.join(self.d, name)) as f:
            return f.read()

    def answered(self, n):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lines = [json.loads(x) for x in self.answers.getvalue().splitlines()]
            if len(lines) >= n:
                return {a["id"]: a for a in lines}
            time.sleep(0.01)
        self.fail(f"fewer than {n} answers: {self.answers.getvalue()!r}")

    def test_each_request_gets_one_answer_with_its_files(self):
        self.server.request(self.req(1, ["sh", "-c", 'echo ok > "$0"', "{out}"]))
        self.server.request(self.req(2, ["sh", "-c", "echo bad >&2; exit 4"]))
        self.server.request(self.req(3, ["crash"]))
        self.server.request(self.req(4, ["true"], tasks="missing.json"))
        got = self.answered(4)
        self.assertEqual(got[1], {"id": 1, "exit": 0})
        self.assertEqual(self.read("o1"), "ok\n")
        self.assertEqual(got[2], {"id": 2, "exit": 4})
        self.assertEqual(self.read("e2"), "bad\n")
        self.assertEqual(got[3], {"id": 3, "exit": emend_ray.EXIT_TASK_LOST})
        self.assertEqual(self.read("e3"),
                         "emend-ray: the Ray task failed: RuntimeError: worker died\n")
        self.assertEqual(got[4], {"id": 4, "exit": emend_ray.EXIT_USAGE})
        self.assertIn("missing.json", self.read("e4"))
        self.assertEqual(self.server.refs, {})

    def test_a_cancelled_request_is_not_answered(self):
        self.server.request(self.req(1, ["sh", "-c", "sleep 0.5"]))
        self.server.cancel(1)
        self.server.request(self.req(2, ["true"]))
        self.assertEqual(list(self.answered(1)), [2])
        time.sleep(1)
        self.assertEqual(list(self.answered(1)), [2], "no answer for the cancelled request")
        self.assertEqual(len(self.ray.cancelled), 1)


class ServeLoop(unittest.TestCase):
    """`serve` itself: answers on the real standard output, a bad request
    line named by its number, and at the end of input what still runs is
    cancelled and the driver disconnects."""

    def run_serve(self, lines):
        ray = FakeRay()
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryFile("w+") as stdin, \
                tempfile.TemporaryFile("w+") as out:
            for name in ("s.json", "t.json"):
                with open(os.path.join(d, name), "w") as f:
                    f.write("{}")
            stdin.write("".join(line.replace("$D", d) + "\n" for line in lines))
            stdin.seek(0)
            saved_out, saved_in, saved_err, saved_connect = os.dup(1), sys.stdin, sys.stderr, emend_ray.connect
            os.dup2(out.fileno(), 1)
            sys.stdin, sys.stderr, emend_ray.connect = stdin, io.StringIO(), lambda _address: ray
            try:
                code = emend_ray.serve(type("Args", (), {"address": "fake"})())
            finally:
                sys.stdout.flush()
                os.dup2(saved_out, 1)
                os.close(saved_out)
                said = sys.stderr.getvalue()
                sys.stdin, sys.stderr, emend_ray.connect = saved_in, saved_err, saved_connect
            time.sleep(0.8)  # the cancelled tasks end; their answers are dropped
            out.seek(0)
            return code, out.read(), said, ray

    def request(self, rid, argv):
        return json.dumps({"id": rid, "strategy": "$D/s.json", "tasks": "$D/t.json", "out": f"$D/o{rid}",
                           "stderr": f"$D/e{rid}", "timeout": 10, "workdir": None, "env": {}, "argv": argv})

    def test_the_end_of_input_cancels_what_still_runs_and_disconnects(self):
        code, out, said, ray = self.run_serve([self.request(1, ["sh", "-c", "sleep 0.5"]), ""])
        self.assertEqual((code, out, said), (0, "", ""))
        self.assertEqual(len(ray.cancelled), 1)
        self.assertTrue(getattr(ray, "shut", False))

    def test_a_request_that_is_not_json_is_named_by_its_line(self):
        code, out, said, ray = self.run_serve([self.request(1, ["sh", "-c", "sleep 0.5"]), "{not json"])
        self.assertEqual(code, emend_ray.EXIT_USAGE)
        self.assertTrue(said.startswith("emend-ray: request line 2: JSONDecodeError"), said)
        self.assertEqual(len(ray.cancelled), 1, "what was running is cancelled")
        self.assertEqual(out, "")


if __name__ == "__main__":
    unittest.main()
