"""it_docs: the user-facing documents and the Dockerfile agree with the code.

- docs/configuration.md names only flags that `dcmserve serve --help` or
  `dcmserve health --help` know, and every serve flag is in it or in
  docs/serving.md;
- every repository path that README.md, docs/api.md, docs/configuration.md and
  docs/deploy.md name in backquotes exists;
- README's quick start has exactly the two set-up commands `make test` and
  `make run`, and the PORT / REST_PORT it documents reach scripts/run_demo.sh;
- the Dockerfile: the named stages, CPU ones first, the cpu stages on the
  BUILD_BASE / RUNTIME_BASE arguments (debian:12, debian:12-slim by default),
  each runtime stage from the tested install script and install_deps.sh
  runtime followed by apt-get clean, non-root, EXPOSE 8500 8501, HEALTHCHECK by
  `dcmserve health --service=liveness`, the entrypoint; nothing fetched but packages and base
  images (no ADD of URLs, no curl / wget / pip / git clone).
(The Python snippets of README and docs/demo.md are run by it_examples_python.)
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import check  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))


def read(rel):
    with open(os.path.join(SRC, rel)) as f:
        return f.read()


def help_flags(*cmd):
    r = subprocess.run([DCMSERVE] + list(cmd) + ["--help"], capture_output=True, text=True,
                       timeout=30)
    return set(re.findall(r"--(\w+)", r.stdout + r.stderr))


def check_flags():
    serve = set(re.findall(r"^  --(\w+)$",
                           subprocess.run([DCMSERVE, "serve", "--help"], capture_output=True,
                                          text=True, timeout=30).stdout, re.M))
    check(len(serve) > 20, "serve --help lists %d flags" % len(serve))
    health = help_flags("health")
    conf = read(os.path.join("docs", "configuration.md"))
    named = set(re.findall(r"`--(\w+)", conf))
    unknown = sorted(named - serve - health)
    check(not unknown, "docs/configuration.md names flags dcmserve does not have: %s" % unknown)
    serving = set(re.findall(r"--(\w+)", read(os.path.join("docs", "serving.md"))))
    missing = sorted(serve - named - serving)
    check(not missing, "flags in neither docs/configuration.md nor docs/serving.md: %s" % missing)
    check_compat_table(conf)
    return len(serve)


def check_compat_table(conf):
    """The "Accepted for compatibility" table says, for exactly the flags whose
    `serve --help` has a "(here: ...)" note, that note's words."""
    text = subprocess.run([DCMSERVE, "serve", "--help"], capture_output=True, text=True,
                          timeout=30).stdout
    notes = dict(re.findall(r"^  --(\w+)\n(?:      (?!\(here).*\n)*      \(here: (.*)\)$", text,
                            re.M))
    check(len(notes) > 10, "serve --help has %d flags with a note" % len(notes))
    sec = conf[conf.index("### Accepted for compatibility"):]
    sec = sec[:sec.index("\n## ")]
    rows = dict(re.findall(r"^\| `--(\w+)` \| (.*) \|$", sec, re.M))
    check(set(rows) == set(notes), "compatibility table of docs/configuration.md: flags %s are "
          "not in it, %s have no note in serve --help" % (sorted(set(notes) - set(rows)),
                                                          sorted(set(rows) - set(notes))))
    wrong = sorted(f for f in rows if f in notes and rows[f] != notes[f])
    check(not wrong, "docs/configuration.md says otherwise than serve --help for %s" % wrong)


PATH_RE = re.compile(r"`((?:docs|examples|scripts|deploy|tests|proto|models|server)/[\w./*{}-]*"
                     r"|Dockerfile|Makefile|LICENSE|NOTICE|\.dockerignore)")


def check_paths():
    n = 0
    for rel in ("README.md", "docs/api.md", "docs/configuration.md", "docs/deploy.md"):
        for p in PATH_RE.findall(read(rel)):
            p = p.rstrip(".")
            if "*" in p or "{" in p:
                continue
            check(os.path.exists(os.path.join(SRC, p)), "%s names %s, which does not exist" % (rel, p))
            n += 1
    return n


def check_readme():
    text = read("README.md")
    qs = text[text.index("## Quick start"):]
    first = re.search(r"```sh\n(.*?)```", qs, re.S).group(1)
    cmds = [line.split("#")[0].strip() for line in first.splitlines() if line.split("#")[0].strip()]
    check(cmds == ["make test", "make run"], "quick start set-up commands: %r" % cmds)
    check("PORT=" in qs and "REST_PORT=" in qs, "README does not document PORT= / REST_PORT=")
    demo = read(os.path.join("scripts", "run_demo.sh"))
    check("${PORT:-8500}" in demo and "${REST_PORT:-8501}" in demo, "run_demo.sh lacks PORT/REST_PORT")
    check("run_demo.sh" in read("Makefile"), "make run does not call run_demo.sh")


def check_dockerfile():
    text = read("Dockerfile")
    stages = {}
    for m in re.finditer(r"^FROM (\S+) AS (\S+)\n(.*?)(?=^FROM |\Z)", text, re.M | re.S):
        stages[m.group(2)] = (m.group(1), m.group(3))
    # CPU stages first: Docker's legacy builder builds every stage up to the
    # target, so `--target cpu` must not reach the CUDA base images.
    check(list(stages) == ["build", "cpu", "gpu-build", "gpu"], "stages %s" % list(stages))
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    for st, arg, default in (("build", "BUILD_BASE", "debian:12"), ("cpu", "RUNTIME_BASE", "debian:12-slim")):
        check(stages[st][0] == "${%s}" % arg and args.get(arg) == default,
              "%s base %s (ARG %s=%s)" % (st, stages[st][0], arg, args.get(arg)))
    check(re.match(r"nvidia/cuda:\$\{CUDA_TAG\}-runtime-ubuntu24\.04", stages["gpu"][0]),
          "gpu base %s" % stages["gpu"][0])
    tag = re.search(r"^ARG CUDA_TAG=(\S+)", text, re.M).group(1)
    check(re.match(r"13\.\d+\.\d+-cudnn$", tag), "CUDA_TAG %s: CUDA 13 with cuDNN expected" % tag)
    for b in ("build", "gpu-build"):
        body = stages[b][1]
        check("install_deps.sh build" in body and "deploy/install.sh /opt/dcmserve" in body,
              "%s does not use install_deps.sh build and deploy/install.sh" % b)
        check("apt-get clean" in body, "%s: no apt-get clean" % b)
    check("DCMSERVE_CUDA=ON" in stages["gpu-build"][1], "gpu-build without -DDCMSERVE_CUDA=ON")
    for r, b in (("cpu", "build"), ("gpu", "gpu-build")):
        body = stages[r][1]
        check("install_deps.sh runtime" in body and "apt-get clean" in body,
              "%s: no install_deps.sh runtime with apt-get clean" % r)
        check("COPY --from=%s /opt/dcmserve /opt/dcmserve" % b in body, "%s: not from %s" % (r, b))
        user = re.search(r"^USER (\S+)", body, re.M)
        check(user and not user.group(1).startswith(("0", "root")), "%s: USER %r" % (r, user))
        check(re.search(r"^EXPOSE 8500 8501$", body, re.M), "%s: EXPOSE 8500 8501" % r)
        check(re.search(r"^HEALTHCHECK .*\n?.*dcmserve health .*--service=liveness", body, re.M),
              "%s: HEALTHCHECK of grpc.health service liveness" % r)
        check('ENTRYPOINT ["/opt/dcmserve/bin/dcmserve-entrypoint"]' in body, "%s: ENTRYPOINT" % r)
        check("MODEL_NAME=" in body and "MODEL_BASE_PATH=" in body, "%s: MODEL_* env" % r)
    for bad in (r"^ADD\s+https?:", r"\bcurl\b", r"\bwget\b", r"\bpip3?\s+install", r"git\s+clone"):
        check(not re.search(bad, text, re.M), "Dockerfile fetches something: %s" % bad)
    ignore = read(".dockerignore").split()
    check(".git" in ignore and "build" in ignore, ".dockerignore lacks .git / build")


def main():
    n_flags = check_flags()
    n_paths = check_paths()
    check_readme()
    check_dockerfile()
    print("docs: %d serve flags documented, %d paths exist; README quick start; Dockerfile stages"
          % (n_flags, n_paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
