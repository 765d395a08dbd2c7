package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// writerEnv makes the test binary a bundle writer for TestKillMidWay.
const writerEnv = "JR2_BUNDLE_TEST_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(writeForever(path))
	}
	os.Exit(m.Run())
}

// writeForever appends records, syncing each and printing its seq once it
// is durable, until killed.
func writeForever(path string) int {
	w, err := Create(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	body := strings.Repeat("chunk ", 2000) // ~12 KiB: a kill can land mid-write
	for i := 0; ; i++ {
		seq, err := w.Append(KindHTTPResponse, map[string]any{"chunk": i, "body": body})
		if err == nil {
			err = w.Sync()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(seq)
	}
}

// clock returns a fixed clock that ticks 1.5 ms per call.
func clock() func() time.Time {
	t := time.Date(2026, 7, 14, 9, 30, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(1500 * time.Microsecond)
		return t
	}
}

// sample writes a small run's records, sealed, and returns the bytes.
func sample(t *testing.T) []byte {
	t.Helper()
	b := sampleBytes()
	if b == nil {
		t.Fatal("could not write the sample bundle")
	}
	return b
}

func sampleBytes() []byte {
	var buf bytes.Buffer
	w := New(&buf, Options{Now: clock()})
	for _, r := range []struct {
		kind   string
		fields any
	}{
		{KindRunStart, map[string]any{"argv": []string{"curl", "https://evil.example/"}, "mode": "live"}},
		{KindPolicy, map[string]string{"hash": strings.Repeat("ab", 32)}},
		{KindEnv, map[string][]string{"names": {"EXAMPLE_TOKEN", "PATH"}}},
		{KindDNSQuery, map[string]any{"name": "evil.example", "type": "A"}},
		{KindDNSDecision, map[string]any{"name": "evil.example", "answer": "10.231.0.1"}},
		{KindEgressAttempt, map[string]any{"host": "evil.example", "port": 443, "via": "sni"}},
		{KindEgressDecision, map[string]any{"host": "evil.example", "port": 443, "decision": "deny", "rule": "default-deny"}},
		{KindHTTPResponse, map[string]any{"chunk": 0, "body": "<html>ünïcode & a long body " + strings.Repeat("x", 120) + "</html>"}},
		{KindRunEnd, map[string]any{"exit": 7}},
	} {
		if _, err := w.Append(r.kind, r.fields); err != nil {
			return nil
		}
	}
	if err := w.Seal(); err != nil {
		return nil
	}
	return buf.Bytes()
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is meant)\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

func verifyBytes(t *testing.T, b []byte) Result {
	t.Helper()
	res, err := VerifyReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWriterBytes(t *testing.T) {
	b := sample(t)
	golden(t, "sample.jsonl", b)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10", len(lines))
	}
	if !strings.HasPrefix(lines[0], `{"seq":1,"time":"2026-07-14T09:30:00.0015Z","kind":"run-start","prev":"`+Genesis+`","argv":`) {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[9], `"kind":"seal"`) || !strings.Contains(lines[9], `"records":9,"seal":"`) {
		t.Errorf("seal line: %s", lines[9])
	}
	if res := verifyBytes(t, b); res != (Result{Status: Verified, Records: 10}) || res.String() != "VERIFIED" || res.ExitCode() != 0 {
		t.Errorf("Verify = %+v %q", res, res)
	}
}

// TestEveryFlipIsTampered flips each byte of a sealed bundle, three ways:
// every result is TAMPERED and names the record holding the byte.
func TestEveryFlipIsTampered(t *testing.T) {
	b := sample(t)
	for i := range b {
		record := uint64(bytes.Count(b[:i], []byte("\n")) + 1)
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= mask
			res := verifyBytes(t, c)
			if res.Status != Tampered || res.Record != record {
				t.Fatalf("byte %d (%q^%#x, record %d): %s; want TAMPERED (record %d)", i, b[i], mask, record, res, record)
			}
			if res.ExitCode() != 4 {
				t.Fatalf("exit %d, want 4", res.ExitCode())
			}
		}
	}
}

// TestEveryCutIsTruncated cuts a sealed bundle at every length: each prefix
// is TRUNCATED with a prefix of the complete lines it holds.
func TestEveryCutIsTruncated(t *testing.T) {
	b := sample(t)
	for n := 0; n < len(b); n++ {
		res := verifyBytes(t, b[:n])
		want := Result{Status: Truncated, Records: uint64(bytes.Count(b[:n], []byte("\n")))}
		if res != want {
			t.Fatalf("cut at %d: %s; want %s", n, res, want)
		}
	}
	if res := verifyBytes(t, nil); res.String() != "TRUNCATED (verifiable prefix of 0 records)" || res.ExitCode() != 3 {
		t.Errorf("empty: %s exit %d", res, res.ExitCode())
	}
}

func TestEdits(t *testing.T) {
	b := sample(t)
	lines := bytes.SplitAfter(b, []byte("\n"))[:10]
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	unsealed := join(lines[:9]...)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"line after the seal", join(append(lines[:10:10], lines[3])...), "TAMPERED (record 11)"},
		{"bytes after the seal", append(bytes.Clone(b), "{\"seq\":11"...), "TAMPERED (record 11)"},
		{"line deleted", join(append(append([][]byte{}, lines[:4]...), lines[5:]...)...), "TAMPERED (record 5)"},
		{"lines swapped", join(lines[0], lines[2], lines[1]), "TAMPERED (record 2)"},
		{"garbage tail", append(bytes.Clone(unsealed), "not json"...), "TAMPERED (record 10)"},
		{"two objects on the torn line", append(bytes.Clone(unsealed), `{"seq":10}{"seq":`...), "TAMPERED (record 10)"},
		{"NUL tail", append(bytes.Clone(unsealed), 0, 0, 0), "TAMPERED (record 10)"},
		{"unsealed", unsealed, "TRUNCATED (verifiable prefix of 9 records)"},
		{"torn line", append(bytes.Clone(unsealed), lines[9][:40]...), "TRUNCATED (verifiable prefix of 9 records)"},
		{"seal without its newline", b[:len(b)-1], "TRUNCATED (verifiable prefix of 9 records)"},
		{"first line only", lines[0], "TRUNCATED (verifiable prefix of 1 records)"},
	} {
		if got := verifyBytes(t, tc.b).String(); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
}

// TestSecretNeverWritten: a record the guard flags is refused, the error
// does not carry it, the file never holds it, and the chain goes on intact.
func TestSecretNeverWritten(t *testing.T) {
	const sentinel = "sk-ant-oat01-SENTINEL-never-write-me"
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := Create(path, Options{ContainsSecret: func(b []byte) bool { return bytes.Contains(b, []byte(sentinel)) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(KindRunStart, map[string]string{"mode": "live"}); err != nil {
		t.Fatal(err)
	}
	_, err = w.Append(KindHTTPRequest, map[string]any{"headers": map[string]string{"authorization": "Bearer " + sentinel}})
	if !errors.Is(err, ErrSecret) || strings.Contains(err.Error(), sentinel) {
		t.Fatalf("Append with the secret = %v; want ErrSecret without the value", err)
	}
	seq, err := w.Append(KindRunEnd, map[string]int{"exit": 0})
	if err != nil || seq != 2 {
		t.Fatalf("Append after a refusal = %d, %v; want seq 2", seq, err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(sentinel)) {
		t.Fatal("the bundle holds the secret")
	}
	if res, err := Verify(path); err != nil || res.Status != Verified || res.Records != 3 {
		t.Fatalf("Verify = %s, %v", res, err)
	}
}

func TestAppendRefuses(t *testing.T) {
	w := New(&bytes.Buffer{}, Options{})
	for _, tc := range []struct {
		kind   string
		fields any
		want   string
	}{
		{"egress", nil, `bundle: kind "egress" is not a record kind`},
		{KindSeal, nil, `bundle: kind "seal" is not a record kind`},
		{KindEnv, map[string]int{"seq": 3}, `bundle: fields may not carry the key "seq"`},
		{KindEnv, map[string]int{"seal": 3}, `bundle: fields may not carry the key "seal"`},
		{KindEnv, []string{"PATH"}, `bundle: fields must be a JSON object, not []string`},
		{KindEnv, "PATH", `bundle: fields must be a JSON object, not string`},
		{KindEnv, map[string]any{"f": func() {}}, "bundle: fields: json: unsupported type: func()"},
		// A struct's keys are known by its type; one that can render a
		// reserved key is checked on its rendering, as a map is.
		{KindEnv, struct {
			K string `json:"kind"`
		}{"x"}, `bundle: fields may not carry the key "kind"`},
		{KindEnv, struct{ Seq int }{1}, `bundle: fields may not carry the key "seq"`},
		{KindEnv, &struct{ embedsSig }{embedsSig{"s"}}, `bundle: fields may not carry the key "sig"`},
		{KindEnv, marshals{}, `bundle: fields may not carry the key "prev"`},
	} {
		if _, err := w.Append(tc.kind, tc.fields); err == nil || err.Error() != tc.want {
			t.Errorf("Append(%q, %#v) = %v; want %s", tc.kind, tc.fields, err, tc.want)
		}
	}
	if seq, err := w.Append(KindEnv, struct{}{}); err != nil || seq != 1 {
		t.Errorf("Append of an empty object = %d, %v; want seq 1", seq, err)
	}
}

type embedsSig struct {
	Sig string `json:"sig"`
}

// marshals renders a reserved key its type does not show.
type marshals struct{}

func (marshals) MarshalJSON() ([]byte, error) { return []byte(`{"prev":"x"}`), nil }

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 3, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestStopsAfterWriteErrorAndSeal(t *testing.T) {
	w := New(&failWriter{n: 1}, Options{})
	if _, err := w.Append(KindRunStart, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(KindRunEnd, nil); err == nil {
		t.Fatal("a failed write reported success")
	}
	if _, err := w.Append(KindRunEnd, nil); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append after a failed write = %v; want ErrBroken", err)
	}
	s := New(&bytes.Buffer{}, Options{})
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(KindRunEnd, nil); !errors.Is(err, ErrSealed) {
		t.Fatalf("Append after Seal = %v; want ErrSealed", err)
	}
	if err := s.Seal(); !errors.Is(err, ErrSealed) {
		t.Fatalf("second Seal = %v; want ErrSealed", err)
	}
}

type syncCounter struct {
	bytes.Buffer
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return nil }

func TestSyncReachesTheFile(t *testing.T) {
	sc := &syncCounter{}
	w := New(sc, Options{})
	w.Append(KindEgressDecision, map[string]string{"decision": "deny"})
	if err := w.Sync(); err != nil || sc.syncs != 1 {
		t.Fatalf("Sync = %v, %d syncs; want 1", err, sc.syncs)
	}
	if err := w.Close(); err != nil || sc.syncs != 2 {
		t.Fatalf("Close = %v, %d syncs; want 2", err, sc.syncs)
	}
	if res := verifyBytes(t, sc.Bytes()); res.String() != "TRUNCATED (verifiable prefix of 1 records)" {
		t.Errorf("closed without seal: %s", res)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path, Options{}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over a file = %v; want ErrExist", err)
	}
}

// TestConcurrentAppends: many goroutines append at once; every seq is
// handed out once and the result chains (run with -race).
func TestConcurrentAppends(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf, Options{})
	const goroutines, each = 8, 50
	seqs := make(chan uint64, goroutines*each)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				seq, err := w.Append(KindDNSQuery, map[string]int{"g": g, "i": i})
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- seq
			}
		}()
	}
	wg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("seq %d handed out twice", s)
		}
		seen[s] = true
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if res := verifyBytes(t, buf.Bytes()); res.Status != Verified || res.Records != goroutines*each+1 {
		t.Fatalf("Verify = %s (%d records)", res, res.Records)
	}
}

// TestKillMidWay kills a real writer process with SIGKILL while it writes:
// verify must say TRUNCATED, with a prefix holding at least every record the
// writer reported durable.
func TestKillMidWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var durable uint64
	for durable < 40 && sc.Scan() {
		durable, _ = strconv.ParseUint(sc.Text(), 10, 64)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if durable < 40 {
		t.Fatalf("writer reported %d records before dying", durable)
	}
	var stdout, stderr bytes.Buffer
	code := VerifyMain([]string{path}, &stdout, &stderr)
	res, _ := Verify(path)
	if code != 3 || res.Status != Truncated || res.Records < durable {
		t.Fatalf("verify: exit %d, %q; want exit 3, TRUNCATED with at least %d records", code, stdout.String(), durable)
	}
	if want := fmt.Sprintf("TRUNCATED (verifiable prefix of %d records)\n", res.Records); stdout.String() != want {
		t.Errorf("printed %q, want %q", stdout.String(), want)
	}
	t.Logf("killed after %d durable records; verify: %s", durable, res)
}

func TestVerifyMain(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	b := sample(t)
	os.WriteFile(good, b, 0o600)
	c := bytes.Clone(b)
	c[bytes.Index(c, []byte(`"name":"evil.example"`))+9] ^= 0x01 // record 4
	os.WriteFile(bad, c, 0o600)
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{good}, 0, "VERIFIED\n", ""},
		{[]string{bad}, 4, "TAMPERED (record 4)\n", ""},
		{[]string{filepath.Join(dir, "missing.jsonl")}, 2, "", "custodian verify: cannot open the bundle: no such file or directory\n"},
		{nil, 2, "", VerifyUsage},
		{[]string{good, bad}, 2, "", VerifyUsage},
		{[]string{"--help"}, 0, VerifyUsage, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := VerifyMain(tc.args, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.errs {
			t.Errorf("verify %q: exit %d, %q, %q; want %d, %q, %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
		}
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	torn := filepath.Join(dir, "torn.jsonl")
	b := sample(t)
	os.WriteFile(good, b, 0o600)
	os.WriteFile(torn, b[:bytes.Index(b, []byte(`{"seq":9`))+30], 0o600)
	for _, tc := range []struct {
		args   []string
		code   int
		golden string
	}{
		{[]string{good}, 0, "inspect.txt"},
		{[]string{good, "--json"}, 0, "inspect.json"},
		{[]string{torn}, 3, "inspect-torn.txt"},
		{[]string{"--json", torn}, 3, "inspect-torn.json"},
	} {
		var stdout, stderr bytes.Buffer
		code := InspectMain(tc.args, &stdout, &stderr)
		if code != tc.code || stderr.Len() != 0 {
			t.Errorf("inspect %q: exit %d, stderr %q; want %d", tc.args, code, stderr.String(), tc.code)
		}
		golden(t, tc.golden, stdout.Bytes())
	}
	var stdout, stderr bytes.Buffer
	if code := InspectMain([]string{good, "--yaml"}, &stdout, &stderr); code != 2 {
		t.Errorf("inspect with an unknown flag: exit %d, want 2", code)
	}
}

// FuzzVerify: no input makes Verify fail to reach a verdict, and the
// verdict's counts agree with each other.
func FuzzVerify(f *testing.F) {
	b := sampleBytes()
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte("{\"seq\":1,\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := VerifyReader(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		switch res.Status {
		case Verified:
			if res.Records == 0 {
				t.Fatal("VERIFIED with no records")
			}
		case Truncated:
			if res.Records > uint64(bytes.Count(in, []byte("\n"))) {
				t.Fatalf("%s from %d lines", res, bytes.Count(in, []byte("\n")))
			}
		case Tampered:
			if res.Record == 0 || res.Records != res.Record-1 {
				t.Fatalf("%+v", res)
			}
		}
	})
}
