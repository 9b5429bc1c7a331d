# Maidian worker image (first version). Multi-stage: build with the Swift toolchain on Debian 12, run on
# a slim Debian 12 with only the shared C libraries Maidian links (librdkafka, zstd, libmaxminddb, hyperscan).
#   docker build -t maidian:local .
#   docker run --rm maidian:local stages
#   docker run --rm -p 9464:9464 -e MAIDIAN_BROKERS=host:9092 maidian:local run pipelines/app-analytics.yaml --metrics-port 9464
# (Written and checked without a Docker engine: `docker-compose config` validates docker-compose.yml only.)
ARG SWIFT_VERSION=6.3

# ---- build ----
FROM swift:${SWIFT_VERSION}-bookworm AS build
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends librdkafka-dev libzstd-dev libmaxminddb-dev libhyperscan-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so source edits do not refetch them.
COPY Package.* ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
# The Swift runtime is linked statically: the runtime image needs no Swift toolchain.
RUN swift build -c release --product maidian --static-swift-stdlib \
 && install -D "$(swift build -c release --show-bin-path)/maidian" /out/maidian

# ---- run ----
FROM debian:bookworm-slim
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends librdkafka1 libzstd1 libmaxminddb0 libhyperscan5 libstdc++6 ca-certificates \
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
