package imagestest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/images"
)

// TestFindNamesTheFix: with no index, an index of another description, an
// image the index lacks or a missing tarball, find says what to run.
func TestFindNamesTheFix(t *testing.T) {
	desc, err := os.ReadFile("../../../images/images.json")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "images", images.File), desc, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(root, "images"))
	dir := images.CacheDir(root)
	write := func(ix string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, images.IndexFile), []byte(ix), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := images.DescriptionHash(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		index string // "" writes none
		names []string
		want  string
	}{
		{"", nil, "has no index.json; run `make images`"},
		{`{"description":"0","images":{},"omitted":{},"debs":{},"sources":{}}`, nil, "were built from another images/images.json; run `make images`"},
		{`{"description":"` + sum + `","images":{},"omitted":{},"debs":{},"sources":{}}`, []string{"agent"}, "image agent is not in"},
		{`{"description":"` + sum + `","images":{"agent":{"ref":"jr2.dev/agent:0","tar":"agent.tar","config":"sha256:0"}},"omitted":{},"debs":{},"sources":{}}`, []string{"agent"}, "image agent: no tarball"},
		{`{"description":"` + sum + `","images":{},"omitted":{},"debs":{},"sources":{}}`, []string{"nginx"}, `no image "nginx" is described`},
	} {
		if tc.index != "" {
			write(tc.index)
		}
		_, _, err := find(tc.names)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("index %s: %v; want %q", tc.index, err, tc.want)
		}
	}
	write(`{"description":"` + sum + `","images":{},"omitted":{"custodian-envoy":"no core Envoy"},"debs":{},"sources":{}}`)
	if _, omitted, err := find([]string{"custodian-envoy"}); err != nil || !strings.Contains(omitted, "image custodian-envoy was not built: no core Envoy") {
		t.Errorf("an omitted image: %q, %v", omitted, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(`{"description":"` + sum + `","images":{"agent":{"ref":"jr2.dev/agent:0","tar":"agent.tar","config":"sha256:0"}},"omitted":{},"debs":{},"sources":{}}`)
	m, _, err := find([]string{"agent"})
	if err != nil || m["agent"].Tar != filepath.Join(dir, "agent.tar") || m["agent"].Ref != "jr2.dev/agent:0" {
		t.Errorf("find agent: %v, %v", m, err)
	}
}
