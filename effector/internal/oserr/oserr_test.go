package oserr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWhyDropsThePath(t *testing.T) {
	dir := t.TempDir()
	_, missing := os.Open(filepath.Join(dir, "missing"))
	_, isDir := os.ReadFile(dir)
	for err, want := range map[error]string{missing: "no such file", isDir: "is a directory"} {
		got := Why(err)
		if !strings.Contains(got, want) || strings.Contains(got, dir) {
			t.Errorf("Why(%v) = %q", err, got)
		}
	}
}
