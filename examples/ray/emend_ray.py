#!/usr/bin/env python3
"""emend's Ray executor: runs evaluation shards as Ray tasks.

emend (``harness.executor: ray`` in emend.yaml) starts this driver once per
evaluation backend (once per ``emend evolve`` or ``emend eval``) and keeps it:

    python3 -m emend_ray serve [--address ADDR]

The driver connects to the cluster once and then reads one JSON request per
line on its standard input, one per shard attempt:

    {"id": 7, "strategy": S, "tasks": T, "out": O, "stderr": E,
     "timeout": SECS, "workdir": DIR or null, "env": {KEY: VALUE},
     "argv": [ARGV...]}

ARGV is the configured command with its ``{strategy}``, ``{tasks}`` and
``{out}`` placeholders still in place. The driver reads the strategy and the
task shard, submits one Ray task carrying their bytes (no shared filesystem is
assumed), and the task, on whichever worker Ray picks, writes them to a fresh
temporary directory, runs ARGV there with the placeholders replaced, kills it
after SECS, and returns its exit status, the tail of its stderr and the
outcomes file. The driver then writes the outcomes to O (only when the command
exited 0 and wrote them) and the stderr tail to E, and answers on its standard
output with one line, ``{"id": 7, "exit": STATUS}`` or ``{"id": 7, "signal":
N}``, exactly what the command did on the worker. So emend's rules for local
shards (retry once after a failure, validate every outcome line) apply
unchanged. Ray itself never retries the task (``max_retries=0``): a worker
that dies mid-shard fails the attempt (exit 75) and emend retries it once.
``{"cancel": 7}`` cancels request 7 (emend's own timeout, or a cancelled
evaluation); it gets no answer. At the end of its input the driver cancels
what is still running and exits 0. Attempts run concurrently; answers come in
the order they finish. Tasks of one driver share Ray worker processes, so an
attempt costs the command's own run plus Ray's scheduling and the command's
start in a worker (about 0.1 s for ``sh -c`` on a loaded 2-core machine), not
a new connection.

``python3 -m emend_ray check [--address ADDR]`` connects and prints the
cluster's resources.

The cluster address comes from ``--address`` or ``RAY_ADDRESS``; without one
the driver refuses to start a private local cluster (exit 2).

Run as a module or a script, this file's task function is pickled by value,
so Ray workers need Ray and the shard command's own dependencies, not this
package.
"""

import argparse
import json
import os
import sys
import threading
STDERR_TAIL = 4096
# Exit codes of the driver itself (the command's own codes pass through).
EXIT_USAGE = 2
EXIT_TASK_LOST = 75  # EX_TEMPFAIL: the Ray task or its worker failed
EXIT_TIMEOUT = 124  # like timeout(1)
EXIT_SPAWN = 127  # like a shell for a command it cannot start


def run_shard(argv, workdir, env, timeout, strategy, tasks):
    """Runs on a Ray worker: one attempt of one shard."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="emend-shard-") as d:
        paths = {
            "{strategy}": os.path.join(d, "strategy.json"),
            "{tasks}": os.path.join(d, "tasks.json"),
            "{out}": os.path.join(d, "out.jsonl"),
        }
        with open(paths["{strategy}"], "wb") as f:
            f.write(strategy)
        with open(paths["{tasks}"], "wb") as f:
            f.write(tasks)
        args = []
        for a in argv:
            for k, v in paths.items():
                a = a.replace(k, v)
            args.append(a)
        full_env = dict(os.environ)
        full_env.update(env)
        # The worker's own task bookkeeping must not leak into the command.
        full_env["EMEND_RAY_WORKER_PID"] = str(os.getpid())
        err_path = os.path.join(d, "stderr.log")
        cwd = workdir or d
        if not os.path.isdir(cwd):
            return {"spawn_error": f"workdir {cwd}: no such directory on the Ray worker {os.uname().nodename}"}
        with open(err_path, "wb") as err:
            try:
                p = subprocess.Popen(
                    args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
                )
            except OSError as e:
                return {"spawn_error": f"cannot start {args[0]!r} on the Ray worker: {e}"}
            # A timer kills the command at its timeout; the wait itself blocks
            # (Popen.wait with a timeout polls, up to 50 ms late).
            killed = threading.Event()

            def kill():
                killed.set()
                p.kill()

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                rc = p.wait()
            finally:
                timer.cancel()
            timed_out = killed.is_set()
        with open(err_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - STDERR_TAIL))
            tail = f.read()
        out = None
        if rc == 0 and not timed_out and os.path.exists(paths["{out}"]):
            with open(paths["{out}"], "rb") as f:
                out = f.read()
        return {"returncode": rc, "timed_out": timed_out, "stderr": tail, "out": out}


def connect(address):
    import ray

    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        print("emend-ray: no Ray cluster: set harness.ray.address in emend.yaml or RAY_ADDRESS", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if __name__ != "__main__":
        # Installed as a module (the emend-ray script): ship the task function by value all the same.
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
    return ray


def outcome(r, timeout, out_path, err):
    """What the command did, as the driver's answer; writes its outcomes and stderr tail."""
    if "spawn_error" in r:
        err.write(f"emend-ray: {r['spawn_error']}\n".encode())
        return {"exit": EXIT_SPAWN}
    err.write(r["stderr"])
    if r["timed_out"]:
        err.write(f"emend-ray: timed out after {timeout} s on the Ray worker (killed)\n".encode())
        return {"exit": EXIT_TIMEOUT}
    rc = r["returncode"]
    if rc == 0 and r["out"] is not None:
        tmp = out_path + ".part"
        with open(tmp, "wb") as f:
            f.write(r["out"])
        os.replace(tmp, out_path)
    return {"signal": -rc} if rc < 0 else {"exit": rc}


class Server:
    """The requests in flight and the one writer of answers."""

    def __init__(self, ray, answers):
        self.ray = ray
        self.task = ray.remote(run_shard).options(max_retries=0, num_cpus=1, name="emend-shard")
        self.answers = answers
        self.lock = threading.Lock()
        self.refs = {}  # request id -> its task, while emend waits for it

    def answer(self, rid, status):
        with self.lock:
            if rid not in self.refs:
                return  # cancelled meanwhile: emend no longer waits for it
            del self.refs[rid]
            self.answers.write(json.dumps({"id": rid, **status}) + "\n")
            self.answers.flush()

    def wait(self, rid, ref, req, err):
        try:
            status = outcome(self.ray.get(ref), req["timeout"], req["out"], err)
        except Exception as e:  # WorkerCrashedError, RayTaskError, TaskCancelledError, node failures
            text = str(e).strip()
            first = text.splitlines()[0] if text else type(e).__name__
            err.write(f"emend-ray: the Ray task failed: {type(e).__name__}: {first}\n".encode())
            status = {"exit": EXIT_TASK_LOST}
        finally:
            err.close()
        self.answer(rid, status)

    def request(self, req):
        rid, timeout = req["id"], float(req["timeout"])
        argv, workdir, env = list(req["argv"]), req.get("workdir"), dict(req.get("env") or {})
        with self.lock:
            self.refs[rid] = None
        with open(req["stderr"], "ab") as err:
            try:
                with open(req["strategy"], "rb") as f:
                    strategy = f.read()
                with open(req["tasks"], "rb") as f:
                    tasks = f.read()
            except OSError as e:
                err.write(f"emend-ray: {e}\n".encode())
                self.answer(rid, {"exit": EXIT_USAGE})
                return
        ref = self.task.remote(argv, workdir, env, timeout, strategy, tasks)
        with self.lock:
            if rid not in self.refs:  # cancelled before it was submitted
                self.ray.cancel(ref, force=True)
                return
            self.refs[rid] = ref
        err = open(req["stderr"], "ab")
        threading.Thread(target=self.wait, args=(rid, ref, req, err), daemon=True).start()

    def cancel(self, rid):
        with self.lock:
            ref = self.refs.pop(rid, None)
        if ref is not None:
            self.ray.cancel(ref, force=True)

    def cancel_all(self):
        with self.lock:
            refs, self.refs = list(self.refs.values()), {}
        for ref in refs:
            if ref is not None:
                self.ray.cancel(ref, force=True)


def serve(args):
    # Answers go to the real standard output; anything Ray or a library
    # prints goes to standard error instead, so it cannot break the protocol.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    ray = connect(args.address)
    server = Server(ray, answers)
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if "cancel" in req:
                server.cancel(req["cancel"])
            else:
                server.request(req)
        except (ValueError, KeyError, TypeError, OSError) as e:
            print(f"emend-ray: request line {n}: {type(e).__name__}: {e}", file=sys.stderr)
            server.cancel_all()
            return EXIT_USAGE
    server.cancel_all()
    ray.shutdown()
    return 0


def check(args):
    ray = connect(args.address)
    print(f"ray {ray.__version__}; cluster resources: {ray.cluster_resources()}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="emend-ray", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run shard attempts read from standard input as Ray tasks")
    s.add_argument("--address", default=None)
    c = sub.add_parser("check", help="connect and print the cluster's resources")
    c.add_argument("--address", default=None)
    args = p.parse_args(argv)
    return serve(args) if args.cmd == "serve" else check(args)


if __name__ == "__main__":
    sys.exit(main())
