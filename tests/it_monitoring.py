"""it_monitoring: deploy/monitoring/ is right for the dcmserve it ships with.

- `promtool check rules` on the alert rules and `promtool test rules` on
  their unit tests (each alert fires on the series that should fire it);
- every PromQL expression of the Grafana dashboard parses (promtool checks
  each, its Grafana variables filled in, as a recording rule);
- every metric name the rules and the dashboard use is one that a running
  dcmserve exports on /metrics (so a renamed metric breaks this test, not a
  dashboard in production); the name check itself is shown to fail on a
  made-up name.

Skips (77) with one line when promtool (Debian package prometheus) is not
installed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, SKIP_RC, Daemon, check, free_port  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(__file__), ".."))
MON = os.path.join(SRC, "deploy", "monitoring")
RULES = os.path.join(MON, "dcmserve-rules.yaml")
RULES_TEST = os.path.join(MON, "dcmserve-rules.test.yaml")
DASHBOARD = os.path.join(MON, "dcmserve-dashboard.json")
PROMTOOL = shutil.which("promtool")
# Names that are not dcmserve's own: Prometheus' `up`.
NAME_RE = re.compile(r"(?<![\w:$])(:tensorflow:[A-Za-z0-9_:]+|dcmserve_\w+|process_\w+)")


def promtool(*args, cwd=None):
    r = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    check(r.returncode == 0, "promtool %s: rc %d\n%s%s" % (" ".join(args), r.returncode, r.stdout,
                                                         r.stderr))
    return r.stdout


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    check(len(exprs) > 10, "dashboard has only %d expressions" % len(exprs))
    return exprs


def rule_exprs():
    import yaml
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def check_dashboard_parses(exprs):
    """Each expression, Grafana's variables filled in, as a recording rule."""
    import yaml
    fill = {"$__rate_interval": "5m", "$job": "dcmserve", "$instance": ".*", "$model": ".*"}
    rules = []
    for i, e in enumerate(exprs):
        if e.startswith("label_values("):  # Grafana's own function: its argument is PromQL
            e = re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", e)
        for k, v in fill.items():
            e = e.replace(k, v)
        check("$" not in e, "unfilled Grafana variable in %r" % e)
        rules.append({"record": "dashboard:expr_%d" % i, "expr": e})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
    try:
        promtool("check", "rules", f.name)
    finally:
        os.unlink(f.name)
    print("dashboard: %d expressions parse" % len(exprs))


def exported_families():
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest])
    try:
        d.wait_health()
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % rest, timeout=30) as r:
            text = r.read().decode()
        check(d.stop() == 0, "daemon exit", d)
    finally:
        d.close()
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def unknown_names(exprs, families):
    def known(n):
        return n in families or any(n == f + s for f in families
                                    for s in ("_bucket", "_sum", "_count", "_total"))
    return sorted({n for e in exprs for n in NAME_RE.findall(e) if not known(n)})


def main():
    if PROMTOOL is None:
        print("SKIP: promtool not found (Debian package prometheus; scripts/install_deps.sh)")
        return SKIP_RC
    print(promtool("check", "rules", RULES).strip().replace("\n", "; "))
    print(promtool("test", "rules", os.path.basename(RULES_TEST), cwd=MON).strip().replace("\n", "; "))
    dexprs, rexprs = dashboard_exprs(), rule_exprs()
    check_dashboard_parses(dexprs)
    fam = exported_families()
    check(len(fam) > 20, "only %d metric families on /metrics" % len(fam))
    bad = unknown_names(dexprs + rexprs, fam)
    check(not bad, "the dashboard or the rules use metrics dcmserve does not export: %s" % bad)
    used = {n for e in dexprs + rexprs for n in NAME_RE.findall(e)}
    check(unknown_names(["rate(dcmserve_no_such_metric_total[5m])"], fam) ==
          ["dcmserve_no_such_metric_total"], "the name check does not catch a made-up name")
    print("names: the %d metric names used are all exported (%d families)" % (len(used), len(fam)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
