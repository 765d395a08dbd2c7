package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/efftest"
)

// TestCall: `effector call` sends one signed http effect naming a held
// secret to a running Effector, waits until it settles, and prints the
// verified state (the echo scrubbed to its marker, exit 0); a start the
// wire refuses is refused before anything is sent, naming the field; a
// wrong key gets no signed answer and says which flags to check; a
// missing flag names it (effector call is the README's one signed effect by hand).
func TestCall(t *testing.T) {
	r := newRig(t, efftest.EchoHandler().ServeHTTP)
	p := r.site.run(t, nil)
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	start := write("start.json", `{"kind":"http","http":{"method":"GET","url":[{"text":"`+r.url("/v1/echo")+`"}],"auth":{"type":"bearer","secret":"SENTINEL"}}}`)
	wrongKey := write("wrong.key", hex.EncodeToString(bytes.Repeat([]byte{0x11}, 32))+"\n")
	key := r.site.env["JR2_EFFECTOR_KEY"]
	call := func(args ...string) (int, string, string) {
		cmd := exec.Command(binary, append([]string{"call"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	code, out, errOut := call("--key", key, "--address", p.addr, "--start", start, "--id", "by-hand-1")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, `{"state":"settled","replica":{"name":"effector-a","address":"`+p.addr+`"},"outcome":{"kind":"response","status":200,`) ||
		!strings.Contains(out, "Bearer [secret:SENTINEL]") || !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("call: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if leaks := efftest.Leaks(out+errOut, sentinel); len(leaks) > 0 {
		t.Errorf("the call's output holds %s", strings.Join(leaks, "; "))
	}
	if p.logCount("effect=by-hand-1") == 0 {
		t.Errorf("the Effector logged no line of effect by-hand-1:\n%s", p.stdout)
	}

	bad := write("bad.json", `{"kind":"http","http":{"method":"TRACE","url":[{"text":"`+r.url("/")+`"}]}}`)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--key", key, "--address", p.addr, "--start", bad}, 1, "effector call: --start " + bad + `: http.method: "TRACE" is not allowed; use one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS; nothing was sent (docs/effector.md has the start's fields)` + "\n"},
		{[]string{"--key", wrongKey, "--address", p.addr, "--start", start}, 1, "a wrong --key or --address (the replica's POD_IP:port, which it signs with) gives no signed answer\n"},
		{[]string{"--start", start}, 2, "effector call: --key is required: the placement key file (controlplane key --signing-key FILE --placement NAME > effector.key)\n"},
		{[]string{"--key", key}, 2, "effector call: --start is required: a file holding the start body, or - for stdin\n"},
		{[]string{"--key", key, "--start", start, "--id", "a/b"}, 2, `effector call: --id "a/b": want 1-128 of A-Z a-z 0-9 . _ -` + "\n"},
	} {
		code, out, errOut := call(tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q\n got: %q\nwant: %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if p.logCount("TRACE") != 0 {
		t.Error("a refused start reached the Effector")
	}
}
