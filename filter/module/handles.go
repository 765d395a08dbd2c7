package module

import (
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"

	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/logline"
)

// The objects Envoy holds for the module are numbers, never Go pointers:
// a config is a runtime/cgo handle; a stream's filter is a slot of the
// filter table (filters).

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

func filterOf(h uintptr) *moduleFilter { return filters.get(h) }

// filters holds every stream's filter. A stream's handle is its slot's
// number (from 1) in the low 32 bits and the slot's generation above: a
// destroyed stream's slot, with its filter emptied, serves a later stream
// under the next generation, so an old handle finds nothing, and the
// filter's buffers serve again instead of being allocated per stream.
// Envoy's workers open, read and close slots concurrently. Only keepSlots
// free slots keep their filter's memory: after a burst of streams, the
// rest is let go.
var filters filterTable

// keepSlots is how many free slots keep an emptied filter (each at most a
// few buffers of stream.KeepCap bytes; a few KiB after ordinary requests).
const keepSlots = 32

// A handle holds a generation above 32 bits: the module is built for 64-bit
// platforms only (this fails to compile elsewhere).
var _ [unsafe.Sizeof(uintptr(0)) - 8]byte

type filterTable struct {
	mu    sync.RWMutex
	slots []filterSlot
	free  []uint32 // indexes of slots not live
}

type filterSlot struct {
	f    *moduleFilter
	gen  uint32
	live bool
}

// open takes a free slot (or a new one) for a new stream: its handle and
// its filter, which is empty (end).
func (t *filterTable) open() (uintptr, *moduleFilter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		t.slots = append(t.slots, filterSlot{})
		i = uint32(len(t.slots) - 1)
	}
	sl := &t.slots[i]
	if sl.f == nil {
		sl.f = &moduleFilter{}
	}
	sl.live = true
	return uintptr(uint64(sl.gen)<<32 | uint64(i+1)), sl.f
}

// get is the live filter behind h, or nil.
func (t *filterTable) get(h uintptr) *moduleFilter {
	i, gen := uint32(uint64(h))-1, uint32(uint64(h)>>32)
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(i) >= len(t.slots) || !t.slots[i].live || t.slots[i].gen != gen {
		return nil
	}
	return t.slots[i].f
}

// close ends h's stream: its handle finds nothing from now on, its filter
// is emptied (end) outside the lock, then its slot is free again.
func (t *filterTable) close(h uintptr) {
	i, gen := uint32(uint64(h))-1, uint32(uint64(h)>>32)
	t.mu.Lock()
	if int(i) >= len(t.slots) || !t.slots[i].live || t.slots[i].gen != gen {
		t.mu.Unlock()
		return
	}
	sl := &t.slots[i]
	sl.live = false
	sl.gen++
	f := sl.f
	t.mu.Unlock()
	func() {
		defer func() {
			if recover() != nil {
				f = &moduleFilter{} // a filter that failed to empty is never reused
			}
		}()
		f.end()
	}()
	t.mu.Lock()
	if len(t.free) >= keepSlots {
		f = nil // enough filters kept: this one's memory goes
	}
	t.slots[i].f = f
	t.free = append(t.free, i)
	t.mu.Unlock()
}

// The stream hooks behind their exports, in Go's types: the exports only
// convert, so a test drives the very code Envoy calls (filter/module's
// TestConformance).

// newFilterHook makes one stream's filter over x, with the filter config
// behind conf; a conf that is no live config leaves the filter without
// one, and it refuses the request. A panic is no filter (0): Envoy then
// calls on with a null pointer, which requestHeadersHook fails closed.
func newFilterHook(conf uintptr, x abi) uintptr { return openFilter(conf, x, 0) }

// openFilter is newFilterHook; a nil x binds Envoy's filter envoyFilter.
func openFilter(conf uintptr, x abi, envoyFilter uintptr) (h uintptr) {
	defer func() {
		if recover() != nil {
			h = 0
		}
	}()
	h, f := filters.open()
	defer func() {
		if h != 0 && recover() != nil {
			filters.close(h)
			h = 0
		}
	}()
	if x == nil {
		f.bindEnvoy(envoyFilter)
	} else {
		f.x = x
	}
	f.route = routeOf
	if c, ok := handleValue(conf).(*filterConfig); ok {
		f.conf = c
	}
	return h
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
	return requestHeadersEndHook(envoy, h, false)
}

// requestHeadersEndHook is requestHeadersHook told whether the request
// ends with its headers.
func requestHeadersEndHook(envoy func() abi, h uintptr, endStream bool) (st int32) {
	f := filterOf(h)
	if f == nil {
		(&moduleFilter{x: envoy()}).fail()
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.requestHeaders(endStream))
}

// The request body and trailers hooks of a stream with no filter stop:
// its request was failed closed.

func requestBodyHook(h uintptr, endStream bool) (st int32) {
	f := filterOf(h)
	if f == nil {
		return statusStopNoBuffer
	}
	defer guard(f, &st, statusStopNoBuffer)
	return int32(f.requestBody(endStream))
}

func requestTrailersHook(h uintptr) (st int32) {
	f := filterOf(h)
	if f == nil {
		return statusStopIteration
	}
	defer guard(f, &st, statusStopIteration)
	return int32(f.requestTrailers())
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
	filters.close(h)
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
