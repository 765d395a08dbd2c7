package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkScrub/secrets=1-2         	    7000	    161147 ns/op	 407.00 MB/s
BenchmarkBaseline/bytes.Index-2    	  450000	      2599 ns/op	25215.00 MB/s
--- FAIL: BenchmarkBroken
PASS
`
	var rest bytes.Buffer
	rows, units, err := parse(strings.NewReader(in), &rest)
	if err != nil || len(rows) != 2 || strings.Join(units, ",") != "ns/op,MB/s" {
		t.Fatalf("rows %v units %v err %v", rows, units, err)
	}
	if rest.String() != "--- FAIL: BenchmarkBroken\n" {
		t.Fatalf("passed through %q", rest.String())
	}
	var out bytes.Buffer
	write(&out, "t", rows, units, &rows[1], "MB/s")
	want := `
### t

| benchmark | ns/op | MB/s | MB/s vs Baseline/bytes.Index |
| --- | --- | --- | --- |
| Scrub/secrets=1 | 161147 | 407 | 0.0161× |
| Baseline/bytes.Index | 2599 | 25215 | 1× |
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// go test -count N prints a benchmark N times: one row, the median of each
// unit, in the order of the first run.
func TestMedians(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]float64
	}{
		{"odd: the middle", "BenchmarkD-2 1 900 ns/op 0 allocs/op\nBenchmarkD-2 1 400 ns/op 0 allocs/op\nBenchmarkE-2 1 7 ns/op\nBenchmarkD-2 1 450 ns/op 2 allocs/op\n", map[string]float64{"ns/op": 450, "allocs/op": 0}},
		{"even: the middle two's mean", "BenchmarkD-2 1 900 ns/op\nBenchmarkD-2 1 400 ns/op\nBenchmarkE-2 1 7 ns/op\nBenchmarkD-2 1 450 ns/op\nBenchmarkD-2 1 500 ns/op\n", map[string]float64{"ns/op": 475}},
		{"one run: itself", "BenchmarkD-2 1 900 ns/op\nBenchmarkE-2 1 7 ns/op\n", map[string]float64{"ns/op": 900}},
	} {
		rows, _, err := parse(strings.NewReader(c.in), &bytes.Buffer{})
		if err != nil || len(rows) != 2 || rows[0].name != "D" || rows[1].name != "E" || rows[1].vals["ns/op"] != 7 {
			t.Fatalf("%s: rows %v err %v", c.name, rows, err)
		}
		if len(rows[0].vals) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, rows[0].vals, c.want)
		}
		for u, v := range c.want {
			if rows[0].vals[u] != v {
				t.Errorf("%s: %s %v, want %v", c.name, u, rows[0].vals[u], v)
			}
		}
	}
}

func TestGoals(t *testing.T) {
	rows := []row{
		{name: "Scrub/secrets=64", vals: map[string]float64{"MB/s": 1200}},
		{name: "Start/bare", vals: map[string]float64{"ns/op": 1000}},
		{name: "Start/confine", vals: map[string]float64{"ns/op": 3000}},
	}
	marks, err := checkGoals(rows, []string{
		"scrub|Scrub/secrets=64|MB/s|>=|1000",
		"confine|Start/confine|ns/op|<=|@Start/bare+1500|a bare exec is {Start/bare ns/op}, {Nothing ns/op}",
		"missing|Nothing|ns/op|<=|1",
		"met|Start/bare|ns/op|<=|2000|never shown when met",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, m := range marks {
		got = append(got, m.figure+"="+m.now+"/"+m.mark)
	}
	want := "scrub=1200 MB/s/pass confine=3.0 µs/short missing=not measured/short met=1.0 µs/pass"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(got, " "), want)
	}
	// A short row's limit has its references measured; a met row's is left out.
	if l := marks[1].limit; l != "a bare exec is 1.0 µs, (not measured)" {
		t.Fatalf("limit %q", l)
	}
	if marks[1].goal != "<= 2.5 µs (Start/bare+1500)" || marks[0].goal != ">= 1000 MB/s" {
		t.Fatalf("goals %q %q", marks[1].goal, marks[0].goal)
	}
	if marks[0].limit != "" || marks[3].limit != "" {
		t.Fatalf("a met row carries a limit: %q %q", marks[0].limit, marks[3].limit)
	}
	if _, err := checkGoals(rows, []string{"x|Start/bare|ns/op|<|1"}); err == nil {
		t.Fatal("an unknown OP passed")
	}
}
