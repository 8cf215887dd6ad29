# dcmserve container images. Stages (docker build --target NAME), CPU first so
# that building `cpu` never touches the CUDA base images, not even with
# Docker's legacy builder (which builds every stage up to the target):
#   build      Debian 12: compile dcmserve (CPU), install it with deploy/install.sh
#   cpu        Debian 12 slim + the runtime libraries + what `build` installed
#   gpu-build  NVIDIA CUDA 13.0.1 + cuDNN 9 devel (Ubuntu 24.04): compile with -DDCMSERVE_CUDA=ON
#   gpu        NVIDIA CUDA 13.0.1 + cuDNN 9 runtime (Ubuntu 24.04) + what `gpu-build` installed
# Always name the target: without --target Docker builds the last stage, gpu.
#
#   make image                                  # cpu, offline: podman + mmdebstrap bases
#   DOCKER_BUILDKIT=1 docker build --target cpu -t dcmserve:cpu .
#   docker build --target gpu -t dcmserve:gpu .
#   docker run --rm -p 8500:8500 -p 8501:8501 dcmserve:cpu            # serves the demo model
#   docker run --rm -p 8500:8500 -v /srv/models/m:/models/m -e MODEL_NAME=m dcmserve:cpu
#
# Packages come from the distribution (scripts/install_deps.sh runtime|build);
# nothing else is downloaded. BUILD_BASE / RUNTIME_BASE: the Debian bases of the
# cpu stages (scripts/build_image.sh passes its own, made by mmdebstrap, on
# which install_deps.sh finds everything installed). Environment and
# arguments: docs/deploy.md.
ARG BUILD_BASE=debian:12
ARG RUNTIME_BASE=debian:12-slim
ARG CUDA_TAG=13.0.1-cudnn

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY scripts/install_deps.sh scripts/install_deps.sh
RUN sh scripts/install_deps.sh build && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j "$(nproc)" --target dcmserve \
 && STRIP=1 sh deploy/install.sh /opt/dcmserve build

FROM ${RUNTIME_BASE} AS cpu
COPY scripts/install_deps.sh /tmp/install_deps.sh
RUN sh /tmp/install_deps.sh runtime && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/install_deps.sh \
 && groupadd --system --gid 10001 dcmserve \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin dcmserve \
 && mkdir -p /models
COPY --from=build /opt/dcmserve /opt/dcmserve
RUN ln -s /opt/dcmserve/models/demo_ct /models/demo_ct
ENV MODEL_NAME=demo_ct MODEL_BASE_PATH=/models GRPC_PORT=8500 REST_API_PORT=8501
USER 10001:10001
EXPOSE 8500 8501
# "liveness": SERVING while the process works, whatever its models do (a
# model folder that is empty or broken makes "" and "readiness" NOT_SERVING,
# and an orchestrator that restarts unhealthy containers would restart a
# server that serves its other models). Readiness: --service=readiness.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD /opt/dcmserve/bin/dcmserve health --port="$GRPC_PORT" --service=liveness --timeout_ms=4000 || exit 1
ENTRYPOINT ["/opt/dcmserve/bin/dcmserve-entrypoint"]

FROM nvidia/cuda:${CUDA_TAG}-devel-ubuntu24.04 AS gpu-build
WORKDIR /src
COPY scripts/install_deps.sh scripts/install_deps.sh
RUN sh scripts/install_deps.sh build && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCMSERVE_CUDA=ON \
 && cmake --build build -j "$(nproc)" --target dcmserve \
 && STRIP=1 sh deploy/install.sh /opt/dcmserve build

FROM nvidia/cuda:${CUDA_TAG}-runtime-ubuntu24.04 AS gpu
COPY scripts/install_deps.sh /tmp/install_deps.sh
RUN sh /tmp/install_deps.sh runtime && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/install_deps.sh \
 && groupadd --system --gid 10001 dcmserve \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin dcmserve \
 && mkdir -p /models
COPY --from=gpu-build /opt/dcmserve /opt/dcmserve
RUN ln -s /opt/dcmserve/models/demo_ct /models/demo_ct
ENV MODEL_NAME=demo_ct MODEL_BASE_PATH=/models GRPC_PORT=8500 REST_API_PORT=8501
USER 10001:10001
EXPOSE 8500 8501
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD /opt/dcmserve/bin/dcmserve health --port="$GRPC_PORT" --service=liveness --timeout_ms=4000 || exit 1
ENTRYPOINT ["/opt/dcmserve/bin/dcmserve-entrypoint"]
