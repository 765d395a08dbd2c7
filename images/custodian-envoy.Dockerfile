# The Custodian on the proven path: core Envoy 1.39.3 (the release every
# `make test` runs) with the engine's dynamic module at the path the pod's
# envoy.json loads it from, run under `custodian envoy` (a static Go binary),
# which drains Envoy on SIGTERM through its admin socket in /tmp (the pod
# mounts an emptyDir there: the root filesystem is read-only). `controlplane render --sidecar envoy` (the
# default) writes the Pod that runs this image. images/images.json describes
# the image ("custodian-envoy"); TestDockerfilesMatchDescription holds this
# file to it, and TestRecipesMatchObjects holds the Pod to it (binary, module
# path, user, port, config path).
#
# Docker builds this file; this repository does not. `make images` builds
# the image the description gives — the same Envoy 1.39.3 binary, module,
# custodian, user and config on a base of Debian 12 packages standing for
# envoy-distroless — and the tests' Kubernetes node runs that
# (images/README.md). Pin both bases by digest where it is deployed.
#
#   docker build -f images/custodian-envoy.Dockerfile -t jr2-custodian-envoy .

# The module is a Go c-shared object: build it on a glibc no newer than the
# Envoy image's (Debian 12).
FROM golang:1.26-bookworm AS module
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -buildmode=c-shared -o /out/custodian-module.so ./filter/module/custodian-module
RUN CGO_ENABLED=0 go build -trimpath -o /out/custodian ./custodian

FROM envoyproxy/envoy-distroless:v1.39.3
COPY --from=module /out/custodian-module.so /opt/jr2/lib/custodian-module.so
COPY --from=module /out/custodian /opt/jr2/bin/custodian
# distroless's nonroot: the pod's runAsUser, never the agent's uid.
USER 65532:65532
# The health listener (custodian.json's 0.0.0.0:15021), the kubelet's probes.
EXPOSE 15021
# custodian envoy starts Envoy (the words after --) and, on SIGTERM, drains
# it (envoy/README.md). One worker, hot restart off; log lines carry only the
# message, so the engine's jr2.custodian lines are whole lines on stdout; the
# drain custodian envoy drives (hostlimits.StopGrace). The config is the
# pod's projected volume (--pod-config-dir, default /etc/jr2/custodian/config).
ENTRYPOINT ["/opt/jr2/bin/custodian", "envoy", "--", "/usr/local/bin/envoy"]
CMD ["-c", "/etc/jr2/custodian/config/envoy.json", "--concurrency", "1", "--disable-hot-restart", "--log-format", "%v", "--log-path", "/dev/stdout", "--file-flush-interval-msec", "1000", "--drain-strategy", "immediate", "--drain-time-s", "10"]
