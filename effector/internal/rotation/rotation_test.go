package rotation

import (
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/valuedir/valuedirtest"
)

const (
	v0 = "Qm7rT2vK9xLp4WzN8cYh3JdF"
	v1 = "Zr4Kq8Ws2Nt6Yb1Mx9Pc3Ve7"
)

// TestTakeSwapsScrubberFirst: a good set hands the new scrubber to the
// server before its values can be read, keeps the replaced value scrubbed
// under its name until Grace ends, and logs one ok line; a bad set
// changes nothing and logs its refusal once.
func TestTakeSwapsScrubberFirst(t *testing.T) {
	dir := t.TempDir()
	write := func(v string) {
		valuedirtest.Write(t, dir, map[string]string{"TOKEN": v + "\n"})
	}
	write(v0)
	now := time.Unix(1_800_000_000, 0)
	var lines []string
	s, err := New(Options{Dir: dir, Values: map[string][]byte{"TOKEN": []byte(v0)}, Grace: time.Minute,
		Log: func(kv ...string) { lines = append(lines, strings.Join(kv, " ")) }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var handed *scrub.Scrubber
	var seen []string // the value readable when each scrubber was handed over
	s.setHeld = func(sc *scrub.Scrubber) {
		v, _ := s.Value("TOKEN")
		seen = append(seen, string(v))
		handed = sc
	}
	take := func() { s.Take(s.Read()) }

	write(v1)
	take()
	if v, _ := s.Value("TOKEN"); string(v) != v1 || handed == nil || handed != s.Scrubber() || len(seen) != 1 || seen[0] != v0 {
		t.Fatal("the good set was not swapped in, scrubber first")
	}
	if handed.String(v0+" "+v1) != "[secret:TOKEN] [secret:TOKEN]" {
		t.Fatal("the replaced value is not scrubbed under its name")
	}
	for range 2 {
		write("password1234")
		take()
	}
	write("")
	take()
	if v, _ := s.Value("TOKEN"); string(v) != v1 {
		t.Fatal("a refused set changed the value")
	}
	want := []string{
		"action reload result ok secrets 1",
		"action reload result refused secret TOKEN reason guessable",
		"action reload result refused secret TOKEN reason empty",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
	now = now.Add(2 * time.Minute)
	if next := s.Expire(); !next.IsZero() || s.Scrubber().String(v0) != v0 || s.Scrubber().String(v1) != "[secret:TOKEN]" {
		t.Fatal("the replaced value outlived its window")
	}
}
