package reap

import (
	"fmt"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		line string
		want Proc
		bad  bool
	}{
		{line: "123 (sleep) S 1 123 123 0 -1 4194560 98 0 0 0", want: Proc{PID: 123, State: 'S', PPID: 1, PGID: 123, SID: 123}},
		{line: "77 (a) b) c (d) Z 5 6 7 8", want: Proc{PID: 77, State: 'Z', PPID: 5, PGID: 6, SID: 7}},
		{line: "9 () R 0 0 0", want: Proc{PID: 9, State: 'R'}},
		// a process being reaped: its group and session read -1
		{line: "4242 (true) X 0 -1 -1 0 -1", want: Proc{PID: 4242, State: 'X', PPID: 0, PGID: -1, SID: -1}},
		{line: "9 (x\n) 1 2 3) T 4 5 6 7", want: Proc{PID: 9, State: 'T', PPID: 4, PGID: 5, SID: 6}},
		{line: "", bad: true},
		{line: "123 sleep S 1 2 3", bad: true},
		{line: "x (sleep) S 1 2 3", bad: true},
		{line: "0 (sleep) S 1 2 3", bad: true},
		{line: "5 (sleep) S 1 2", bad: true},
		{line: "5 (sleep) SS 1 2 3", bad: true},
		{line: "5 (sleep) S 1 -2 3", bad: true},
		{line: "5 )sleep( S 1 2 3", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseStat([]byte(tt.line))
		if tt.bad {
			if err == nil {
				t.Errorf("ParseStat(%q) = %+v, want an error", tt.line, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", tt.line, got, err, tt.want)
		}
	}
}

// FuzzParseStat: a process names itself (comm) with any bytes; the fields
// after it must still be read right, and nothing panics.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("sleep"), 10, 1, 10, 10)
	f.Add([]byte(") S 1 2 3 ("), 5, 4, 3, 2)
	f.Add([]byte("a b\x00c"), 1, 0, 0, 0)
	f.Fuzz(func(t *testing.T, comm []byte, pid, ppid, pgid, sid int) {
		line := fmt.Sprintf("%d (%s) S %d %d %d 0 -1", pid, comm, ppid, pgid, sid)
		p, err := ParseStat([]byte(line))
		if pid <= 0 || ppid < -1 || pgid < -1 || sid < -1 {
			if err == nil && (p.PID <= 0 || p.PPID < -1 || p.PGID < -1 || p.SID < -1) {
				t.Fatalf("accepted %+v from %q", p, line)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseStat(%q): %v", line, err)
		}
		want := Proc{PID: pid, State: 'S', PPID: ppid, PGID: pgid, SID: sid}
		if p != want {
			t.Fatalf("ParseStat(%q) = %+v, want %+v", line, p, want)
		}
		// Any bytes at all: no panic.
		_, _ = ParseStat(comm)
	})
}
