# Maidian worker image. Multi-stage: build with the Swift toolchain on Debian 12, run on a slim Debian 12
# with only the shared C libraries Maidian links (librdkafka, zstd, libmaxminddb, and Hyperscan on x86-64 or
# Vectorscan, the same `libhs` API, on other architectures such as arm64).
#   docker build -t maidian:local .
#   docker run --rm maidian:local --version
#   docker run --rm -p 9464:9464 -e MAIDIAN_BROKERS=host:9092 maidian:local run pipelines/app-analytics.yaml --metrics-port 9464
# `make test` checks the build context without a Docker engine (scripts/check-build-context.sh: the tree as
# .dockerignore filters it, assembled as the COPY lines below do, must hold what the build reads) and docker-compose.yml
# (`docker-compose config`). README "Container image" gives the image's size.
ARG SWIFT_VERSION=6.3

# ---- build ----
FROM swift:${SWIFT_VERSION}-bookworm AS build
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -qq \
 && hs=$([ "$(dpkg --print-architecture)" = amd64 ] && echo libhyperscan-dev || echo libvectorscan-dev) \
 && apt-get install -y -qq --no-install-recommends librdkafka-dev libzstd-dev libmaxminddb-dev "$hs" pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so source edits do not refetch them.
COPY Package.* ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
# Package.swift names the state-size tool's targets (bench/README.md); only its sources are in the context.
COPY bench/state-size ./bench/state-size
# The Swift runtime is linked statically: the runtime image needs no Swift toolchain.
RUN swift build -c release --product maidian --static-swift-stdlib \
 && install -D "$(swift build -c release --show-bin-path)/maidian" /out/maidian

# ---- run ----
FROM debian:bookworm-slim
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -qq \
 && hs=$([ "$(dpkg --print-architecture)" = amd64 ] && echo libhyperscan5 || echo libvectorscan5) \
 && apt-get install -y -qq --no-install-recommends librdkafka1 libzstd1 libmaxminddb0 "$hs" libstdc++6 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /app maidian
COPY --from=build /out/maidian /usr/local/bin/maidian
WORKDIR /app
COPY pipelines ./pipelines
# What app-analytics.yaml falls back to: the small test geo database (mount a GeoLite2-City.mmdb and set
# MAIDIAN_GEO_DB for real use) and the sample rules (set MAIDIAN_RULES to your own).
COPY data/test-city.mmdb data/rules-sample.yaml ./data/
USER maidian
# Prometheus /metrics and /health/live, /health/ready when run with --metrics-port 9464 (or `metrics:` in the pipeline).
EXPOSE 9464
# SIGTERM stops a worker gracefully: it finishes the batch in hand, delivers, commits, leaves the group.
STOPSIGNAL SIGTERM
ENTRYPOINT ["maidian"]
CMD ["run", "pipelines/app-analytics.yaml", "--metrics-port", "9464"]
