package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/effectorkey"
)

var update = flag.Bool("update", false, "rewrite the golden wire fixtures in effector/testdata/wire")

const fixtures = "../../testdata/wire"

func str(s string) *string { return &s }
func code(n int) *int      { return &n }

// requests are the start shapes; each is request.<name>.json.
var requests = map[string]*Start{
	"http-minimal": {Kind: KindHTTP, HTTP: &HTTP{Method: "GET", URL: Value{Text("https://api.example.com/v1/ping")}}},
	"http-full": {Kind: KindHTTP, TimeoutMs: 30000, HTTP: &HTTP{
		Method:           "POST",
		URL:              Value{Text("https://api.example.com/v1/items/"), Secret("ITEM_TOKEN")},
		Path:             []string{"a b", "c"},
		Headers:          map[string]Value{"accept": {Text("application/json")}},
		Auth:             &Auth{Type: AuthBearer, Secret: "JIRA_TOKEN"},
		Body:             &Body{JSON: json.RawMessage(`{"summary":"x"}`)},
		MaxResponseBytes: 1048576,
	}},
	"http-basic-text-body": {Kind: KindHTTP, TimeoutMs: 5000, HTTP: &HTTP{
		Method:  "PUT",
		URL:     Value{Text("https://api.example.com:8443/upload?mode=replace")},
		Headers: map[string]Value{"x-api-key": {Text("key "), Secret("API_KEY")}, "accept": {Text("text/plain")}},
		Auth:    &Auth{Type: AuthBasic, Secret: "PASSWORD", User: "deploy"},
		Body:    &Body{Text: str("hello <world> & \"you\"\n"), ContentType: "text/plain; charset=utf-8"},
	}},
	"http-text-auth-path": {Kind: KindHTTP, HTTP: &HTTP{
		Method: "DELETE",
		URL:    Value{Text("https://api.example.com/v2/issues")},
		Path:   []string{"PROJ-1", "comments", "ü/ß?#"},
		Auth:   &Auth{Type: AuthText, Secret: "SIGNED_HEADER"},
	}},
	"http-file-body": {Kind: KindHTTP, TimeoutMs: 120000, HTTP: &HTTP{
		Method: "POST",
		URL:    Value{Text("https://uploads.example.com/v1/artifacts")},
		Body:   &Body{File: "dist/app.tar.gz", ContentType: "application/gzip"},
	}},
	"command": {Kind: KindCommand, TimeoutMs: 600000, Command: &Command{
		Argv:           []string{"make", "deploy"},
		Env:            map[string]Value{"AWS_SECRET_ACCESS_KEY": {Secret("aws")}, "KUBECONFIG": {SecretPath("kubeconfig")}},
		Dir:            "services/api",
		Pin:            "0123456789abcdef0123456789abcdef01234567",
		MaxOutputBytes: 1048576,
	}},
	"push-ssh": {Kind: KindPush, TimeoutMs: 300000, Push: &Push{
		Slot: Slot{Name: "app", URL: "ssh://git@git.example.com/org/app.git", Credentials: "example"},
		Ref:  "refs/heads/jr2/fix",
	}},
	"push-https-pinned": {Kind: KindPush, Push: &Push{
		Slot: Slot{Name: "docs", URL: "https://git.example.com/org/docs.git", Credentials: "example-https"},
		Ref:  "refs/heads/jr2/docs",
		Pin:  "0123456789abcdef0123456789abcdef01234567",
	}},
	"push-scp-like": {Kind: KindPush, TimeoutMs: 60000, Push: &Push{
		Slot: Slot{Name: "app", URL: "git@git.example.com:org/app.git", Credentials: "example"},
		Ref:  "refs/heads/main",
	}},
}

var replica = Replica{Name: "jr2-instance-effector-7d9f-abcde", Address: "10.42.0.17:8082"}

// responses are the answers; each is response.<status>-<name>.json.
var responses = map[string]any{
	"202-running": &State{State: StateRunning, Replica: replica},
	"200-running-pinned": &State{State: StateRunning, Replica: replica,
		Pinned: "0123456789abcdef0123456789abcdef01234567"},
	"200-settled-response": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeResponse, Status: 201, ContentType: "application/json",
		Headers: map[string][]string{"content-type": {"application/json"}, "set-cookie": {"a=1", "b=[secret:JIRA_TOKEN]"}},
		Size:    27, Body: str(`{"id":7,"token":"[secret:JIRA_TOKEN]"}`),
	}},
	"200-settled-response-truncated": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeResponse, Status: 200, ContentType: "text/plain; charset=utf-8",
		Headers: map[string][]string{"content-type": {"text/plain; charset=utf-8"}},
		Size:    2000000, Body: str("aaaa"), Truncated: true,
	}},
	"200-settled-response-binary": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeResponse, Status: 200, ContentType: "image/png",
		Headers: map[string][]string{"content-type": {"image/png"}}, Size: 4096,
	}},
	"200-settled-unreachable": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeUnreachable, Reason: "nothing was sent: dial tcp 10.0.0.9:443: connect: connection refused"}},
	"200-settled-refused": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeRefused, Reason: "path[0]: \"..\" is not a path segment an effect may send"}},
	"200-settled-unknown": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeUnknown, Reason: "the request was sent and no answer came: the effect's timeout ended it: timed out"}},
	"200-settled-exited": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeExited, Code: code(0), Stdout: "deployed\n", Stderr: ""}},
	"200-settled-exited-signal": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeExited, Code: code(143), Signal: "SIGTERM", Stdout: "", Stderr: "stopping\n", Truncated: true, Dirty: true}},
	"200-settled-timeout": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeTimeout, Reason: "the command ran past its 600000 ms", Stdout: "step 1\n", Stderr: ""}},
	"200-settled-command-unknown": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeUnknown, Reason: "did not run: a stop for this effect arrived before its start"}},
	// What a stop of a command that ignores SIGTERM gives: the keeper was
	// killed past the grace, so no code.
	"200-settled-exited-sigkill": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeExited, Signal: "SIGKILL", Stdout: "step 1\n", Stderr: ""}},
	"200-settled-command-stopped-before-start": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeUnknown, Reason: "did not run: stopped before it started"}},
	"200-settled-command-timeout-before-start": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeTimeout, Reason: "the command did not start within its 30000 ms (waiting for GPG pushes to end); it did not run"}},
	"400-command-landlock": &Error{Error: "landlock: unavailable on node node-a (ENOSYS: not supported by kernel or not enabled at boot time)", Replica: replica},
	"200-settled-pushed": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567",
		Outcome: &Outcome{Kind: OutcomePushed, Commit: "89abcdef0123456789abcdef0123456789abcdef", Ref: "refs/heads/jr2/fix"}},
	"200-settled-rejected": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "push", Reason: "the remote could not be reached: ssh: connect to host git.example.com port 22: Connection refused"}},
	"202-running-push": &State{State: StateRunning, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567"},
	"200-settled-pushed-signed": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567",
		Outcome: &Outcome{Kind: OutcomePushed, Commit: "fedcba9876543210fedcba9876543210fedcba98", Ref: "refs/heads/jr2/fix"}},
	"200-settled-rejected-start": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "start", Reason: "slot \"app\" is not a Repo Slot this Effector pushes (effector.json pushes names none of that name)"}},
	"200-settled-rejected-start-pin": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567", Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "start", Reason: "commit 0123456789abcdef0123456789abcdef01234567 is not in the worktree: git fetch: exit status 128 (fatal: remote error: upload-pack: not our ref 0123456789abcdef0123456789abcdef01234567)"}},
	"200-settled-rejected-sign": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567", Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "sign", Reason: "git.credentials entry \"example\" holds no signing key (sign.identity); the slot signs with sshKey"}},
	"200-settled-rejected-sign-lock": &State{State: StateSettled, Replica: replica, Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "sign", Reason: "the push did not start signing within its 300000 ms (waiting for credentialed commands to end); nothing was pushed"}},
	"200-settled-rejected-push-non-fast-forward": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567", Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "push", Reason: "the remote refused a non-fast-forward update of refs/heads/jr2/fix; the pinned commit does not hold the remote's tip"}},
	"200-settled-rejected-push-host-key": &State{State: StateSettled, Replica: replica, Pinned: "0123456789abcdef0123456789abcdef01234567", Outcome: &Outcome{
		Kind: OutcomeRejected, Stage: "push", Reason: "the remote could not be reached: ssh: Host key verification failed."}},
	"405-push":     &Error{Error: "a push effect is one request and ends on its own; it cannot be stopped", Replica: replica},
	"404-unknown":  &State{State: StateUnknown, Replica: replica},
	"400-error":    &Error{Error: "http.headers.host: a header that frames or routes the request is not allowed (host, content-length, transfer-encoding, connection, upgrade, te, trailer, keep-alive, proxy-*)", Replica: replica},
	"405-error":    &Error{Error: "an http effect is one request and ends on its own; it cannot be stopped", Replica: replica},
	"503-stopping": &Error{Error: "stopping", Replica: replica},
}

// golden compares got with the file, or writes it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(fixtures, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run go test -update to write it)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s drifted:\n got %s\nwant %s", name, got, want)
	}
}

func line(b []byte) []byte { return append(b, '\n') }

func TestRequestFixtures(t *testing.T) {
	for name, want := range requests {
		t.Run(name, func(t *testing.T) {
			enc, err := Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			file := "request." + name + ".json"
			golden(t, file, line(enc))
			b, err := os.ReadFile(filepath.Join(fixtures, file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeStart(b)
			if err != nil {
				t.Fatalf("decoding %s: %v", file, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoding %s:\n got %#v\nwant %#v", file, got, want)
			}
		})
	}
}

func TestResponseFixtures(t *testing.T) {
	for name, want := range responses {
		t.Run(name, func(t *testing.T) {
			enc, err := Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			file := "response." + name + ".json"
			golden(t, file, line(enc))
			b, err := os.ReadFile(filepath.Join(fixtures, file))
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if _, isErr := want.(*Error); isErr {
				got, err = DecodeError(b)
			} else {
				got, err = DecodeState(b)
			}
			if err != nil {
				t.Fatalf("decoding %s: %v", file, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoding %s:\n got %#v\nwant %#v", file, got, want)
			}
		})
	}
}

// TestNoStrayFixtures keeps the directory and the tables equal: a fixture
// no table names would be read by the other side and tested by nobody.
func TestNoStrayFixtures(t *testing.T) {
	entries, err := os.ReadDir(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for n := range requests {
		want["request."+n+".json"] = true
	}
	for n := range responses {
		want["response."+n+".json"] = true
	}
	for _, r := range rejects {
		want["reject."+r.name+".json"] = true
	}
	for _, v := range signatureVectors() {
		want[v.file] = true
	}
	var stray []string
	for _, e := range entries {
		if !want[e.Name()] {
			stray = append(stray, e.Name())
		}
		delete(want, e.Name())
	}
	for n := range want {
		stray = append(stray, "missing "+n)
	}
	sort.Strings(stray)
	if len(stray) > 0 && !*update {
		t.Errorf("fixtures and tables differ: %s", strings.Join(stray, ", "))
	}
}

// rejectFile is a reject fixture: the decoder that must refuse, the body
// as sent, and the reason it gives.
type rejectFile struct {
	Decoder string `json:"decoder"`
	Body    string `json:"body"`
	Reason  string `json:"reason"`
}

func decoderFor(name string) func([]byte) error {
	switch name {
	case "state":
		return func(b []byte) error { _, err := DecodeState(b); return err }
	case "error":
		return func(b []byte) error { _, err := DecodeError(b); return err }
	}
	return func(b []byte) error { _, err := DecodeStart(b); return err }
}

func TestRejectFixtures(t *testing.T) {
	for _, r := range rejects {
		t.Run(r.name, func(t *testing.T) {
			if r.decoder == "" {
				r.decoder = "start"
			}
			err := decoderFor(r.decoder)([]byte(r.body))
			if err == nil {
				t.Fatalf("%s decoded %s", r.decoder, r.body)
			}
			if r.want != "" && !strings.Contains(err.Error(), r.want) {
				t.Errorf("reason %q does not say %q", err, r.want)
			}
			enc, _ := json.MarshalIndent(rejectFile{Decoder: r.decoder, Body: r.body, Reason: err.Error()}, "", "  ")
			golden(t, "reject."+r.name+".json", line(enc))
		})
	}
}

// TestRejectPerFramingHeader holds the list: one reject fixture per
// framing header name.
func TestRejectPerFramingHeader(t *testing.T) {
	names := map[string]bool{}
	for _, r := range rejects {
		names[r.name] = true
	}
	for _, h := range FramingHeaders() {
		if !names["header-"+h] {
			t.Errorf("no reject fixture header-%s", h)
		}
	}
}

// signatureVector is a signature fixture: inputs, the lines they make and
// the signature.
type signatureVector struct {
	file string
	Kind string `json:"kind"`
	// key derivation
	SigningKey string `json:"signingKey,omitempty"`
	Placement  string `json:"placement,omitempty"`
	// signing
	Key        string `json:"key"`
	Status     int    `json:"status,omitempty"`
	Method     string `json:"method,omitempty"`
	Address    string `json:"address,omitempty"`
	Target     string `json:"target,omitempty"`
	Time       string `json:"time,omitempty"`
	Nonce      string `json:"nonce,omitempty"`
	Body       string `json:"body,omitempty"`
	BodySHA256 string `json:"bodySha256,omitempty"`
	Lines      string `json:"lines,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

func signatureVectors() []signatureVector {
	signing := "instance-signing-key-0123456789abcdef\n"
	key := effectorkey.Derive(effectorkey.TrimNewline([]byte(signing)), "instance")
	k := hex.EncodeToString(key)
	start, _ := Marshal(requests["http-full"])
	answer, _ := Marshal(responses["202-running"])
	return []signatureVector{
		{file: "signature.key.json", Kind: "key", SigningKey: signing, Placement: "instance", Key: k},
		{file: "signature.request.json", Kind: "request", Key: k, Method: "POST", Address: "10.42.0.17:8082",
			Target: "/effects/run-42.effect_7", Time: "1760000000000", Nonce: "bm9uY2Utb25lLXR3by10aHJl", Body: string(start)},
		{file: "signature.request-empty-body.json", Kind: "request", Key: k, Method: "GET", Address: "10.42.0.17:8082",
			Target: "/effects/run-42.effect_7", Time: "1760000000250", Nonce: "poll-1"},
		{file: "signature.response.json", Kind: "response", Key: k, Status: 202, Method: "POST",
			Target: "/effects/run-42.effect_7", Nonce: "bm9uY2Utb25lLXR3by10aHJl", Body: string(answer)},
	}
}

func TestSignatureFixtures(t *testing.T) {
	for _, v := range signatureVectors() {
		t.Run(v.file, func(t *testing.T) {
			key, err := hex.DecodeString(v.Key)
			if err != nil {
				t.Fatal(err)
			}
			switch v.Kind {
			case "key":
				if got := effectorkey.Hex(effectorkey.TrimNewline([]byte(v.SigningKey)), v.Placement); got != v.Key {
					t.Fatalf("derived %s", got)
				}
			case "request":
				v.BodySHA256 = BodySHA256([]byte(v.Body))
				v.Lines = RequestLines(v.Method, v.Address, v.Target, v.Time, v.Nonce, []byte(v.Body))
				v.Signature = Sign(key, v.Lines)
			case "response":
				v.BodySHA256 = BodySHA256([]byte(v.Body))
				v.Lines = ResponseLines(v.Status, v.Method, v.Target, v.Nonce, []byte(v.Body))
				v.Signature = Sign(key, v.Lines)
			}
			if v.Signature != "" && !Verify(key, v.Lines, v.Signature) {
				t.Fatal("a signature does not verify")
			}
			enc, _ := json.MarshalIndent(v, "", "  ")
			golden(t, v.file, line(enc))
		})
	}
}
