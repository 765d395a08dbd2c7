package module

import "testing"

func TestWorkerProcs(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		envSet bool
		want   int
	}{
		{"one worker", []string{"envoy", "-c", "e.json", "--concurrency", "1"}, false, 1},
		{"two workers, = form", []string{"envoy", "--concurrency=2", "-c", "e.json"}, false, 2},
		{"GOMAXPROCS set wins", []string{"envoy", "--concurrency", "1"}, true, 0},
		{"no flag: a worker per CPU", []string{"envoy", "-c", "e.json"}, false, 0},
		{"flag last without value", []string{"envoy", "--concurrency"}, false, 0},
		{"not a number", []string{"envoy", "--concurrency", "x"}, false, 0},
		{"zero", []string{"envoy", "--concurrency", "0"}, false, 0},
		{"huge is capped", []string{"envoy", "--concurrency", "100000"}, false, 256},
	} {
		if got := workerProcs(c.args, c.envSet); got != c.want {
			t.Errorf("%s: workerProcs(%q, %v) = %d, want %d", c.name, c.args, c.envSet, got, c.want)
		}
	}
}
