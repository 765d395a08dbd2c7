package contract

import "strings"

// DefaultHeaders are the headers a held secret may ride when its entry
// names none.
var DefaultHeaders = []string{"authorization", "x-api-key", "x-goog-api-key", "api-key"}

// FramingHeaders are the header names that frame or route a request. A
// credential never rides one: a value there would change where or how the
// request goes. Every "proxy-*" name and every ":pseudo" name is one too
// (see Frames). The manifest (R6) and a run's policy refuse them.
var FramingHeaders = []string{
	"host", "content-length", "transfer-encoding", "connection", "upgrade",
	"te", "trailer", "keep-alive", "expect", "http2-settings",
}

// Frames reports whether the header name (any case) frames or routes a
// request.
func Frames(name string) bool {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "proxy-") || strings.HasPrefix(n, ":") {
		return true
	}
	for _, f := range FramingHeaders {
		if n == f {
			return true
		}
	}
	return false
}

// ProxyTrustVars are the proxy and trust variables the Custodian's render
// and a contained run set themselves: a held secret may not be named one
// (R2), because a tool reads each to decide where a request goes or whom it
// trusts. docs/harness-env.md has the table: which tool reads which, and
// which ones render sets. A name that starts with one of
// ProxyTrustPrefixes is one too.
var ProxyTrustVars = []string{
	// proxies
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
	"WS_PROXY", "WSS_PROXY", "GRPC_PROXY", "NO_GRPC_PROXY",
	"NODE_USE_ENV_PROXY", "NPM_CONFIG_PROXY", "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_NOPROXY",
	"GLOBAL_AGENT_HTTP_PROXY", "GLOBAL_AGENT_HTTPS_PROXY", "GLOBAL_AGENT_NO_PROXY",
	"PIP_PROXY", "CARGO_HTTP_PROXY",
	"CLOUDSDK_PROXY_TYPE", "CLOUDSDK_PROXY_ADDRESS", "CLOUDSDK_PROXY_PORT",
	"CLOUDSDK_PROXY_USERNAME", "CLOUDSDK_PROXY_PASSWORD",
	// trust
	"SSL_CERT_FILE", "SSL_CERT_DIR", "OPENSSL_CONF", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"CURL_HOME", "WGETRC", "SYSTEM_WGETRC",
	"NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_OPTIONS",
	"NPM_CONFIG_CAFILE", "NPM_CONFIG_CA", "NPM_CONFIG_STRICT_SSL",
	"NPM_CONFIG_USERCONFIG", "NPM_CONFIG_GLOBALCONFIG",
	"GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY",
	"AWS_CA_BUNDLE", "PIP_CERT", "PIP_TRUSTED_HOST", "PIP_CONFIG_FILE", "PYTHONHTTPSVERIFY",
	"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "DENO_CERT", "DENO_TLS_CA_STORE",
	"CARGO_HTTP_CAINFO", "CARGO_HTTP_CHECK_REVOKE",
	"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "CLOUDSDK_AUTH_DISABLE_SSL_VALIDATION",
	// git's configuration from the environment: it sets git's proxy, its
	// trust and the credential helper render writes (GIT_CONFIG_COUNT)
	"GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
	"GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
}

// ProxyTrustPrefixes begin the names of numbered proxy or trust variables
// (GIT_CONFIG_KEY_0, GIT_CONFIG_VALUE_0).
var ProxyTrustPrefixes = []string{"GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}

// ProxyOrTrustVar reports whether name (any case) is one of ProxyTrustVars
// or starts with one of ProxyTrustPrefixes.
func ProxyOrTrustVar(name string) bool {
	u := strings.ToUpper(name)
	for _, v := range ProxyTrustVars {
		if u == v {
			return true
		}
	}
	for _, p := range ProxyTrustPrefixes {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// SigningVars are the variables of signing credentials: a key that signs a
// request (AWS SigV4) or a key file that signs a token request (a Google
// service account). Such a value never rides a request, so no stand-in of
// it can be swapped; a held secret may not be named one (R2), and the
// refusal points at the Effector, which runs the tool that signs with the
// value in its environment.
var SigningVars = []string{
	"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID",
	"GOOGLE_APPLICATION_CREDENTIALS",
}

// SigningVar reports whether name (any case) is one of SigningVars.
func SigningVar(name string) bool {
	u := strings.ToUpper(name)
	for _, v := range SigningVars {
		if u == v {
			return true
		}
	}
	return false
}

// SigningHeader reports whether the header name (any case) is signed by
// the request's own signature: every x-amz-* header is under SigV4's, so
// a swapped value there breaks the request (and x-amz-security-token is
// itself a signing credential's part).
func SigningHeader(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), "x-amz-")
}
