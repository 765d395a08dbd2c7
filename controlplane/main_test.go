package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/controlplane/internal/manifesttest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// asMain makes the test binary run main() itself: a real, cold process of
// the command without a separate build.
const asMain = "JR2_CONTROLPLANE_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// command runs `controlplane args…` as its own process.
func command(rootsFile string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1", "SSL_CERT_FILE="+rootsFile)
	return cmd
}

func runCmd(t testing.TB, rootsFile string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := command(rootsFile, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// rootsPEM writes a bundle of one root made in code: the "system roots".
func rootsPEM(t testing.TB) string {
	return testpki.NewCA(t, "root").WriteFile(t, t.TempDir(), "roots.pem")
}

// TestColdProcess: the command as a process — ca init, render of the
// spec's example (summary on stdout, exit 0), a second render changing no
// byte, a refused manifest (exit 1, nothing written), key.
func TestColdProcess(t *testing.T) {
	roots := rootsPEM(t)
	dir := t.TempDir()
	ca, out := filepath.Join(dir, "ca"), filepath.Join(dir, "out")
	if code, _, stderr := runCmd(t, roots, "ca", "init", "--dir", ca); code != 0 {
		t.Fatalf("ca init: %d %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, roots, "ca", "init", "--dir", ca); code != 1 || !strings.Contains(stderr, "never replaces a CA") {
		t.Errorf("second ca init: %d %s", code, stderr)
	}
	code, stdout, stderr := runCmd(t, roots, "render", "--manifest", filepath.Join("testdata", "manifests", "small.json"), "--ca", ca, "--out", out)
	if code != 0 || stdout != "pod ws-7f3a: Custodian holds ANTHROPIC_API_KEY, GITHUB_TOKEN; 3 bound targets\n" || !strings.HasPrefix(stderr, "controlplane render: the Custodian starts only with one value file per held secret") {
		t.Fatalf("render: %d %q %q", code, stdout, stderr)
	}
	first := snapshot(t, out)
	if code, _, stderr := runCmd(t, roots, "render", "--manifest", filepath.Join("testdata", "manifests", "small.json"), "--ca", ca, "--out", out); code != 0 {
		t.Fatal(stderr)
	}
	if again := snapshot(t, out); again != first {
		t.Error("a second render in another process changed DIR")
	}
	refused := filepath.Join("testdata", "refuse", "R5-wildcard.json")
	code, stdout, stderr = runCmd(t, roots, "render", "--manifest", refused, "--ca", ca, "--out", filepath.Join(dir, "out2"))
	if code != 1 || stdout != "" || !strings.HasSuffix(stderr, "secrets[2].hosts[0]: \"*.example.com\": wildcards are not allowed; list each host\n") {
		t.Errorf("refused: %d %q %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out2")); err == nil {
		t.Error("a refused render created DIR")
	}
	keyFile := filepath.Join(dir, "signing.key")
	os.WriteFile(keyFile, []byte("signing\n"), 0o600)
	if code, stdout, _ := runCmd(t, roots, "key", "--signing-key", keyFile, "--placement", "instance"); code != 0 || len(stdout) != 65 {
		t.Errorf("key: %d %q", code, stdout)
	}
}

// snapshot is every file of dir, concatenated with its name.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		c, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %d %x\n", p, len(c), c)
		return err
	})
	return b.String()
}

// BenchmarkRenderCold times `controlplane render` as a cold process (a new
// process per render, reading the manifest, the CA and the system roots)
// of the command as go build makes it — not this test binary as main,
// which starts ~20 ms slower for the test packages' own inits — for 10 to
// 400 bound targets: "fresh" into an empty DIR (every leaf
// issued), "again" into the rendered DIR (every leaf reused), and
// "fresh-tmpfs" as fresh with DIR on /dev/shm: on a disk whose file create
// is slow, the difference is the disk's, not the render's. On ext4 a create
// skips each free inode of its group deleted in the last minutes
// (recently_deleted in __ext4_new_inode): after a churn of files in /tmp
// (any test's) each of the 800 creates at 400 targets costs up to ~1 ms of
// system CPU, so "fresh" is the render plus that; fresh renders go into a
// new DIR each, removed after the loop, so the benchmark adds no churn of
// its own. It reports
// envoy.json's size, the process's CPU time (user + system, all cores),
// which a loaded machine inflates less than the wall time, and the best
// render's wall time (best-ms/op, the fastest of b.N): what the render
// takes when no neighbour takes a core from it, the figure its goal rows
// hold (the best of three under 150 ms), where the mean also measures
// the machine's other work. Print the
// table, each row against 10 targets:
//
//	go test ./controlplane -run '^$' -bench RenderCold -benchtime 5x | go run ./scripts/benchtable -title "controlplane render, cold process" -vs 'RenderCold/targets=10/fresh'
func BenchmarkRenderCold(b *testing.B) {
	roots := rootsPEM(b)
	dir := b.TempDir()
	bin := filepath.Join(dir, "controlplane")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	render := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"render"}, args...)...)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+roots)
		return cmd
	}
	ca := filepath.Join(dir, "ca")
	if code, _, stderr := runCmd(b, roots, "ca", "init", "--dir", ca); code != 0 {
		b.Fatal(stderr)
	}
	for _, n := range []int{10, 50, 100, 200, 400} {
		held := filepath.Join(dir, fmt.Sprintf("held-%d.json", n))
		if err := os.WriteFile(held, manifesttest.Generate(n), 0o644); err != nil {
			b.Fatal(err)
		}
		modes := []string{"fresh", "again"}
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			// The same render into tmpfs: what the file creates of DIR's
			// disk cost, apart from the render's own work.
			modes = append(modes, "fresh-tmpfs")
		}
		for _, mode := range modes {
			b.Run(fmt.Sprintf("targets=%d/%s", n, mode), func(b *testing.B) {
				out := filepath.Join(dir, fmt.Sprintf("out-%d", n))
				if mode == "fresh-tmpfs" {
					shm, err := os.MkdirTemp("/dev/shm", "jr2-render-bench-")
					if err != nil {
						b.Fatal(err)
					}
					defer os.RemoveAll(shm)
					out = filepath.Join(shm, "out")
				}
				if mode == "again" {
					// DIR rendered once, untimed: every render below reuses it.
					if msg, err := render("--manifest", held, "--ca", ca, "--out", out).CombinedOutput(); err != nil {
						b.Fatalf("%v: %s", err, msg)
					}
					b.ResetTimer()
				}
				var cpu, floor, best time.Duration
				files := 0
				target := out
				for i := 0; i < b.N; i++ {
					if mode != "again" {
						// A new DIR per render, all removed after the
						// loop: removing 800 files before each render
						// made ext4 skip every one of them at each
						// create (recently_deleted), a cost that grew
						// with the iteration, not the render's.
						target = fmt.Sprintf("%s-%d", out, i)
					}
					cmd := render("--manifest", held, "--ca", ca, "--out", target)
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					t0 := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("%v: %s", err, stderr.String())
					}
					if d := time.Since(t0); i == 0 || d < best {
						best = d
					}
					cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
					if mode == "fresh" {
						// The disk's floor under the same conditions, right
						// after this render: its files written again by this
						// process into a new DIR beside it, nothing rendered.
						b.StopTimer()
						n, d := writeLike(b, target, target+"-floor")
						files, floor = n, floor+d
						b.StartTimer()
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(best.Microseconds())/1000, "best-ms/op")
				if mode == "fresh" {
					b.ReportMetric(float64(floor.Microseconds())/1000/float64(b.N), "files-only-ms/op")
					b.ReportMetric(float64(files), "files")
				}
				if st, err := os.Stat(filepath.Join(target, "envoy.json")); err == nil {
					b.ReportMetric(float64(st.Size()), "envoy.json-bytes")
				}
				if mode != "again" {
					for i := 0; i < b.N; i++ {
						os.RemoveAll(fmt.Sprintf("%s-%d", out, i))
						os.RemoveAll(fmt.Sprintf("%s-%d-floor", out, i))
					}
				}
			})
		}
	}
}

// writeLike writes every file of src again into a new directory dst
// (same tree, bytes and modes; read first, untimed) and returns how many
// files and how long the writing took: what DIR's disk costs a render,
// with nothing rendered: the limit the cold render's on-disk row states.
func writeLike(b *testing.B, src, dst string) (int, time.Duration) {
	type file struct {
		rel  string
		data []byte
		mode os.FileMode
	}
	var files []file
	var dirs []string
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			dirs = append(dirs, rel)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, file{rel, data, info.Mode().Perm()})
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dst, f.rel), f.data, f.mode); err != nil {
			b.Fatal(err)
		}
	}
	return len(files), time.Since(t0)
}
