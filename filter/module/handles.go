package module

import (
	"runtime/cgo"
	"strings"

	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/logline"
)

// The objects Envoy holds for the module (configs, streams) are
// runtime/cgo handles: Envoy keeps a number, never a Go pointer.

func handleValue(h uintptr) (v any) {
	if h == 0 {
		return nil
	}
	defer func() {
		if recover() != nil {
			v = nil // not a live handle
		}
	}()
	return cgo.Handle(h).Value()
}

func deleteHandle(h uintptr) {
	if h == 0 {
		return
	}
	defer func() { _ = recover() }()
	cgo.Handle(h).Delete()
}

func filterOf(h uintptr) *moduleFilter {
	f, _ := handleValue(h).(*moduleFilter)
	return f
}

// The stream hooks behind their exports, in Go's types: the exports only
// convert, so a test drives the very code Envoy calls (filter/module's
// TestConformance).

// newFilterHook makes one stream's filter over x, with the filter config
// behind conf; a conf that is no live config leaves the filter without
// one, and it refuses the request. A panic is no filter (0): Envoy then
// calls on with a null pointer, which requestHeadersHook fails closed.
func newFilterHook(conf uintptr, x abi) (h uintptr) {
	defer func() {
		if recover() != nil {
			h = 0
		}
	}()
	f := &moduleFilter{x: x, route: routeOf}
	if c, ok := handleValue(conf).(*filterConfig); ok {
		f.conf = c
	}
	return uintptr(cgo.NewHandle(f))
}

// routeOf is the per-route config behind a handle Envoy gave back.
func routeOf(h uintptr) *routeConfig {
	r, _ := handleValue(h).(*routeConfig)
	return r
}

// requestHeadersHook: the stream's filter decides; a stream with no
// filter (its creation failed or panicked, and Envoy called on with a null
// pointer) is failed closed with the fixed 502 on the ABI envoy gives for
// it, never held open.
func requestHeadersHook(envoy func() abi, h uintptr) (st int32) {
	f := filterOf(h)
	if f == nil {
		(&moduleFilter{x: envoy()}).fail()
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.requestHeaders())
}

// The response hooks of a stream with no filter stop: its request was
// failed closed.

func responseHeadersHook(h uintptr, endStream bool) (st int32) {
	f := filterOf(h)
	if f == nil {
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.responseHeaders(endStream))
}

func responseBodyHook(h uintptr, endStream bool) (st int32) {
	f := filterOf(h)
	if f == nil {
		return statusStopNoBuffer
	}
	defer guard(f, &st, statusStopNoBuffer)
	return int32(f.responseBody(endStream))
}

func responseTrailersHook(h uintptr) (st int32) {
	f := filterOf(h)
	if f == nil {
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.responseTrailers())
}

func streamCompleteHook(h uintptr) {
	defer func() { _ = recover() }()
	if f := filterOf(h); f != nil {
		f.streamComplete()
	}
}

// destroyHook releases the stream; its Done runs once, whether or not
// stream_complete came first.
func destroyHook(h uintptr) {
	defer func() { _ = recover() }()
	if f := filterOf(h); f != nil {
		f.streamComplete()
	}
	deleteHandle(h)
}

// guard is every stream hook's deferred recover: the stream fails closed
// and the hook returns stop.
func guard[T ~int32](f *moduleFilter, st *T, stop int) {
	if recover() == nil {
		return
	}
	f.fail()
	*st = T(stop)
}

// pluginErr is a config error as one contract line. Errors name files,
// fields and fixes, never a value; a newline cannot split the line.
func pluginErr(err error) string {
	return logline.Event(logline.Custodian, "misconfigured", "reason", "config") + " error=" + strings.ReplaceAll(pluginconf.PluginName+": "+err.Error(), "\n", " ")
}
