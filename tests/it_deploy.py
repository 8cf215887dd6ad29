"""it_deploy: renders deploy/overlays/{cpu,gpu} and deploy/kserve with
`kubectl kustomize` and checks what the cluster would run: every object
against the Kubernetes API schemas (npm's kubernetes-models, installed into
tests/k8s_schema by scripts/install_deps.sh; skipped with one line when it is
not there), every selector (Deployment, Service, PodDisruptionBudget,
NetworkPolicy, and the ServiceMonitor through the Service it picks) against the
pod template's labels, gRPC probes on the grpc.health.v1 port 8500 with
liveness and readiness asking different services, and each of those services
answered by a running daemon as the probe needs (liveness SERVING and
readiness NOT_SERVING beside a broken model); the Service ports, the GPU
request only in the GPU overlay, the container security settings, the
drain/grace ordering, and that the ConfigMap's model config passes
`dcmserve serve --check_config` (with /models pointed at this repository's
models/ folder). `it_deploy.py --selftest` shows that a removed selector
fails the checks."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(__file__), ".."))
DCMSERVE = os.environ.get("DCMSERVE", "")
KUBECTL = shutil.which("kubectl")


VALIDATE = os.path.join(SRC, "tests", "k8s_schema", "validate.mjs")
NODE_MODULES = os.path.join(SRC, "tests", "k8s_schema", "node_modules")


def render(path):
    out = subprocess.run([KUBECTL, "kustomize", os.path.join(SRC, "deploy", path)],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    by = {}
    for d in docs:
        by[(d["kind"], d["metadata"]["name"])] = d
    return by


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def schema_validate(name, objs):
    """Each object against its API schema; KServe's CRDs have no schema
    package, so their required fields are checked by check_kserve."""
    if not (shutil.which("node") and os.path.isdir(NODE_MODULES)):
        print(f"{name}: SKIP schema validation: no node or {NODE_MODULES} "
              "(scripts/install_deps.sh installs it)")
        return
    # kubernetes-models 5 asks for node >= 22 (it runs on 20); on an older node
    # that cannot load it, say so and skip rather than fail on the tool.
    probe = subprocess.run(["node", "--input-type=module", "-e",
                            'await import("kubernetes-models/v1/ConfigMap")'],
                           cwd=os.path.dirname(VALIDATE), capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        why = [ln for ln in probe.stderr.splitlines() if "Error" in ln][:1] or ["?"]
        print(f"{name}: SKIP schema validation: this node cannot load kubernetes-models: {why[0]}")
        return
    todo = [o for o in objs.values() if not o["apiVersion"].startswith("serving.kserve.io/")]
    r = subprocess.run(["node", VALIDATE], input=json.dumps(todo), capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0, f"{name}: schema validation failed:\n{r.stdout}{r.stderr}")
    print(f"{name}: {len(todo)} objects valid against the Kubernetes API schemas")


def matches(selector, labels, what):
    """A label selector ({"matchLabels": ...} or a Service's plain map)
    must be non-empty and select `labels`."""
    check(isinstance(selector, dict) and selector, f"{what}: no selector ({selector!r})")
    ml = selector.get("matchLabels", selector) if "matchExpressions" not in selector else None
    check(ml is not None, f"{what}: matchExpressions are not checked here; use matchLabels")
    check(ml and all(labels.get(k) == v for k, v in ml.items()),
          f"{what}: selector {ml} does not select the pod labels {labels}")


def check_selectors(name, objs):
    dep = objs[("Deployment", "dcmserve")]
    labels = dep["spec"]["template"].get("metadata", {}).get("labels", {})
    check(labels, f"{name}: the pod template has no labels")
    matches(dep["spec"].get("selector"), labels, f"{name}: Deployment")
    services = {n: o for (k, n), o in objs.items() if k == "Service"}
    for n, svc in services.items():
        matches(svc["spec"].get("selector"), labels, f"{name}: Service {n}")
    for (k, n), o in objs.items():
        if k == "PodDisruptionBudget":
            matches(o["spec"].get("selector"), labels, f"{name}: PodDisruptionBudget {n}")
        elif k == "NetworkPolicy":
            matches(o["spec"].get("podSelector"), labels, f"{name}: NetworkPolicy {n}")
        elif k == "ServiceMonitor":
            # It selects Services; one of them must have each endpoint's port
            # (and select the pods, checked above).
            sel = o["spec"].get("selector")
            picked = []
            for sn, svc in services.items():
                try:
                    matches(sel, svc["metadata"].get("labels", {}), "")
                    picked.append(svc)
                except Fail:
                    pass
            check(picked, f"{name}: ServiceMonitor {n} selector {sel} picks no Service")
            for ep in o["spec"]["endpoints"]:
                check(any(ep["port"] in [p.get("name") for p in svc["spec"]["ports"]]
                          for svc in picked),
                      f"{name}: ServiceMonitor {n}: no picked Service has port {ep['port']}")
        elif k == "HorizontalPodAutoscaler":
            ref = o["spec"]["scaleTargetRef"]
            check((ref["kind"], ref["name"]) in objs, f"{name}: HPA {n} targets {ref}")


def probe_services(name, c):
    """The grpc.health.v1 service each probe asks for."""
    svc = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        check(p is not None and p.get("grpc", {}).get("port") == 8500,
              f"{name}: {probe} must be a gRPC (grpc.health.v1) probe on 8500, got {p}")
        svc[probe] = p["grpc"].get("service", "")
    check(svc["livenessProbe"] != svc["readinessProbe"],
          f"{name}: liveness and readiness both ask grpc.health service "
          f"{svc['livenessProbe']!r}: a broken model would restart healthy pods")
    check(svc["startupProbe"] == svc["livenessProbe"],
          f"{name}: the startup probe asks {svc['startupProbe']!r}, not the liveness "
          f"{svc['livenessProbe']!r}: a broken model would restart the pod after start-up")
    return svc


def check_overlay(name, gpu, objs):
    check_selectors(name, objs)
    dep = objs[("Deployment", "dcmserve")]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    probe_services(name, c)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports == {"grpc": 8500, "http": 8501}, f"{name}: container ports {ports}")
    check("--port=8500" in c["args"], f"{name}: args {c['args']} lack --port=8500")
    for svc in ("dcmserve", "dcmserve-headless"):
        s = objs[("Service", svc)]
        check(8500 in [p["port"] for p in s["spec"]["ports"]], f"{name}: Service {svc} lacks 8500")
    check(objs[("Service", "dcmserve-headless")]["spec"].get("clusterIP") == "None",
          f"{name}: headless Service is not headless")
    check(8501 in [p["port"] for p in objs[("Service", "dcmserve")]["spec"]["ports"]],
          f"{name}: Service lacks 8501")
    for kind in ("HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy",
                 "ServiceMonitor", "ConfigMap", "PersistentVolumeClaim"):
        check(any(k == kind for k, _ in objs), f"{name}: no {kind}")
    # security
    psc, csc = pod["securityContext"], c["securityContext"]
    check(psc.get("runAsNonRoot") is True, f"{name}: pod runAsNonRoot")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{name}: seccomp")
    check(csc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem")
    check(csc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation")
    check(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}: drop ALL")
    # drain: grace > drain timeout + preStop sleep
    drain = [float(a.split("=", 1)[1]) for a in c["args"]
             if a.startswith("--drain_timeout_seconds=")]
    check(len(drain) == 1, f"{name}: no --drain_timeout_seconds in args")
    pre = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    check(pod["terminationGracePeriodSeconds"] > drain[0] + pre,
          f"{name}: grace {pod['terminationGracePeriodSeconds']} <= drain {drain[0]} + preStop {pre}")
    # GPU request only in the GPU overlay
    req = c["resources"].get("requests", {})
    lim = c["resources"].get("limits", {})
    if gpu:
        check(str(req.get("nvidia.com/gpu")) == "1" and str(lim.get("nvidia.com/gpu")) == "1",
              f"{name}: nvidia.com/gpu: 1 missing, resources {c['resources']}")
    else:
        check("nvidia.com/gpu" not in req and "nvidia.com/gpu" not in lim,
              f"{name}: CPU overlay asks for a GPU")
    # model config from the ConfigMap, validated by the daemon itself
    cm = objs[("ConfigMap", "dcmserve-models")]["data"]["models.config"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    check("/models" in mounts and "/etc/dcmserve" in mounts, f"{name}: mounts {mounts}")
    cfg_arg = [a for a in c["args"] if a.startswith("--model_config_file=")]
    check(cfg_arg == ["--model_config_file=/etc/dcmserve/models.config"],
          f"{name}: --model_config_file arg {cfg_arg}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "models.config")
        with open(path, "w") as f:
            f.write(cm.replace('"/models/', '"' + os.path.join(os.path.abspath(SRC), "models") + "/"))
        r = subprocess.run([DCMSERVE, "serve", "--model_config_file=" + path, "--check_config"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"{name}: --check_config rejected the ConfigMap: {r.stderr}")
        # and the check can fail: a base path that does not exist
        with open(path, "w") as f:
            f.write(cm)
        r = subprocess.run([DCMSERVE, "serve", "--model_config_file=" + path, "--check_config"],
                           capture_output=True, text=True, timeout=60)
        if not os.path.isdir("/models/demo_ct"):
            check(r.returncode == 1 and "/models/demo_ct" in r.stderr,
                  f"{name}: --check_config accepted a missing base path: {r.returncode} {r.stderr}")
    print(f"{name}: ok ({len(objs)} objects)")


def check_kserve(objs):
    """KServe's CRDs: the fields its API requires and the ones we rely on."""
    kinds = sorted(k for k, _ in objs)
    check(kinds == ["InferenceService", "ServingRuntime"], f"kserve: objects {kinds}")
    rt = objs[("ServingRuntime", "dcmserve")]
    check(rt["apiVersion"] == "serving.kserve.io/v1alpha1", "ServingRuntime apiVersion")
    check(rt["spec"]["protocolVersions"] == ["grpc-v2"], "ServingRuntime protocol")
    check(rt["spec"]["supportedModelFormats"] and
          all("name" in f for f in rt["spec"]["supportedModelFormats"]),
          "ServingRuntime supportedModelFormats")
    (c,) = rt["spec"]["containers"]
    check(c.get("name") and c.get("image"), "ServingRuntime container name/image")
    check(c["ports"][0]["containerPort"] == 8500, "ServingRuntime port")
    (isvc,) = [o for (k, _), o in objs.items() if k == "InferenceService"]
    model = isvc["spec"]["predictor"]["model"]
    check(isvc["apiVersion"] == "serving.kserve.io/v1beta1", "InferenceService apiVersion")
    check(model["protocolVersion"] == "grpc-v2", "InferenceService protocol")
    check(model["runtime"] == rt["metadata"]["name"], "InferenceService runtime")
    check(model["modelFormat"]["name"] in [f["name"] for f in rt["spec"]["supportedModelFormats"]],
          "InferenceService modelFormat is not one the runtime supports")
    check(model.get("storageUri"), "InferenceService storageUri")


def health(port, service):
    r = subprocess.run([DCMSERVE, "health", f"--port={port}", f"--service={service}",
                        "--timeout_ms=5000"], capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def check_probe_answers(svc):
    """The services the probes ask, answered by a daemon with one good and
    one empty model folder: liveness SERVING, readiness NOT_SERVING."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import serve_client
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "empty"))
        cfg = os.path.join(d, "models.config")
        demo = os.path.join(os.path.abspath(SRC), "models", "demo_ct")
        with open(cfg, "w") as f:
            f.write('model_config_list { config { name: "demo_ct" base_path: "%s" '
                    'model_platform: "tensorflow" } config { name: "empty" base_path: "%s" '
                    'model_platform: "tensorflow" } }' % (demo, os.path.join(d, "empty")))
        port = serve_client.free_port()
        p = subprocess.Popen([DCMSERVE, "serve", f"--port={port}", "--rest_api_port=0",
                              f"--model_config_file={cfg}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            live = None
            for _ in range(200):
                live = health(port, svc["livenessProbe"])
                if live == "SERVING":
                    break
                time.sleep(0.1)
            check(live == "SERVING", f"liveness service {svc['livenessProbe']!r}: {live!r}")
            # demo_ct loads; the empty folder never does: readiness stays down.
            for _ in range(200):
                if health(port, "demo_ct") == "SERVING":
                    break
                time.sleep(0.1)
            check(health(port, "demo_ct") == "SERVING", "demo_ct never became AVAILABLE")
            ready = health(port, svc["readinessProbe"])
            check(ready == "NOT_SERVING",
                  f"readiness service {svc['readinessProbe']!r} beside an empty model: {ready!r}")
            check(health(port, svc["livenessProbe"]) == "SERVING",
                  "liveness went down beside an empty model")
        finally:
            p.terminate()
            p.wait(timeout=60)
    print(f"probes: liveness {svc['livenessProbe']!r} SERVING, readiness "
          f"{svc['readinessProbe']!r} NOT_SERVING beside an empty model folder")


def selftest():
    """Each removed selector, and liveness asking what readiness asks, must
    fail the checks."""
    base = render("overlays/cpu")
    cases = [
        ("PodDisruptionBudget", "dcmserve", ["spec", "selector"]),
        ("NetworkPolicy", "dcmserve", ["spec", "podSelector"]),
        ("ServiceMonitor", "dcmserve", ["spec", "selector"]),
        ("Service", "dcmserve", ["spec", "selector"]),
        ("Service", "dcmserve-headless", ["spec", "selector"]),
        ("Deployment", "dcmserve", ["spec", "selector"]),
    ]
    for kind, n, path in cases:
        objs = copy.deepcopy(base)
        o = objs[(kind, n)]
        for k in path[:-1]:
            o = o[k]
        del o[path[-1]]
        try:
            check_selectors("selftest", objs)
        except Fail as e:
            print(f"selftest: without {kind} {n} {'.'.join(path)}: fails: {e}")
            continue
        print(f"FAIL: selftest: removing {kind} {n} {'.'.join(path)} passed the checks")
        return 1
    objs = copy.deepcopy(base)
    (c,) = objs[("Deployment", "dcmserve")]["spec"]["template"]["spec"]["containers"]
    c["livenessProbe"]["grpc"]["service"] = c["readinessProbe"]["grpc"].get("service", "")
    try:
        probe_services("selftest", c)
        print("FAIL: selftest: liveness asking readiness's service passed")
        return 1
    except Fail as e:
        print(f"selftest: liveness = readiness: fails: {e}")
    return 0


def main():
    if KUBECTL is None:
        print("SKIP: kubectl not found (Debian package kubernetes-client)")
        return 77
    try:
        if "--selftest" in sys.argv:
            return selftest()
        check(os.path.exists(DCMSERVE), f"DCMSERVE={DCMSERVE!r} is not a file")
        svc = None
        for name, gpu in (("cpu", False), ("gpu", True)):
            objs = render("overlays/" + name)
            schema_validate(name, objs)
            check_overlay(name, gpu, objs)
            (c,) = objs[("Deployment", "dcmserve")]["spec"]["template"]["spec"]["containers"]
            svc = probe_services(name, c)
        kserve = render("kserve")
        check_kserve(kserve)
        print("kserve: ok")
        check_probe_answers(svc)
        # the selector checks themselves can fail
        check(selftest() == 0, "selftest")
    except Fail as e:
        print("FAIL:", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
