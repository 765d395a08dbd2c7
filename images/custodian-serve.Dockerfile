# The Custodian as `custodian serve`, the Go host of the same engine: one
# static binary on distroless. `controlplane render --sidecar serve` writes
# the Pod that runs this image. images/images.json describes the image
# ("custodian-serve"); TestDockerfilesMatchDescription holds this file to it,
# and TestRecipesMatchObjects holds the Pod to it (binary, user, port, config
# path).
#
# Docker builds this file; this repository does not. `make images` builds
# the image the description gives, on a base of Debian 12 packages standing
# for distroless/static, and the tests' Kubernetes node runs that
# (images/README.md). Pin both bases by digest where it is deployed.
#
#   docker build -f images/custodian-serve.Dockerfile -t jr2-custodian-serve .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/custodian ./custodian

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/custodian /opt/jr2/bin/custodian
USER 65532:65532
# The health listener (custodian.json's 0.0.0.0:15021), the kubelet's probes.
EXPOSE 15021
# custodian.json of the pod's projected volume; the leaves (tls/) and
# ca/upstream.crt are read beside it.
ENTRYPOINT ["/opt/jr2/bin/custodian"]
CMD ["serve", "--config", "/etc/jr2/custodian/config/custodian.json"]
