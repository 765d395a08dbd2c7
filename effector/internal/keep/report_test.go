package keep

import "testing"

func TestReportLines(t *testing.T) {
	tests := []struct {
		r    Report
		line string
	}{
		{Report{Code: 0}, "exited code=0"},
		{Report{Code: 42}, "exited code=42"},
		{Report{Code: -1, Signal: "SIGTERM"}, "exited signal=SIGTERM"},
		{Report{Code: -1, Signal: "SIG34"}, "exited signal=SIG34"},
		{Report{Code: -1, Failed: "starting the child: no such file"}, "failed starting the child: no such file"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.line {
			t.Errorf("%+v renders %q, want %q", tt.r, got, tt.line)
		}
		back, err := ParseReport(tt.line + "\n")
		if err != nil || back != tt.r {
			t.Errorf("ParseReport(%q) = %+v, %v; want %+v", tt.line, back, err, tt.r)
		}
	}
	if got := (Report{Code: -1, Failed: "a\nexited code=0"}).String(); got != "failed a exited code=0" {
		t.Errorf("a reason's newline survived: %q", got)
	}
	for _, bad := range []string{"", "exited code=", "exited code=256", "exited code=-1", "exited code=07",
		"exited signal=", "exited signal=TERM", "exited signal=SIGterm", "failed ", "ok", "exited code=0\nx"} {
		if r, err := ParseReport(bad); err == nil {
			t.Errorf("ParseReport(%q) = %+v, want an error", bad, r)
		}
	}
}

// FuzzParseReport: whatever reaches the Effector on the report pipe, a
// parsed report renders back to the same line, and nothing panics.
func FuzzParseReport(f *testing.F) {
	for _, s := range []string{"exited code=0\n", "exited signal=SIGKILL", "failed x", "exited code=999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseReport(line)
		if err != nil {
			return
		}
		kinds := 0
		if r.Signal != "" {
			kinds++
		}
		if r.Failed != "" {
			kinds++
		}
		if kinds > 1 || (r.Code < 0) != (kinds == 1) {
			t.Fatalf("ParseReport(%q) = %+v: not one of code, signal, failed", line, r)
		}
		again, err := ParseReport(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseReport(%q) = %+v renders %q, which parses as %+v, %v", line, r, r.String(), again, err)
		}
	})
}
