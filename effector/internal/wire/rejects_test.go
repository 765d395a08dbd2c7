package wire

// reject is one shape a decoder must refuse: reject.<name>.json.
type reject struct {
	name    string
	decoder string // "start" (default), "state" or "error"
	body    string
	want    string // the reason says this
}

const okHTTP = `"http":{"method":"GET","url":[{"text":"https://api.example.com/"}]}`

func httpWith(inner string) string {
	return `{"kind":"http","http":{"method":"GET","url":[{"text":"https://api.example.com/v1/"}]` + inner + `}}`
}

func header(name string) string {
	return httpWith(`,"headers":{"` + name + `":[{"text":"x"}]}`)
}

const okSlot = `{"name":"app","url":"ssh://git@git.example.com/org/app.git","credentials":"example"}`

func pushWith(slot, inner string) string {
	return `{"kind":"push","push":{"slot":` + slot + `,"ref":"refs/heads/jr2/fix"` + inner + `}}`
}

func slotURL(u string) string {
	return `{"name":"app","url":"` + u + `","credentials":"example"}`
}

func pushRef(ref string) string {
	return `{"kind":"push","push":{"slot":` + okSlot + `,"ref":"` + ref + `"}}`
}

var rejects = []reject{
	{name: "not-json", body: `{"kind":`, want: "not one JSON value"},
	{name: "two-values", body: `{"kind":"http",` + okHTTP + `} {}`, want: "more than one JSON value"},
	{name: "not-object", body: `[]`, want: "want an object"},
	{name: "unknown-field", body: `{"kind":"http","retries":3,` + okHTTP + `}`, want: "retries: unknown field"},
	{name: "field-in-other-case", body: `{"Kind":"http",` + okHTTP + `}`, want: "Kind: unknown field"},
	{name: "field-twice", body: `{"kind":"http","kind":"http",` + okHTTP + `}`, want: "kind: given twice"},
	{name: "kind-missing", body: `{` + okHTTP + `}`, want: "kind: required"},
	{name: "kind-unknown", body: `{"kind":"dispatch",` + okHTTP + `}`, want: "not a kind"},
	{name: "push-missing", body: `{"kind":"push"}`, want: "push: required"},
	{name: "push-and-http", body: `{"kind":"push",` + okHTTP + `,"push":{}}`, want: "http: not allowed"},
	{name: "push-unknown-field", body: pushWith(okSlot, `,"force":true`), want: "push.force: unknown field"},
	{name: "push-slot-missing", body: `{"kind":"push","push":{"ref":"refs/heads/x"}}`, want: "push.slot: required"},
	{name: "push-slot-string", body: pushWith(`"app"`, ``), want: "push.slot: want an object"},
	{name: "push-slot-name-bad", body: pushWith(`{"name":"a/b","url":"ssh://git@git.example.com/org/app.git","credentials":"example"}`, ``), want: "not a Repo Slot name"},
	{name: "push-slot-credentials-dotdot", body: pushWith(`{"name":"app","url":"ssh://git@git.example.com/org/app.git","credentials":".."}`, ``), want: "not a git.credentials entry name"},
	{name: "push-slot-credentials-missing", body: pushWith(`{"name":"app","url":"ssh://git@git.example.com/org/app.git"}`, ``), want: "push.slot.credentials: required"},
	{name: "push-url-file", body: pushWith(slotURL("file:///work/other.git"), ``), want: "a scheme this Effector does not push to"},
	{name: "push-url-http", body: pushWith(slotURL("http://git.example.com/org/app.git"), ``), want: "a scheme this Effector does not push to"},
	{name: "push-url-local-path", body: pushWith(slotURL("/srv/git/app.git"), ``), want: "not a url git pushes"},
	{name: "push-url-helper", body: pushWith(slotURL("ext::sh -c touch% /tmp/x"), ``), want: "holds a space"},
	{name: "push-url-helper-no-space", body: pushWith(slotURL("fd::17"), ``), want: "transport helper"},
	{name: "push-url-https-user", body: pushWith(slotURL("https://x-access-token:T0KEN@git.example.com/org/app.git"), ``), want: "names a user in an https url"},
	{name: "push-url-ssh-dash-host", body: pushWith(slotURL("ssh://-oProxyCommand=touch/org/app.git"), ``), want: "not a host name"},
	{name: "push-url-scp-dash-user", body: pushWith(slotURL("-oProxyCommand=x@git.example.com:org/app.git"), ``), want: "the ssh user"},
	{name: "push-url-query", body: pushWith(slotURL("https://git.example.com/org/app.git?service=x"), ``), want: "not a url with a host and a path"},
	{name: "push-url-no-path", body: pushWith(slotURL("https://git.example.com/"), ``), want: "names no repository path"},
	{name: "push-ref-missing", body: `{"kind":"push","push":{"slot":` + okSlot + `}}`, want: "push.ref: required"},
	{name: "push-ref-short", body: pushRef("main"), want: "not a full ref"},
	{name: "push-ref-dotdot", body: pushRef("refs/heads/a..b"), want: "not a ref git accepts"},
	{name: "push-ref-lock", body: pushRef("refs/heads/x.lock"), want: "ends with .lock"},
	{name: "push-ref-colon", body: pushRef("refs/heads/a:refs/heads/b"), want: "not a ref git accepts"},
	{name: "push-ref-space", body: pushRef("refs/heads/a b"), want: "not a ref git accepts"},
	{name: "push-pin-short", body: pushWith(okSlot, `,"pin":"0123abc"`), want: "push.pin: \"0123abc\" is not a commit sha"},
	{name: "push-pin-uppercase", body: pushWith(okSlot, `,"pin":"0123456789ABCDEF0123456789abcdef01234567"`), want: "not a commit sha"},
	{name: "push-pin-null", body: pushWith(okSlot, `,"pin":null`), want: "must not be null"},
	{name: "http-missing", body: `{"kind":"http"}`, want: "http: required"},
	{name: "http-and-command", body: `{"kind":"http",` + okHTTP + `,"command":{"argv":["true"]}}`, want: "command: not allowed"},
	{name: "null-field", body: `{"kind":"http","timeoutMs":null,` + okHTTP + `}`, want: "timeoutMs: must not be null"},
	{name: "timeout-zero", body: `{"kind":"http","timeoutMs":0,` + okHTTP + `}`, want: "out of range"},
	{name: "timeout-string", body: `{"kind":"http","timeoutMs":"30000",` + okHTTP + `}`, want: "whole number"},
	{name: "timeout-fraction", body: `{"kind":"http","timeoutMs":1.5,` + okHTTP + `}`, want: "whole number"},
	{name: "method-lowercase", body: `{"kind":"http","http":{"method":"get","url":[{"text":"https://a.example/"}]}}`, want: "http.method"},
	{name: "method-trace", body: `{"kind":"http","http":{"method":"TRACE","url":[{"text":"https://a.example/"}]}}`, want: "http.method"},
	{name: "method-missing", body: `{"kind":"http","http":{"url":[{"text":"https://a.example/"}]}}`, want: "http.method: required"},
	{name: "url-missing", body: `{"kind":"http","http":{"method":"GET"}}`, want: "http.url: required"},
	{name: "url-empty", body: `{"kind":"http","http":{"method":"GET","url":[]}}`, want: "at least one part"},
	{name: "url-string", body: `{"kind":"http","http":{"method":"GET","url":"https://a.example/"}}`, want: "want an array"},
	{name: "part-two-keys", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/","secret":"T0KEN"}]}}`, want: "exactly one"},
	{name: "part-empty", body: `{"kind":"http","http":{"method":"GET","url":[{}]}}`, want: "exactly one"},
	{name: "part-unknown-key", body: `{"kind":"http","http":{"method":"GET","url":[{"value":"x"}]}}`, want: "value: unknown field"},
	{name: "part-secret-path-in-http", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/"},{"secretPath":"T0KEN"}]}}`, want: "for commands only"},
	{name: "part-secret-bad-name", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/"},{"secret":"a/b"}]}}`, want: "not a secret name"},
	{name: "url-secret-after-query", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/v1?token="},{"secret":"T0KEN"}]}}`, want: "after '?' or '#'"},
	{name: "url-secret-after-fragment", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/v1#"},{"secret":"T0KEN"}]}}`, want: "after '?' or '#'"},
	{name: "url-secret-in-host", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://"},{"secret":"T0KEN"},{"text":".example.com/"}]}}`, want: "only in the url's path"},
	{name: "url-secret-after-host", body: `{"kind":"http","http":{"method":"GET","url":[{"text":"https://api.example.com"},{"secret":"T0KEN"}]}}`, want: "only in the url's path"},
	{name: "url-secret-first", body: `{"kind":"http","http":{"method":"GET","url":[{"secret":"T0KEN"}]}}`, want: "only in the url's path"},
	{name: "path-not-strings", body: httpWith(`,"path":[1]`), want: "http.path[0]: want a string"},
	{name: "header-host", body: header("host"), want: "frames or routes"},
	{name: "header-content-length", body: header("content-length"), want: "frames or routes"},
	{name: "header-transfer-encoding", body: header("transfer-encoding"), want: "frames or routes"},
	{name: "header-connection", body: header("connection"), want: "frames or routes"},
	{name: "header-upgrade", body: header("upgrade"), want: "frames or routes"},
	{name: "header-te", body: header("te"), want: "frames or routes"},
	{name: "header-trailer", body: header("trailer"), want: "frames or routes"},
	{name: "header-keep-alive", body: header("keep-alive"), want: "frames or routes"},
	{name: "header-proxy-authorization", body: header("proxy-authorization"), want: "frames or routes"},
	{name: "header-proxy-connection", body: header("proxy-connection"), want: "frames or routes"},
	{name: "header-Host-capitalized", body: header("Host"), want: "frames or routes"},
	{name: "header-bad-name", body: header("x y"), want: "not a header name"},
	{name: "header-twice-in-two-cases", body: httpWith(`,"headers":{"accept":[{"text":"a"}],"Accept":[{"text":"b"}]}`), want: "give each name once"},
	{name: "header-value-not-parts", body: httpWith(`,"headers":{"accept":"text/plain"}`), want: "want an array"},
	{name: "auth-type-unknown", body: httpWith(`,"auth":{"type":"digest","secret":"T0KEN"}`), want: "not an auth type"},
	{name: "auth-basic-no-user", body: httpWith(`,"auth":{"type":"basic","secret":"T0KEN"}`), want: "user: required"},
	{name: "auth-basic-user-colon", body: httpWith(`,"auth":{"type":"basic","secret":"T0KEN","user":"a:b"}`), want: "may not hold ':'"},
	{name: "auth-bearer-with-user", body: httpWith(`,"auth":{"type":"bearer","secret":"T0KEN","user":"u"}`), want: "only for type basic"},
	{name: "auth-no-secret", body: httpWith(`,"auth":{"type":"bearer"}`), want: "secret: required"},
	{name: "auth-and-authorization-header", body: httpWith(`,"headers":{"Authorization":[{"text":"x"}]},"auth":{"type":"bearer","secret":"T0KEN"}`), want: "give one or the other"},
	{name: "body-two-kinds", body: httpWith(`,"body":{"text":"a","json":{}}`), want: "exactly one of json, text, file"},
	{name: "body-empty", body: httpWith(`,"body":{}`), want: "exactly one of json, text, file"},
	{name: "body-json-content-type", body: httpWith(`,"body":{"json":{},"contentType":"text/plain"}`), want: "application/json"},
	{name: "body-json-key-twice", body: httpWith(`,"body":{"json":{"a":1,"a":2}}`), want: "twice"},
	{name: "body-content-type-twice", body: httpWith(`,"headers":{"content-type":[{"text":"a/b"}]},"body":{"text":"x","contentType":"text/plain"}`), want: "give one or the other"},
	{name: "body-file-empty", body: httpWith(`,"body":{"file":""}`), want: "name a file"},
	{name: "max-response-zero", body: httpWith(`,"maxResponseBytes":0`), want: "out of range"},
	{name: "max-response-huge", body: httpWith(`,"maxResponseBytes":1099511627776`), want: "out of range"},
	{name: "command-argv-empty", body: `{"kind":"command","command":{"argv":[]}}`, want: "at least the program"},
	{name: "command-env-bad-name", body: `{"kind":"command","command":{"argv":["true"],"env":{"A-B":[{"text":"x"}]}}}`, want: "not an environment name"},
	{name: "command-unknown-field", body: `{"kind":"command","command":{"argv":["true"],"shell":true}}`, want: "command.shell: unknown field"},

	{name: "state-unknown-field", decoder: "state", body: `{"state":"running","replica":{"name":"r","address":"10.0.0.1:8082"},"id":"e1"}`, want: "id: unknown field"},
	{name: "state-settled-no-outcome", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"10.0.0.1:8082"}}`, want: "outcome: required"},
	{name: "state-running-with-outcome", decoder: "state", body: `{"state":"running","replica":{"name":"r","address":"10.0.0.1:8082"},"outcome":{"kind":"refused","reason":"x"}}`, want: "only with state settled"},
	{name: "state-no-replica", decoder: "state", body: `{"state":"running"}`, want: "replica: required"},
	{name: "outcome-unknown-kind", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"a"},"outcome":{"kind":"maybe"}}`, want: "not an outcome kind"},
	{name: "outcome-field-of-another-kind", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"a"},"outcome":{"kind":"refused","reason":"x","status":200}}`, want: "status: unknown field"},
	{name: "outcome-response-no-size", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"a"},"outcome":{"kind":"response","status":200,"headers":{},"contentType":"","truncated":false}}`, want: "size: required"},
	{name: "outcome-exited-neither", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"a"},"outcome":{"kind":"exited","stdout":"","stderr":"","truncated":false,"dirty":false}}`, want: "neither"},
	{name: "outcome-rejected-stage", decoder: "state", body: `{"state":"settled","replica":{"name":"r","address":"a"},"outcome":{"kind":"rejected","stage":"fetch","reason":"x"}}`, want: "not a stage"},
	{name: "error-no-replica", decoder: "error", body: `{"error":"stopping"}`, want: "replica: required"},
	{name: "error-unknown-field", decoder: "error", body: `{"error":"stopping","replica":{"name":"r","address":"a"},"retryAfter":5}`, want: "retryAfter: unknown field"},
}
