"""Where a preflight step's seconds went, from the timestamps in its log: python3 phases.py a-cold-trial"""
import datetime as dt
import gzip
import json
import re
import sys

MARKS = [
    ("ray", r"Started a local Ray instance"),
    ("data", r"dataloader initialized"),
    ("actor", r"actor and ref model engine initialized"),
    ("server", r"\(vLLMHttpServer pid=\d+\) INFO"),
    ("engine", r"\(EngineCore pid=\d+\) INFO .*Initializing a V1 LLM engine"),
    ("worker", r"\(Worker pid=\d+\) INFO .*world_size="),
    ("engine_ready", r"init engine \(profile"),
    ("fit", r"all initialize finished, ready to fit"),
    ("step", r"(?:^|\s)step:1(?:\s|$)"),
]
ts1 = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
ts2 = re.compile(r"(\d\d)-(\d\d) (\d\d:\d\d:\d\d)")
def when(line):
    m = ts1.search(line)
    if m: return dt.datetime.fromisoformat(m.group(1).replace("T", " "))
    m = ts2.search(line)
    if m: return dt.datetime.fromisoformat(f"2026-{m.group(1)}-{m.group(2)} {m.group(3)}")
d = sys.argv[1]
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in gzip.open(f"{d}.log.gz", "rt", errors="replace")]
r = json.load(open(f"{d}.json"))
last = None
for l in lines:
    t = when(l)
    if t: last = t
got = {}
for name, pat in MARKS:
    for l in lines:
        if re.search(pat, l):
            t = when(l)
            if t: got[name] = t; break
            elif name == "step": got[name] = None; break
start = last - dt.timedelta(seconds=r["run"]["seconds"])
prev = start
print(d, "step", r["run"]["seconds"], "s; start", start.time(), "last stamped line", last.time())
for name, _ in MARKS:
    t = got.get(name)
    if t: print(f"  {name:13s} {t.time()} +{(t-prev).total_seconds():5.0f}"); prev = t
print(f"  {'end':13s} {last.time()} +{(last-prev).total_seconds():5.0f}")
