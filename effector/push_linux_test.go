package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// pushRig is a Sandbox Effector process that pushes, over a fixture whose
// files lie where the confiner denies them, with the entries written as
// the operator projects them.
type pushRig struct {
	f *commandtest.Fixture
	p *proc
	c *client.Client
}

// newPushRig runs the binary from a top-level directory of its own: a
// confined git runs `effector credential` from it, and /tmp (where the
// build is) is not in a confined process's ruleset.
func newPushRig(t testing.TB, effectorJSON string, extra map[string]string, entries ...config.GitEntry) *pushRig {
	t.Helper()
	landlocktest.Require(t, 1)
	f := commandtest.New(t, placementKey, effectorJSON)
	for _, e := range entries {
		pushtest.WriteEntry(t, f.Git, e)
	}
	dir, err := os.MkdirTemp("/", "jr2-effector-push-bin-")
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: no top-level directory for the binary (run as root): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(binary)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "effector"), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	// site.run starts `binary`; the tests here run one at a time.
	built := binary
	binary = filepath.Join(dir, "effector")
	p := (&site{dir: f.RunDir, env: f.Env()}).run(t, extra)
	binary = built
	return &pushRig{f: f, p: p, c: p.client()}
}

// signed sends one signed request, checks that the answer is signed by
// the placement's key over this request, and returns its status and body.
func (r *pushRig) signed(t testing.TB, method, id string, body []byte) (int, []byte) {
	t.Helper()
	target := "/effects/" + id
	req, err := http.NewRequest(method, "http://"+r.p.addr+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	nonce := client.NewNonce()
	client.Sign(req, placementKey, r.p.addr, body, time.Now(), nonce)
	code, got, sig := roundTrip(t, req)
	if err := client.VerifyAnswer(placementKey, method, target, nonce, code, got, sig); err != nil {
		t.Fatalf("%s %s answered %d %s: %v", method, target, code, got, err)
	}
	return code, got
}

// startPush starts a push and returns the start answer's pinned commit.
func (r *pushRig) startPush(t testing.TB, id string, timeoutMs int64, p *wire.Push) (pinned string, answer []byte) {
	t.Helper()
	body, err := wire.Marshal(&wire.Start{Kind: wire.KindPush, TimeoutMs: timeoutMs, Push: p})
	if err != nil {
		t.Fatal(err)
	}
	code, got := r.signed(t, "POST", id, body)
	st, err := wire.DecodeState(got)
	if code != 202 || err != nil || st.State != wire.StateRunning {
		t.Fatalf("start %s: %d %s %v", id, code, got, err)
	}
	return st.Pinned, got
}

// settled polls until the effect settles; it returns the outcome and
// every answer's bytes.
func (r *pushRig) settled(t testing.TB, id string) (*wire.Outcome, []byte) {
	t.Helper()
	var all []byte
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		code, got := r.signed(t, "GET", id, nil)
		all = append(append(all, got...), '\n')
		st, err := wire.DecodeState(got)
		if code != 200 || err != nil {
			t.Fatalf("poll %s: %d %s %v", id, code, got, err)
		}
		if st.State == wire.StateSettled {
			return st.Outcome, all
		}
	}
	t.Fatalf("%s did not settle", id)
	return nil, nil
}

func slot(name, url, entry, ref string) *wire.Push {
	return &wire.Push{Slot: wire.Slot{Name: name, URL: url, Credentials: entry}, Ref: ref}
}

// TestPushThroughTheBinary: a push over ssh with the entry's key and one
// over https with a token, through the built effector and signed
// requests: each answer is signed by the placement's key and verifies;
// the start answers the worktree's HEAD as pinned, the remote's ref is
// it; the log line is the jr2.effector contract's (kind=push method=-
// host=-, then the settle); a DELETE answers response.405-push.json's
// words; a push start over the 4 MiB bound is refused 401 unread and runs
// nothing; no form of the token or the key is in any log line or answer;
// the scratch is left empty.
func TestPushThroughTheBinary(t *testing.T) {
	token := "SENTINEL-binary-token-" + commandtest.Random()
	https := pushtest.NewHTTPSRemote(t, token, nil)
	ssh := pushtest.NewSSHRemote(t, pushtest.Plain)
	r := newPushRig(t, `{"placement":"sandbox-1","pushes":[{"slot":"app"},{"slot":"docs"}]}`,
		map[string]string{"JR2_CA_FILE": https.CAFile}, ssh.Entry("deploy"), https.Entry("web"))
	head := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
	var answers []byte
	for _, c := range []struct {
		id, repo string
		push     *wire.Push
	}{
		{"bin-ssh", ssh.Repo, slot("app", ssh.URL, "deploy", "refs/heads/jr2/fix")},
		{"bin-https", https.Repo, slot("docs", https.URL, "web", "refs/heads/main")},
	} {
		t.Run(c.id, func(t *testing.T) {
			pinned, a := r.startPush(t, c.id, 60000, c.push)
			if pinned != head {
				t.Fatalf("pinned %q, want the worktree's HEAD %s", pinned, head)
			}
			out, all := r.settled(t, c.id)
			answers = append(append(answers, a...), all...)
			if out.Kind != wire.OutcomePushed || out.Commit != head || out.Ref != c.push.Ref {
				t.Fatalf("outcome %+v", out)
			}
			if got := pushtest.RemoteRef(t, c.repo, c.push.Ref); got != head {
				t.Errorf("the remote's %s is %q, want %s", c.push.Ref, got, head)
			}
			for _, line := range []string{
				"jr2.effector action=start effect=" + c.id + " kind=push method=- host=-\n",
				"jr2.effector action=settle effect=" + c.id + " outcome=pushed\n",
			} {
				waitFor(t, func() bool { return r.p.logCount(line) == 1 })
			}
			// DELETE: the fixture's words, signed.
			code, got := r.signed(t, "DELETE", c.id, nil)
			answers = append(answers, got...)
			fixture, err := os.ReadFile("testdata/wire/response.405-push.json")
			if err != nil {
				t.Fatal(err)
			}
			var want, e wire.Error
			json.Unmarshal(fixture, &want)
			if err := json.Unmarshal(got, &e); code != 405 || err != nil || e.Error != want.Error {
				t.Errorf("DELETE answered %d %s, want 405 %q", code, got, want.Error)
			}
		})
	}
	t.Run("a start over the bound", func(t *testing.T) {
		body, _ := wire.Marshal(&wire.Start{Kind: wire.KindPush, Push: slot("app", ssh.URL, "deploy", "refs/heads/big")})
		body = append(body, bytes.Repeat([]byte(" "), wire.MaxBody)...)
		req, _ := http.NewRequest("POST", "http://"+r.p.addr+"/effects/big", bytes.NewReader(body))
		client.Sign(req, placementKey, r.p.addr, body, time.Now(), client.NewNonce())
		if code, b, sig := roundTrip(t, req); code != 401 || len(b) != 0 || sig != "" {
			t.Fatalf("got %d %q (signature %q)", code, b, sig)
		}
		if r.p.logCount("effect=big") != 0 || pushtest.RemoteRef(t, ssh.Repo, "refs/heads/big") != "" {
			t.Errorf("the over-bound start ran:\n%s", r.p.stdout)
		}
	})
	var forms []string
	for _, v := range []string{token, strings.Split(string(ssh.Identity), "\n")[2]} {
		for _, f := range efftest.Forms([]byte(v)) {
			if len(f.Core) >= 12 {
				forms = append(forms, f.Core)
			}
		}
	}
	logs := r.p.stdout.String() + r.p.stderr.String()
	for _, f := range forms {
		if strings.Contains(logs, f) || bytes.Contains(answers, []byte(f)) {
			t.Errorf("a form of a secret is in a log line or an answer: %q", f)
		}
	}
	for _, s := range []string{r.f.Scratch, r.f.Work, r.f.Git, ssh.URL, https.URL, head, "refs/heads"} {
		if strings.Contains(logs, s) {
			t.Errorf("a log line names %q:\n%s", s, logs)
		}
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}
