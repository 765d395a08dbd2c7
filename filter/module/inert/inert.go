// Package inert exports the dynamic-module hooks a module that makes no
// callouts, opens no streams, schedules nothing and ignores watermarks
// still must export, because Envoy resolves every hook when it loads a
// module. Both of the project's modules link it: the Custodian's
// (filter/module) and the bench's (internal/testkit/benchnoop).
//
// Invariant: every hook here does nothing and returns nothing; none is
// ever reached while the importing module makes no callout, stream or
// schedule.
package inert

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import "unsafe"

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
