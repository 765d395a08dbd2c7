package benchgoal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintMarksAndAppends(t *testing.T) {
	f := filepath.Join(t.TempDir(), "goals")
	t.Setenv("JR2_BENCH_GOALS", f)
	atLeast := func(v float64) bool { return v >= 0.5 }
	rows := []Row{
		{Figure: "met", Value: 0.6, OK: atLeast, Want: "≥ 0.5×", Format: "%.2f×", Limit: "hidden when met"},
		{Figure: "short", Value: 0.4, OK: atLeast, Want: "≥ 0.5×", Format: "%.2f×", Limit: "the floor"},
		{Figure: "unmeasured", Value: -1, OK: atLeast, Want: "≥ 0.5×", Format: "%.2f×"},
		{Figure: "shown", Value: 0.7, Want: "(measured)", Format: "%.2f×"},
	}
	var out bytes.Buffer
	if err := Print(&out, rows); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	want := "met\t0.60×\t≥ 0.5×\tpass\t\n" +
		"short\t0.40×\t≥ 0.5×\tshort\tthe floor\n" +
		"unmeasured\tnot measured\t≥ 0.5×\tshort\t\n" +
		"shown\t0.70×\t(measured)\t-\t\n"
	if string(data) != want {
		t.Fatalf("appended %q, want %q", data, want)
	}
	if strings.Contains(out.String(), "hidden when met") || !strings.Contains(out.String(), "the floor") {
		t.Fatalf("printed:\n%s", out.String())
	}
}
