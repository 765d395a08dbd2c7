# The sandbox ("pause") image of the tests' Kubernetes node: containerd's
# CRI starts it first in every Pod to hold the Pod's namespaces. One static
# binary (internal/pause) that blocks, reaps children and exits 0 on
# SIGTERM or SIGINT, on nothing. images/images.json describes the image
# ("pause"); TestDockerfilesMatchDescription holds this file to it.
#
# Docker builds this file; this repository does not: `make images` builds
# the image the description gives (images/README.md). A cluster uses its
# own distribution's pause image (registry.k8s.io/pause).
#
#   docker build -f images/pause.Dockerfile -t jr2-pause .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/pause ./internal/pause

FROM scratch
COPY --from=build /out/pause /pause
# Kubernetes' own pause image's user: none of the Pod's.
USER 65535:65535
ENTRYPOINT ["/pause"]
