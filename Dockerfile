# Attention service image: build with the -dev packages, run with only the
# shared libraries as a non-root user.
#
#   docker build -t attention-service .
#   docker run --rm -p 8080:8080 -p 8001:8001 attention-service
#   docker run --rm -p 8080:8080 -v /srv/models:/models:ro attention-service
#
# HTTP on 8080; the Open Inference Protocol over gRPC on 8001 (grpc_port;
# 0 turns it off).
#
# Configure with ATTN_* environment variables or flags after the image name
# (`docker run ... attention-service --workers 4`); see `--help`.
# The model repository is /models (ATTN_MODEL_REPOSITORY): the trained model
# digits-reverse here; mount another there (a Kubernetes volume, which hides
# it) or bake one in with deploy/image/Dockerfile.models. The server writes nothing
# outside /tmp, so the root filesystem may be read-only (make container-test).

# ---- build stage ------------------------------------------------------------
# libmicrohttpd >= 1.0 is built here from Debian 13's source package and
# linked statically (scripts/mhd.sh; bookworm's 0.9.75 is too old): hence
# patch, and network access for apt-get source during the build. gRPC's C
# core (libgrpc-dev) serves the gRPC port; protobuf-c (libprotobuf-c-dev, and
# protoc-c from protobuf-c-compiler) generates and reads its messages from
# proto/grpc_service.proto, part of the build context.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc make pkg-config libc6-dev libgnutls28-dev patch \
        libjansson-dev zlib1g-dev libopenblas-dev \
        libgrpc-dev libprotobuf-c-dev protobuf-c-compiler \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
WORKDIR /src
COPY . .
# No -march=native here (the Makefile only adds it on request): the image must
# run on any x86-64.
# web/ (the browser client) is optional for the server, which answers 404 for
# / without it: make sure the directory exists so the COPY below always works.
RUN make build/attention-server && mkdir -p web

# ---- runtime stage ----------------------------------------------------------
FROM debian:bookworm-slim
# The pthread build of OpenBLAS, as linked in the build stage (the serial
# build has given wrong sgemm results under concurrent calls). libgnutls30:
# the server and the libmicrohttpd linked into it use GnuTLS. libgrpc29
# (libgrpc and libgpr, gRPC's C core 1.51) and libprotobuf-c1: the gRPC
# port. The official slim image already drops apt's caches; `apt-get clean`
# and removing the *.bin caches keeps the layer small on other bookworm
# bases too.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libgnutls30 libjansson4 zlib1g libopenblas0-pthread libgrpc29 libprotobuf-c1 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && useradd --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin --uid 10001 attention
WORKDIR /app
# openapi.yaml is built into the binary (api/embed.S); the web client is
# read from static_dir, "web" relative to this working directory.
COPY --from=build /src/build/attention-server /app/attention-server
COPY --from=build /src/web /app/web
# The model repository, /models: the trained models the web client's
# examples run (models/ in the source tree), owned by root; a volume mounted
# at /models replaces it, and deploy/image/Dockerfile.models bakes another.
COPY --from=build /src/models/digits-reverse /models/digits-reverse
COPY --from=build /src/models/induction-l0 /models/induction-l0
COPY --from=build /src/models/induction-l1 /models/induction-l1
USER attention:attention
# HTTP (and the health probes), then gRPC
EXPOSE 8080 8001
ENV ATTN_BIND=0.0.0.0
# The model repository: one folder per model (config.json, model.safetensors).
# Owned by root; the server only reads it.
ENV ATTN_MODEL_REPOSITORY=/models
ENTRYPOINT ["/app/attention-server"]
