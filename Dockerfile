# The toolgate gateway in a container (docs/gateway.md, "Container").
#   docker build -t toolgate .
#   docker run -v "$PWD/gateway:/etc/toolgate:ro" -p 8443:8443 toolgate
# Mount the configuration (/etc/toolgate/gateway.yaml), policies and the secret read-only;
# give the audit log a volume.

# Build, with the workspace's minimum Rust.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p toolgate --bin toolgate

# Run: the stdio servers the configuration names must be in the image too (here Node.js for
# the npm servers; add python3 and others as needed).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates nodejs npm \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/toolgate --create-home toolgate
COPY --from=build /src/target/release/toolgate /usr/local/bin/toolgate
USER toolgate
WORKDIR /var/lib/toolgate
EXPOSE 8443
# /bin/sh is dash, which has no /dev/tcp: bash opens the port.
HEALTHCHECK CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8443"]
ENTRYPOINT ["toolgate", "gateway", "--config", "/etc/toolgate/gateway.yaml"]
