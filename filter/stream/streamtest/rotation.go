package streamtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// RotatedValue is the GitHub token's value after Rotation's rotation.
const RotatedValue = "ghp_STREAMTEST_rotated_Xk3Lq9Vb7Mw2"

// Rotation is the values' reload through an adapter: a stream
// that began before a rotation completes with the engine it began with —
// the old value sent, its answer scrubbed by its own scrubber — while the
// streams that begin after carry the new value, and an answer that still
// echoes the old value is scrubbed under the secret's label (the grace
// window). The reload runs on Go's side: the adapter only reads the
// pointer when a stream begins.
func Rotation(t *testing.T, d Driver) {
	dir := t.TempDir()
	pod := d.Pod(t, Config(t, dir))
	req := H(":method", "GET", ":path", "/user", ":authority", "api.github.com", ":scheme", "https", "authorization", bearer(GitHubStandIn))
	const target = "api.github.com:443"

	old := pod.Stream(t, pluginconf.RoleIntercept, target)
	out, stop := old.RequestHeaders(append([]filter.Header(nil), req...))
	if stop || get(out, "authorization") != "Bearer "+GitHubValue {
		t.Fatalf("before the rotation: stop %v, the value sent is not the first one", stop)
	}

	tmp := filepath.Join(dir, ".GITHUB_TOKEN.new")
	if err := os.WriteFile(tmp, []byte(RotatedValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "GITHUB_TOKEN")); err != nil {
		t.Fatal(err)
	}
	// Poll with new streams until one carries the new value; the bound
	// only stops a hung test.
	var sent string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		e := exchange(t, pod.Stream(t, pluginconf.RoleIntercept, target), req, nil)
		if sent = get(e.Forwarded, "authorization"); sent == "Bearer "+RotatedValue {
			break
		}
		if sent != "Bearer "+GitHubValue {
			t.Fatal("a stream sent neither the old value nor the new one whole")
		}
	}
	if sent != "Bearer "+RotatedValue {
		t.Fatal("no stream carried the rotated value")
	}

	// The stream that began before completes with its own engine.
	var e Exchange
	through(t, old, &e, &Answer{Status: "200", Headers: H("content-type", "text/plain"), Chunks: []string{"you sent " + GitHubValue[:10], GitHubValue[10:] + " ok"}})
	old.Destroy()
	if e.Status != 200 || e.Body() != "you sent [secret:GITHUB_TOKEN] ok" {
		t.Fatalf("the stream begun before the rotation: status %d, body %q", e.Status, e.Body())
	}

	// A stream begun after: the old value echoed is still scrubbed.
	e = exchange(t, pod.Stream(t, pluginconf.RoleIntercept, target), req, &Answer{Status: "200", Headers: H("x-echo", GitHubValue), Chunks: []string{"late " + GitHubValue + " and " + RotatedValue}})
	if got := e.Body(); got != "late [secret:GITHUB_TOKEN] and [secret:GITHUB_TOKEN]" || get(e.Headers, "x-echo") != "[secret:GITHUB_TOKEN]" {
		t.Fatalf("after the rotation: body %q, header %q", got, get(e.Headers, "x-echo"))
	}
	if strings.Contains(Lines(e.Forwarded), GitHubValue) {
		t.Fatal("the old value was sent after the rotation")
	}
}
