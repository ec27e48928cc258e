"""Size and start-up of two `tether` binaries (issue 17): `--version` and
`run -- /bin/true`, interleaved run by run so machine noise hits both
alike; wall and CPU (user + sys of the whole tree: keeper and command
included) medians. Run through benches/startup.rs, or by hand:
python3 startup.py BEFORE AFTER [N]"""
import os, resource, statistics, subprocess, sys, tempfile, time
before, after = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
env = dict(os.environ, TETHER_HOME=tempfile.mkdtemp())
cases = [["--version"], ["run", "--", "/bin/true"]]
def once(argv):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall * 1000, cpu * 1000
print("| binary | before bytes | after bytes | ratio |")
print("|---|---|---|---|")
bs, as_ = os.path.getsize(before), os.path.getsize(after)
print(f"| `tether` | {bs:,} | {as_:,} | {as_/bs:.2f} |")
print()
print("| command | before wall ms | after wall ms | ratio | before CPU ms | after CPU ms | ratio |")
print("|---|---|---|---|---|---|---|")
for case in cases:
    for b in (before, after):
        for _ in range(10): once([b] + case)
    res = {before: [], after: []}
    for i in range(n):
        order = (before, after) if i % 2 == 0 else (after, before)
        for b in order: res[b].append(once([b] + case))
    med = lambda b, k: statistics.median(x[k] for x in res[b])
    bw, aw, bc, ac = med(before, 0), med(after, 0), med(before, 1), med(after, 1)
    print(f"| `tether {' '.join(case)}` | {bw:.2f} | {aw:.2f} | {aw/bw:.2f} | {bc:.2f} | {ac:.2f} | {ac/bc:.2f} |")
