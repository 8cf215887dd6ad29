"""it_deploy: renders deploy/overlays/{cpu,gpu} with `kubectl kustomize` and
checks what the cluster would run: gRPC probes on the grpc.health.v1 port
8500, the Service ports, the GPU request only in the GPU overlay, the
container security settings, the drain/grace ordering, and that the
ConfigMap's model config passes `dcmserve serve --check_config` (with /models
pointed at this repository's models/ folder)."""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(__file__), ".."))
DCMSERVE = os.environ.get("DCMSERVE", "")
KUBECTL = shutil.which("kubectl")


def render(overlay):
    out = subprocess.run([KUBECTL, "kustomize", os.path.join(SRC, "deploy", "overlays", overlay)],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    by = {}
    for d in docs:
        by[(d["kind"], d["metadata"]["name"])] = d
    return by


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def check_overlay(name, gpu):
    objs = render(name)
    dep = objs[("Deployment", "dcmserve")]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        check(p is not None and p.get("grpc", {}).get("port") == 8500,
              f"{name}: {probe} must be a gRPC (grpc.health.v1) probe on 8500, got {p}")
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


def main():
    if KUBECTL is None:
        print("SKIP: kubectl not found (Debian package kubernetes-client)")
        return 77
    check(os.path.exists(DCMSERVE), f"DCMSERVE={DCMSERVE!r} is not a file")
    check_overlay("cpu", gpu=False)
    check_overlay("gpu", gpu=True)
    for f in ("servingruntime.yaml", "inferenceservice.yaml"):
        with open(os.path.join(SRC, "deploy", "kserve", f)) as fh:
            doc = yaml.safe_load(fh)
        if doc["kind"] == "ServingRuntime":
            check(doc["spec"]["protocolVersions"] == ["grpc-v2"], "ServingRuntime protocol")
            check(doc["spec"]["containers"][0]["ports"][0]["containerPort"] == 8500,
                  "ServingRuntime port")
        else:
            check(doc["spec"]["predictor"]["model"]["protocolVersion"] == "grpc-v2",
                  "InferenceService protocol")
            check(doc["spec"]["predictor"]["model"]["runtime"] == "dcmserve",
                  "InferenceService runtime")
    print("kserve: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
