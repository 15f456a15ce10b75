#!/usr/bin/env python3
"""emend's Ray executor: runs one evaluation shard as a Ray task.

emend (``harness.executor: ray`` in emend.yaml) starts this driver once per
shard attempt, instead of the shard command itself:

    python3 -m emend_ray shard --strategy S --tasks T --out O --timeout SECS \
        [--workdir DIR] [--env KEY=VALUE ...] [--address ADDR] -- ARGV...

ARGV is the configured command with its ``{strategy}``, ``{tasks}`` and
``{out}`` placeholders still in place. The driver reads the strategy and the
task shard, submits one Ray task carrying their bytes (no shared filesystem is
assumed), and the task, on whichever worker Ray picks, writes them to a fresh
temporary directory, runs ARGV there with the placeholders replaced, kills it
after SECS, and returns its exit status, the tail of its stderr and the
outcomes file. The driver then behaves like the command did locally: it
writes the outcomes to O (only when the command exited 0 and wrote them),
copies the stderr tail to its own stderr and exits with the command's
status, or kills itself with the command's signal. So emend's rules for local
shards (retry once after a failure, validate every outcome line) apply
unchanged. Ray itself never retries the task (``max_retries=0``): a worker
that dies mid-shard fails the attempt (exit 75) and emend retries it once.

``python3 -m emend_ray check [--address ADDR]`` connects and prints the
cluster's resources.

The cluster address comes from ``--address`` or ``RAY_ADDRESS``; without one
the driver refuses to start a private local cluster (exit 2).

Run as a module or a script, this file's task function is pickled by value,
so Ray workers need Ray and the shard command's own dependencies, not this
package.
"""

import argparse
import os
import signal
import sys

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
            timed_out = False
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
                timed_out = True
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


def shard(args):
    try:
        with open(args.strategy, "rb") as f:
            strategy = f.read()
        with open(args.tasks, "rb") as f:
            tasks = f.read()
    except OSError as e:
        print(f"emend-ray: {e}", file=sys.stderr)
        return EXIT_USAGE
    env = {}
    for kv in args.env:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print(f"emend-ray: --env {kv!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_USAGE
        env[k] = v
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print("emend-ray: no command after --", file=sys.stderr)
        return EXIT_USAGE
    ray = connect(args.address)
    task = ray.remote(run_shard).options(max_retries=0, num_cpus=1, name="emend-shard")
    ref = task.remote(argv, args.workdir, env, args.timeout, strategy, tasks)
    try:
        r = ray.get(ref)
    except Exception as e:  # WorkerCrashedError, RayTaskError, node failures: the attempt failed
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"emend-ray: the Ray task failed: {type(e).__name__}: {first}", file=sys.stderr)
        return EXIT_TASK_LOST
    if "spawn_error" in r:
        print(f"emend-ray: {r['spawn_error']}", file=sys.stderr)
        return EXIT_SPAWN
    sys.stderr.buffer.write(r["stderr"])
    sys.stderr.flush()
    if r["timed_out"]:
        print(f"emend-ray: timed out after {args.timeout} s on the Ray worker (killed)", file=sys.stderr)
        return EXIT_TIMEOUT
    rc = r["returncode"]
    if rc == 0:
        if r["out"] is not None:
            tmp = args.out + ".part"
            with open(tmp, "wb") as f:
                f.write(r["out"])
            os.replace(tmp, args.out)
        return 0
    if rc < 0:
        # Killed by a signal on the worker: end the same way, so emend reports the signal.
        ray.shutdown()
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


def check(args):
    ray = connect(args.address)
    print(f"ray {ray.__version__}; cluster resources: {ray.cluster_resources()}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="emend-ray", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shard", help="run one shard attempt as a Ray task")
    s.add_argument("--strategy", required=True)
    s.add_argument("--tasks", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--timeout", type=float, required=True)
    s.add_argument("--workdir", default=None, help="working directory on the worker (default: a temporary one)")
    s.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--address", default=None)
    s.add_argument("argv", nargs=argparse.REMAINDER)
    c = sub.add_parser("check", help="connect and print the cluster's resources")
    c.add_argument("--address", default=None)
    args = p.parse_args(argv)
    return shard(args) if args.cmd == "shard" else check(args)


if __name__ == "__main__":
    sys.exit(main())
