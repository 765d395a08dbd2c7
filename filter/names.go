package filter

import "strings"

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
// trusts.
var ProxyTrustVars = []string{
	// proxies
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
	"NODE_USE_ENV_PROXY", "NPM_CONFIG_PROXY", "NPM_CONFIG_HTTPS_PROXY",
	"GLOBAL_AGENT_HTTP_PROXY", "GLOBAL_AGENT_HTTPS_PROXY", "GLOBAL_AGENT_NO_PROXY",
	// trust
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_OPTIONS",
	"GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY",
	"AWS_CA_BUNDLE", "PIP_CERT", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
}

// ProxyOrTrustVar reports whether name (any case) is one of ProxyTrustVars.
func ProxyOrTrustVar(name string) bool {
	u := strings.ToUpper(name)
	for _, v := range ProxyTrustVars {
		if u == v {
			return true
		}
	}
	return false
}
