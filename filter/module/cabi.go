package module

/*
#include <stdlib.h>
#include "abi.h"

// Envoy copies what it keeps of these calls' arguments before it returns
// (noescape: Go memory passed to them need not move to the heap), and the
// ones marked nocallback call no hook of the module (the runtime then
// skips its preparation for a callback). A call that changes a body may
// cross a buffer's watermark, whose hooks are the module's: those two are
// not marked.
#cgo noescape envoy_dynamic_module_callback_http_get_headers
#cgo nocallback envoy_dynamic_module_callback_http_get_headers
#cgo noescape envoy_dynamic_module_callback_http_get_body_chunks
#cgo nocallback envoy_dynamic_module_callback_http_get_body_chunks
#cgo noescape envoy_dynamic_module_callback_http_set_header
#cgo nocallback envoy_dynamic_module_callback_http_set_header
#cgo noescape envoy_dynamic_module_callback_http_add_header
#cgo nocallback envoy_dynamic_module_callback_http_add_header
#cgo noescape envoy_dynamic_module_callback_http_append_body
#cgo noescape envoy_dynamic_module_callback_http_set_dynamic_metadata_bool
#cgo nocallback envoy_dynamic_module_callback_http_set_dynamic_metadata_bool
#cgo noescape envoy_dynamic_module_callback_log
#cgo nocallback envoy_dynamic_module_callback_log
#cgo nocallback envoy_dynamic_module_callback_http_get_headers_size
#cgo nocallback envoy_dynamic_module_callback_http_get_body_chunks_size
#cgo nocallback envoy_dynamic_module_callback_http_clear_route_cache
#cgo nocallback envoy_dynamic_module_callback_get_most_specific_route_config
#cgo noescape envoy_dynamic_module_callback_http_get_filter_state_bytes
#cgo nocallback envoy_dynamic_module_callback_http_get_filter_state_bytes

// jr2_in_envoy: 1 inside Envoy, where the weak callbacks are bound.
static int jr2_in_envoy(void) { return envoy_dynamic_module_callback_log != 0; }
*/
import "C"

import (
	"slices"
	"unsafe"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// cabi is abi over Envoy's callbacks for one stream (its filter pointer).
// Only the Envoy worker thread running the stream's hook calls it.
type cabi struct{ f C.uintptr_t }

var _ abi = cabi{}

// bindEnvoy makes Envoy's filter p f's ABI; x points at f's own cabi, so
// binding allocates nothing.
func (f *moduleFilter) bindEnvoy(p uintptr) {
	f.ce = cabi{f: C.uintptr_t(p)}
	f.x = &f.ce
}

// buf is a module buffer over s's bytes; Envoy copies what it keeps
// before the callback returns.
func buf(s string) C.jr2_module_buf {
	return C.jr2_module_buf{ptr: (*C.char)(unsafe.Pointer(unsafe.StringData(s))), len: C.size_t(len(s))}
}

func bytesBuf(b []byte) C.jr2_module_buf {
	return C.jr2_module_buf{ptr: (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), len: C.size_t(len(b))}
}

// headers copies a header map out of Envoy into c (headerCopy): every
// name and value into its one buffer; the ABI's array of views lives on
// the stack for up to 32 headers.
func (x cabi) headers(kind int, c *headerCopy) []filter.Header {
	n := int(C.envoy_dynamic_module_callback_http_get_headers_size(x.f, C.int(kind)))
	if n == 0 {
		return nil
	}
	var small [32]C.jr2_envoy_header
	raw := small[:0]
	if n <= len(small) {
		raw = small[:n]
	} else {
		raw = make([]C.jr2_envoy_header, n)
	}
	if !C.envoy_dynamic_module_callback_http_get_headers(x.f, C.int(kind), unsafe.SliceData(raw)) {
		return nil
	}
	size := 0
	for _, h := range raw {
		size += int(h.key_len) + int(h.value_len)
	}
	c.start(n, size)
	for _, h := range raw {
		c.add(envoyView(h.key, h.key_len), envoyView(h.value, h.value_len))
	}
	return c.list
}

// envoyView is Envoy's memory at p for the length of a callback: it is
// copied before the callback returns, never kept.
func envoyView(p *C.char, l C.size_t) []byte {
	if l == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(l))
}

func (x cabi) setHeader(kind int, name, value string) {
	C.envoy_dynamic_module_callback_http_set_header(x.f, C.int(kind), buf(name), buf(value))
}

func (x cabi) addHeader(kind int, name, value string) {
	C.envoy_dynamic_module_callback_http_add_header(x.f, C.int(kind), buf(name), buf(value))
}

func (x cabi) body(kind int, out []byte) []byte {
	n := C.envoy_dynamic_module_callback_http_get_body_chunks_size(x.f, C.int(kind))
	if n == 0 {
		return out
	}
	var small [16]C.jr2_envoy_buf
	chunks := small[:0]
	if int(n) <= len(small) {
		chunks = small[:n]
	} else {
		chunks = make([]C.jr2_envoy_buf, int(n))
	}
	if !C.envoy_dynamic_module_callback_http_get_body_chunks(x.f, C.int(kind), unsafe.SliceData(chunks)) {
		return out
	}
	size := 0
	for _, c := range chunks {
		size += int(c.len)
	}
	out = slices.Grow(out, size)
	for _, c := range chunks {
		out = append(out, envoyView(c.ptr, c.len)...)
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

func (x cabi) filterState(key string) (string, bool) {
	var out C.jr2_envoy_buf
	if !C.envoy_dynamic_module_callback_http_get_filter_state_bytes(x.f, buf(key), &out) {
		return "", false
	}
	// A view of Envoy's bytes, valid during this hook: ForConnection
	// copies what it keeps.
	return unsafe.String((*byte)(unsafe.Pointer(out.ptr)), int(out.len)), true
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
	logStream = func(l []byte) { C.envoy_dynamic_module_callback_log(C.JR2_LOG_INFO, bytesBuf(l)) }
}
