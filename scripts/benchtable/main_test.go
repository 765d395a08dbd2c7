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
