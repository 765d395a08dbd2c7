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

// requestHeadersHook is the request-headers hook behind its export: the
// stream's filter decides; a stream with no filter (its creation failed
// or panicked, and Envoy called on with a null pointer) is failed closed
// with the fixed 502 on the ABI envoy gives for it, never held open.
func requestHeadersHook(envoy func() abi, h uintptr) (st int32) {
	f := filterOf(h)
	if f == nil {
		(&moduleFilter{x: envoy()}).fail()
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.requestHeaders())
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
