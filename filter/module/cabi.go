package module

/*
#include <stdlib.h>
#include "abi.h"

// jr2_in_envoy: 1 inside Envoy, where the weak callbacks are bound.
static int jr2_in_envoy(void) { return envoy_dynamic_module_callback_log != 0; }
*/
import "C"

import (
	"unsafe"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// cabi is abi over Envoy's callbacks for one stream (its filter pointer).
// Only the Envoy worker thread running the stream's hook calls it.
type cabi struct{ f C.uintptr_t }

var _ abi = cabi{}

// buf is a module buffer over s's bytes; Envoy copies what it keeps
// before the callback returns.
func buf(s string) C.jr2_module_buf {
	return C.jr2_module_buf{ptr: (*C.char)(unsafe.Pointer(unsafe.StringData(s))), len: C.size_t(len(s))}
}

func bytesBuf(b []byte) C.jr2_module_buf {
	return C.jr2_module_buf{ptr: (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), len: C.size_t(len(b))}
}

func goString(p *C.char, n C.size_t) string {
	if n == 0 {
		return ""
	}
	return C.GoStringN(p, C.int(n))
}

func (x cabi) headers(kind int) []filter.Header {
	n := C.envoy_dynamic_module_callback_http_get_headers_size(x.f, C.int(kind))
	if n == 0 {
		return nil
	}
	raw := make([]C.jr2_envoy_header, int(n))
	if !C.envoy_dynamic_module_callback_http_get_headers(x.f, C.int(kind), unsafe.SliceData(raw)) {
		return nil
	}
	out := make([]filter.Header, len(raw))
	for i, h := range raw {
		out[i] = filter.Header{Name: goString(h.key, h.key_len), Value: goString(h.value, h.value_len)}
	}
	return out
}

func (x cabi) setHeader(kind int, name, value string) {
	C.envoy_dynamic_module_callback_http_set_header(x.f, C.int(kind), buf(name), buf(value))
}

func (x cabi) addHeader(kind int, name, value string) {
	C.envoy_dynamic_module_callback_http_add_header(x.f, C.int(kind), buf(name), buf(value))
}

func (x cabi) body(kind int) []byte {
	n := C.envoy_dynamic_module_callback_http_get_body_chunks_size(x.f, C.int(kind))
	if n == 0 {
		return nil
	}
	chunks := make([]C.jr2_envoy_buf, int(n))
	if !C.envoy_dynamic_module_callback_http_get_body_chunks(x.f, C.int(kind), unsafe.SliceData(chunks)) {
		return nil
	}
	size := 0
	for _, c := range chunks {
		size += int(c.len)
	}
	out := make([]byte, 0, size)
	for _, c := range chunks {
		if c.len > 0 {
			out = append(out, unsafe.Slice((*byte)(unsafe.Pointer(c.ptr)), int(c.len))...)
		}
	}
	return out
}

func (x cabi) drainBody(kind int, n int) {
	C.envoy_dynamic_module_callback_http_drain_body(x.f, C.int(kind), C.size_t(n))
}

func (x cabi) appendBody(kind int, b []byte) {
	C.envoy_dynamic_module_callback_http_append_body(x.f, C.int(kind), bytesBuf(b))
}

// sendResponse answers the stream. The header array handed to Envoy must
// hold no Go pointer, so it and its strings live in C memory for the call.
func (x cabi) sendResponse(status int, body, details string, hs []filter.Header) {
	size := C.size_t(unsafe.Sizeof(C.jr2_module_header{}))
	arr := (*C.jr2_module_header)(C.malloc(size * C.size_t(len(hs))))
	defer C.free(unsafe.Pointer(arr))
	view := unsafe.Slice(arr, len(hs))
	for i, h := range hs {
		view[i].key, view[i].key_len = C.CString(h.Name), C.size_t(len(h.Name))
		view[i].value, view[i].value_len = C.CString(h.Value), C.size_t(len(h.Value))
	}
	defer func() {
		for i := range view {
			C.free(unsafe.Pointer(view[i].key))
			C.free(unsafe.Pointer(view[i].value))
		}
	}()
	C.envoy_dynamic_module_callback_http_send_response(x.f, C.uint32_t(status), arr, C.size_t(len(hs)), buf(body), buf(details))
}

func (x cabi) setMark(v bool) {
	C.envoy_dynamic_module_callback_http_set_dynamic_metadata_bool(x.f, buf(pluginconf.MetadataNamespace), buf(pluginconf.MarkKey), C.bool(v))
}

func (x cabi) clearRouteCache() { C.envoy_dynamic_module_callback_http_clear_route_cache(x.f) }

func (x cabi) routeConfig() uintptr {
	return uintptr(C.envoy_dynamic_module_callback_get_most_specific_route_config(x.f))
}

// logLine writes one line to Envoy's log at level.
func logLine(level C.int, line string) {
	C.envoy_dynamic_module_callback_log(level, buf(line))
}

// inEnvoy reports whether the module runs inside Envoy (its callbacks are
// bound); a test binary has none.
func inEnvoy() bool { return C.jr2_in_envoy() != 0 }

func init() {
	if !inEnvoy() {
		return
	}
	logInfo = func(l string) { logLine(C.JR2_LOG_INFO, l) }
	logError = func(l string) { logLine(C.JR2_LOG_ERROR, l) }
}
