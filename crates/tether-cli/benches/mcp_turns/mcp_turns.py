"""Latency of the agent workflows of issue 12, for two `tether mcp` servers
measured in the same run, interleaved: this build and a previous release.

    python3 mcp_turns.py NEW_SERVER BASELINE_SERVER [--rounds N]

Each server runs as its own process over a raw stdio JSON-RPC pipe (no SDK: the
client's own overhead stays out of the figures). Cases, each as an agent of
that server's release would do it:

- `echo hi`: one `run` call, send to answer.
- REPL turn: `write {"data": "1+1", "submit": true}` to `python3 -i -q`, send to
  answer (checked to hold "2"). The previous release returns after `yield_s`
  (default 1 s); this one when output went quiet (0.2 s), or, with `until` the
  prompt, at the prompt.
- readiness: `python3 -m http.server 0` from the `run` call to the answer that
  holds the ready line. Previous release: `run` with `yield_s` 0.5 (its
  documented way: the line shows in that output); this one: `run … until`.

Prints a table of medians (and p90) in ms and the ratio new/baseline.

Then memory under load (issue 8): 20,000 `list` calls pipelined on one line
burst to a server holding 60 live sessions; the server's peak RSS (VmHWM) and
its RSS once every answer is in and one more call was answered.
"""

import json
import os
import select
import statistics
import subprocess
import sys
import time


class Server:
    def __init__(self, command):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "TETHER_LOG": "error",
        }
        self.proc = subprocess.Popen(
            [command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.next_id = 0
        self.buffer = b""
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], 120)
            if not ready:
                raise TimeoutError("no answer")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("server closed stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            answer = self.recv()
            if answer.get("id") == rid:
                return answer

    def tool(self, name, arguments):
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        result = answer["result"]
        body = result.get("structuredContent")
        if body is None:
            body = json.loads(result["content"][0]["text"])
        return body

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def echo_hi(server, new):
    ms, body = timed(lambda: server.tool("run", {"command": "echo hi"}))
    assert body["output"] == "hi\n", body
    return ms


class Repl:
    """One python3 -i session per server, reused for every turn."""

    def __init__(self, server):
        body = server.tool("run", {"command": "python3 -i -q", "keep_stdin_open": True, "yield_s": 5})
        self.id = body["id"]
        out = body["output"]
        while ">>> " not in out:
            out += server.tool("wait", {"id": self.id, "timeout_s": 5, "until": ">>> "})["output"]


def repl_turn(server, repl, args):
    ms, body = timed(lambda: server.tool("write", {"id": repl.id, "data": "1+1", "submit": True, **args}))
    out = body["output"]
    while "2" not in out:  # the answer arrived after the call returned: keep reading
        extra = server.tool("wait", {"id": repl.id, "timeout_s": 5, "until": ">>> "})
        ms += 0  # not counted: an agent would only learn it on its next call
        out += extra["output"]
        raise AssertionError(f"turn returned without the answer: {body}")
    return ms


READY = r"Serving HTTP on \S+ port \d+"


def readiness(server, new):
    command = "exec python3 -u -m http.server 0"
    if new:
        ms, body = timed(lambda: server.tool("run", {"command": command, "until": READY, "yield_s": 30}))
        assert body["matched"], body
    else:
        ms, body = timed(lambda: server.tool("run", {"command": command, "yield_s": 0.5}))
        assert "Serving HTTP" in body["output"], body
    server.tool("kill", {"id": body["id"], "grace_s": 0})
    return ms


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memory(command, calls=20_000, sessions=60):
    """RSS before, at the peak and after `calls` pipelined list calls (KiB)."""
    import threading

    server = Server(command)
    for _ in range(sessions):
        server.tool("run", {"command": "exec sleep 1000", "yield_s": 0})
    pid = server.proc.pid
    before = status_kib(pid, "VmRSS")
    lines = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list","arguments":{}}}\n'
        % (1_000_000 + i)
        for i in range(calls)
    )
    writer = threading.Thread(target=lambda: (server.proc.stdin.write(lines), server.proc.stdin.flush()))
    started = time.perf_counter()
    writer.start()
    answered = 0
    while answered < calls:
        if server.recv().get("id", 0) >= 1_000_000:
            answered += 1
    took = time.perf_counter() - started
    writer.join()
    peak = status_kib(pid, "VmHWM")
    server.tool("list", {})
    after = status_kib(pid, "VmRSS")
    server.close()
    return before, peak, after, took


def summary(samples):
    samples = sorted(samples)
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    return statistics.median(samples), p90


def main():
    new_cmd, base_cmd = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 15
    new, base = Server(new_cmd), Server(base_cmd)
    repls = {id(new): Repl(new), id(base): Repl(base)}
    cases = [
        ("`echo hi` (run)", lambda s, is_new: echo_hi(s, is_new), lambda s, is_new: echo_hi(s, is_new)),
        (
            "REPL turn `1+1` (write, defaults)",
            lambda s, is_new: repl_turn(s, repls[id(s)], {}),
            lambda s, is_new: repl_turn(s, repls[id(s)], {}),
        ),
        (
            "REPL turn `1+1` (write until the prompt)",
            lambda s, is_new: repl_turn(s, repls[id(s)], {"until": ">>> $"}),
            None,
        ),
        ("`python3 -m http.server 0` readiness", readiness, readiness),
    ]
    # Warm up both (keeper start, python import caches).
    for _ in range(3):
        echo_hi(new, True)
        echo_hi(base, False)
    rows = []
    for name, new_case, base_case in cases:
        new_ms, base_ms = [], []
        for _ in range(rounds):
            new_ms.append(new_case(new, True))
            if base_case is not None:
                base_ms.append(base_case(base, False))
        rows.append((name, summary(new_ms), summary(base_ms) if base_ms else None))
    new.close()
    base.close()
    print(f"{'case':44} {'new p50':>9} {'new p90':>9} {'base p50':>9} {'base p90':>9} {'ratio':>7}")
    for name, (n50, n90), b in rows:
        if b is None:
            print(f"{name:44} {n50:9.1f} {n90:9.1f} {'—':>9} {'—':>9} {'—':>7}")
        else:
            b50, b90 = b
            print(f"{name:44} {n50:9.1f} {n90:9.1f} {b50:9.1f} {b90:9.1f} {n50 / b50:7.2f}")
    print(f"({rounds} rounds each, interleaved; ms; ratio = new p50 / baseline p50)")
    if "--no-memory" not in sys.argv:
        print()
        print(f"{'20,000 pipelined list calls, 60 live sessions':44} {'before':>9} {'peak':>9} {'after':>9} {'wall s':>7}")
        for label, command in (("new", new_cmd), ("baseline", base_cmd)):
            before, peak, after, took = memory(command)
            print(f"{label:44} {before / 1024:7.1f}MB {peak / 1024:7.1f}MB {after / 1024:7.1f}MB {took:7.1f}")


if __name__ == "__main__":
    main()
