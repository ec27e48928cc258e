"""How long a `list` waits while greps with a slow-engine regex run (issue 16,
item 3): its latency alone and beside the greps, for one `tether mcp` server.

    python3 grep_stall.py SERVER [--rounds N] [--mb M]

A session prints M MB (default 64) of words with non-ASCII letters; each round
sends G `read {"grep": "\\b\\w{20}\\b"}` calls (a Unicode word boundary over
non-ASCII text needs the regex crate's slow engine), waits 0.3 s, then times a
`list` call from send to answer, then waits for the greps' answers. Cases: one
tokio worker and one grep (TOKIO_WORKER_THREADS=1), and the default workers
with two greps. The baseline is the same server's `list` with nothing else
running, measured in the same run. A server that knows `--grep-time-s` gets 3
(its greps return partial results after 3 s); an older one greps to the end.

Prints a markdown table of medians in ms and the ratio beside/alone.
"""

import json
import os
import select
import statistics
import subprocess
import sys
import time

REGEX = r"\b\w{20}\b"


class Server:
    def __init__(self, command, workers=None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "TETHER_LOG": "error",
        }
        if workers:
            env["TOKIO_WORKER_THREADS"] = str(workers)
        args = [command]
        help_text = subprocess.run([command, "--help"], capture_output=True, text=True).stdout
        if "--grep-time-s" in help_text:
            args += ["--grep-time-s", "3"]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
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
            ready, _, _ = select.select([fd], [], [], 600)
            if not ready:
                raise TimeoutError("no answer in 600 s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("the server closed stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send_call(self, name, arguments):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        return self.next_id

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            answer = self.recv()
            if answer.get("id") == self.next_id:
                return answer

    def tool(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})["result"]["structuredContent"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(60)


def timed_list(server):
    """Sends `list`; returns (ms to its answer, the other answers that came first)."""
    started = time.monotonic()
    rid = server.send_call("list", {})
    others = []
    while True:
        answer = server.recv()
        if answer.get("id") == rid:
            return (time.monotonic() - started) * 1000, others
        others.append(answer)


def measure(command, workers, greps, rounds, mb):
    server = Server(command, workers)
    script = (
        "import sys\n"
        "line = ('überprüfung ärger öl straße ' * 3 + '\\n').encode()\n"
        f"sys.stdout.buffer.write(line * ({mb} * (1 << 20) // len(line)))\n"
    )
    sid = server.tool("run", {"argv": ["python3", "-c", script], "yield_s": 50})["id"]
    alone, beside = [], []
    for _ in range(rounds):
        alone.append(timed_list(server)[0])
        ids = [server.send_call("read", {"id": sid, "grep": REGEX}) for _ in range(greps)]
        time.sleep(0.3)
        ms, answered = timed_list(server)
        beside.append(ms)
        pending = set(ids) - {a.get("id") for a in answered}
        while pending:
            pending.discard(server.recv().get("id"))
    server.close()
    return statistics.median(alone), statistics.median(beside)


def main():
    command = sys.argv[1]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    mb = int(sys.argv[sys.argv.index("--mb") + 1]) if "--mb" in sys.argv else 64
    print(f"server: {command}; {mb} MB of output, grep {REGEX!r}, median of {rounds} rounds\n")
    print("| case | `list` alone | `list` beside the greps | ratio |")
    print("|---|---|---|---|")
    for label, workers, greps in [("1 tokio worker, 1 grep", 1, 1), ("default workers, 2 greps", None, 2)]:
        alone, beside = measure(command, workers, greps, rounds, mb)
        print(f"| {label} | {alone:.1f} ms | {beside:.1f} ms | **{beside / alone:.0f}×** |", flush=True)


if __name__ == "__main__":
    main()
