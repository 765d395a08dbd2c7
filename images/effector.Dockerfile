# The Effector: `effector` and, beside it, `effector-confine` (the Effector
# runs the confiner that lies beside its own binary), both static, on
# distroless. `controlplane effector` writes the Deployment that runs this
# image. images/images.json describes the image ("effector");
# TestDockerfilesMatchDescription holds this file to it, and the Effector's
# objects test holds the Deployment to it (binaries, user, port).
#
# Docker builds this file; this repository does not. `make images` builds
# the image the description gives, on a base of Debian 12 packages standing
# for distroless/static (images/README.md). Pin both bases by digest where it
# is deployed. An image for credentialed commands or pushes needs the tools
# they run (git, the author's CLI): build FROM your own image and copy these
# two binaries to the same paths.
#
#   docker build -f images/effector.Dockerfile -t jr2-effector .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./effector ./effector/cmd/effector-confine

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/effector /opt/jr2/bin/effector
COPY --from=build /out/effector-confine /opt/jr2/bin/effector-confine
USER 65532:65532
# The signed wire and /healthz (JR2_EFFECTOR_PORT's default).
EXPOSE 8082
ENTRYPOINT ["/opt/jr2/bin/effector"]
