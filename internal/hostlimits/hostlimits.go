// Package hostlimits holds the limits every Custodian host gives the
// agent's connections, and its stop, once: controlplane render writes them
// into envoy.json, and custodian serve and custodian envoy (the wrapper
// Envoy runs under) read them here, so the two hosts cannot differ
// (docs/custodian.md "Limits and stop"; Envoy once cut every request in
// flight on SIGTERM and let a client hold a connection an hour).
//
// Invariant: a number here is the one both hosts use; no host has a limit
// of its own on the control, egress or intercept listeners beside these.
// The health listener keeps its own, smaller ones (HealthConnections, 5 s
// idle).
package hostlimits

import "time"

const (
	// HeaderTimeout bounds a request's headers: from the connection's
	// start for its first request (custodian serve; Envoy: IdleTimeout
	// until the first byte, which is the same number), from the first
	// byte for each later one. Envoy: request_headers_timeout.
	HeaderTimeout = 30 * time.Second

	// IdleTimeout closes a connection with no request in flight (a
	// keep-alive connection between requests, or a new one that sent
	// nothing). Envoy: common_http_protocol_options.idle_timeout, with
	// drain_timeout 1 ms so it closes then, not 5 s later.
	IdleTimeout = 30 * time.Second

	// StreamIdle ends a request in flight on which no byte moved either way
	// for this long (a long poll, an SSE stream, a tunnel; ADR-0059). Envoy:
	// stream_idle_timeout. custodian serve does not enforce it (a
	// difference envoy/README.md lists).
	StreamIdle = time.Hour

	// EgressConnections and ControlConnections bound the connections each
	// of those listeners holds; one beyond is closed as it is accepted, so
	// the agent's tunnels cannot shut the Harness out of its Menu, nor the
	// reverse. Envoy: a connection_limit filter before each listener's
	// connection manager. An intercepted connection rides its egress
	// connection and is counted there.
	EgressConnections  = 960
	ControlConnections = 64

	// HealthConnections is the health listener's own bound (ADR-0059).
	HealthConnections = 16

	// MaxConnections is ADR-0059's global connection limit: the sum of
	// the three, so it never binds before one of them does; in Envoy the
	// overload manager's global_downstream_max_connections, a backstop.
	// The health listener is counted in it, not exempt: Envoy 1.39.3 gives
	// back a place in the global count when a connection of a listener
	// with ignore_global_conn_limit closes, one it never took, so every
	// kubelet probe would have raised the limit by one (found while giving
	// both hosts the same limits; envoy/README.md).
	MaxConnections = EgressConnections + ControlConnections + HealthConnections

	// MaxHeaderBytes bounds a request's header block. Envoy:
	// max_request_headers_kb (64).
	MaxHeaderBytes = 64 << 10

	// StopGrace is how long a stop (SIGTERM or SIGINT) lets requests in
	// flight finish: new connections are refused at once, an idle one is
	// closed, a request in flight gets its answer (with Connection: close),
	// and what is still open at the end (a tunnel, a long poll) is closed.
	// Envoy (custodian envoy): /healthcheck/fail and /drain_listeners on
	// the admin socket, then SIGTERM to Envoy once nothing is in flight or
	// the grace is over.
	StopGrace = 10 * time.Second

	// AdminSocketDir holds Envoy's admin interface: a unix socket, mode
	// 0600, in the Custodian container's own /tmp — no TCP admin listener,
	// so nothing outside the container (the Harness shares the pod's
	// network, never its files) can reach it. custodian envoy drives the
	// stop through it. Each rendered directory names its own socket
	// (AdminSocketPath), so two pods' Envoys on one machine never bind
	// over each other's.
	AdminSocketDir = "/tmp"
	// AdminSocketIDLen is the length of a render's admin socket id: hex
	// digits drawn at random when a directory is first rendered.
	AdminSocketIDLen = 12
)

// AdminSocketPath is the admin socket of the rendered directory whose id
// is id: AdminSocketDir/jr2-custodian-admin-<id>.sock.
func AdminSocketPath(id string) string {
	return AdminSocketDir + "/" + AdminSocketPrefix + id + AdminSocketSuffix
}

// The admin socket's file name around its id.
const (
	AdminSocketPrefix = "jr2-custodian-admin-"
	AdminSocketSuffix = ".sock"
)
