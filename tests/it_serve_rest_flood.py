"""it_serve_rest_flood: a valid REST call is not queued behind a flood of new
connections (issue 33, acceptance 2).

--max_connections=4000; three rounds, each opening 6,000 idle connections as
fast as one client can (past the limit, so each of the last 2,000 closes one
that waits), holding them 1 s and closing them. A probe in a process of its
own (not behind the flood's interpreter lock) calls REST :predict on a new
connection, then gRPC Predict, every 0.1 s throughout. libmicrohttpd 0.9.75 accepted one
connection per poll round of a thread, each round walking all of that
thread's connections, and each new connection past the limit walked all the
others for one to close: the probe's connection waited behind the flood's
(seconds on this loaded machine; SYNs dropped once the listen queue filled).
Asserted over the rounds, with room for the loaded machine: no probe fails
(5 s), the median probe answers within SLOW and at most 15 % of the probes
take over SLOW, and at most 15 % of the gRPC calls take over SLOW or fail,
where SLOW is 1 s or 5 times the median probe without the flood (measured
first over a round of its own), whichever is more: relative to the machine's
speed at the time, so that a loaded machine does not fail it, while a probe
queued behind the flood (seconds) still does. A measurement that misses a
bound is repeated (3 attempts at most; one must hold every bound): a CPU hog
beside the test comes and goes, the queueing behind the flood is there in
every measurement (4 of 22 probes over 1 s was seen once under two busy
loops at a load of 14).
On the binary before, at a load average of 21 to 23 on 2 cores: 5
of 18 and 6 of 10 probes over 1 s; after: 0 of 53, 0 of 60, 1 of 48.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rest_probe_split as split  # noqa: E402
from serve_client import check, free_port  # noqa: E402

FLOOD = 6000
LIMIT = 4000
ROUNDS = 3
ATTEMPTS = 3


def flood(rest):
    socks = split.conns.connect_many(rest, FLOOD)
    split.time.sleep(1)
    for s in socks:
        s.close()


def attempt(d, rest):
    """One measurement (the probe alone, then ROUNDS floods): the list of
    what failed, empty when every bound held."""
    base = split.measure(rest, lambda r: split.time.sleep(3), 1)
    res, ovf, load = split.measure(rest, flood, ROUNDS, grpc_port=d.port)
    print(split.summary("alone", 1, *base))
    print(split.summary("flood", ROUNDS, res, ovf, load))
    took = [r[1] + r[2] for r in res]
    alone = statistics.median(r[1] + r[2] for r in base[0])
    slow_s = max(1.0, 5 * alone)
    failed = [round(r[0], 2) for r in res if not r[3]]
    gslow = [round(r[4], 2) for r in res if not r[5] or r[4] > slow_s]
    slow = sum(t > slow_s for t in took)
    checks = [
        (len(res) >= ROUNDS, "the probe ran (%d probes)" % len(res)),
        (not failed, "every probe answered 200 within 5 s during the floods (failed at %s s into "
         "their round)" % failed),
        (statistics.median(took) < slow_s,
         "the median probe during %d floods of %d connections answers within %.2f s: %.2f s "
         "(alone: %.3f s; load %.1f)" % (ROUNDS, FLOOD, slow_s, statistics.median(took), alone,
                                          load)),
        (len(gslow) <= 0.15 * len(res), "gRPC Predict during the floods: at most 15 %% over "
         "%.2f s or failed: %s of %d" % (slow_s, gslow, len(res))),
        (slow <= 0.15 * len(took), "at most 15 %% of the probes during the floods take over "
         "%.2f s: %d of %d" % (slow_s, slow, len(took))),
    ]
    return [msg for ok, msg in checks if not ok]


def main():
    conns = split.use_conns()
    need = FLOOD + LIMIT + LIMIT // 4 + 500  # ours, and the daemon's (it inherits the limit)
    if not conns.raise_fd_limit(need):
        print("it_serve_rest_flood: cannot open %d descriptors; skipped" % need)
        return 77
    rest = free_port()
    d = conns.start(rest, "--max_connections=%d" % LIMIT)
    try:
        # A CPU hog beside the test slows the probes as much as the flood
        # does; it comes and goes, while the queueing behind the flood is
        # there in every measurement. So the measurement is
        # repeated, ATTEMPTS times at most, until one holds every bound.
        for k in range(ATTEMPTS):
            fails = attempt(d, rest)
            check(d.proc.poll() is None, "the daemon is alive", d)
            if not fails:
                break
            print("attempt %d of %d: %s" % (k + 1, ATTEMPTS, "; ".join(fails)))
        check(not fails, "in %d attempts: %s" % (ATTEMPTS, "; ".join(fails)), d)
    finally:
        d.close()
    print("it_serve_rest_flood: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
