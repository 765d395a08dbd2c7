package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/bundle"
)

// echoStart is an effect naming SENTINEL in its url, a header and its
// auth, with a body: what the receipts must record as labels.
func echoStart(r *rig, body string) *wire.Start {
	return &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 10000, HTTP: &wire.HTTP{Method: "POST",
		URL:     wire.Value{wire.Text(r.url("/v1/")), wire.Secret("SENTINEL")},
		Headers: map[string]wire.Value{"x-token": {wire.Text("tok "), wire.Secret("SENTINEL")}},
		Auth:    &wire.Auth{Type: wire.AuthBasic, Secret: "SENTINEL", User: "u"},
		Body:    &wire.Body{JSON: []byte(body)},
	}}
}

// noteStart is a POST whose text body holds the value itself (as a
// worktree file could): the receipts must record it as its label.
func noteStart(r *rig) *wire.Start {
	text := "note " + sentinel + " end"
	return &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 10000, HTTP: &wire.HTTP{Method: "POST",
		URL: wire.Value{wire.Text(r.url("/v1/note"))}, Body: &wire.Body{Text: &text}}}
}

// receiptRecords reads a receipts file's records, each a JSON object.
func receiptRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: a record is not JSON: %v", filepath.Base(path), err)
		}
		out = append(out, m)
	}
	return out
}

// ofKind are the records of kind, each without the fields that differ
// between two runs of the same effects (its time and the chain's hashes),
// as JSON.
func ofKind(recs []map[string]any, kind string) []string {
	var out []string
	for _, m := range recs {
		if m["kind"] == kind {
			c := maps.Clone(m)
			delete(c, "time")
			delete(c, "prev")
			b, _ := json.Marshal(c)
			out = append(out, string(b))
		}
	}
	return out
}

// noLeak fails when a receipts file holds any form of the sentinel, or
// does not verify sealed.
func noLeak(t *testing.T, path string) {
	t.Helper()
	noLeakIn(t, path)
	var out, errOut bytes.Buffer
	if code := bundle.VerifyMain([]string{path}, &out, &errOut); code != 0 {
		t.Errorf("verify %s: exit %d %s %s", filepath.Base(path), code, out.String(), errOut.String())
	}
}

// noLeakIn fails when a file holds any form of the sentinel.
func noLeakIn(t *testing.T, path string) {
	t.Helper()
	raw, _ := os.ReadFile(path)
	if leaks := efftest.Leaks(string(raw), sentinel, "u:"+sentinel, efftest.Base64("u:"+sentinel), efftest.EscapeSegment(sentinel)); len(leaks) > 0 {
		t.Errorf("%s holds %s", filepath.Base(path), strings.Join(leaks, "; "))
	}
}

// receiptsRun runs an Effector with env, starts each effect, returns the
// outcomes as JSON, and stops it (the receipts sealed on SIGTERM).
func receiptsRun(t *testing.T, r *rig, env map[string]string, starts map[string]*wire.Start, order []string) ([]string, *proc) {
	t.Helper()
	p := r.site.run(t, env)
	select {
	case <-p.done:
		t.Fatalf("the effector ended: %v\nstdout %s\nstderr %s", p.err, p.stdout, p.stderr)
	default:
	}
	c := p.client()
	var outs []string
	for _, id := range order {
		if a, err := c.Start(context.Background(), id, starts[id]); err != nil || a.Status != 202 {
			t.Fatalf("start %s: %v %+v", id, err, a)
		}
		o := settle(t, c, id, p.addr)
		b, _ := wire.Marshal(o)
		outs = append(outs, string(b))
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.exit(t, 10*time.Second)
	return outs, p
}

func keyOf(t *testing.T, p *proc) string {
	t.Helper()
	_, after, ok := strings.Cut(p.stderr.String(), "the receipts' key is ")
	if !ok {
		t.Fatalf("no key on stderr: %s", p.stderr.String())
	}
	return strings.Fields(after)[0]
}

// The Effector's receipts verify (held to the key it printed), hold every
// record kind of a start with no form of the value, and a replay of them
// answers the same outcomes with the upstream gone; read-only refuses the
// POST with nothing sent; preflight sends nothing; faults with one seed
// twice gives the same outcomes.
func TestReceiptsAndModes(t *testing.T) {
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s auth=%s body=%s", req.Method, req.URL.Path, req.Header.Get("Authorization"), b)
	})
	dir := t.TempDir()
	starts := map[string]*wire.Start{"read": get(r.url("/fast/1")), "write": echoStart(r, `{"a":"b"}`), "note": noteStart(r)}
	order := []string{"read", "write", "note"}
	live := filepath.Join(dir, "live.jsonl")
	liveOuts, p := receiptsRun(t, r, map[string]string{"JR2_EFFECTOR_RECEIPTS": live}, starts, order)
	if r.up.Hits() != 3 {
		t.Fatalf("live: the upstream got %d requests, want 3", r.up.Hits())
	}
	if !strings.Contains(liveOuts[2], "note [secret:SENTINEL] end") {
		t.Errorf("live: the note's echo is %s", liveOuts[2])
	}
	var out, errOut bytes.Buffer
	if code := bundle.VerifyMain([]string{"--pubkey", keyOf(t, p), live}, &out, &errOut); code != 0 {
		t.Errorf("verify --pubkey: exit %d %s %s", code, out.String(), errOut.String())
	}
	raw, _ := os.ReadFile(live)
	for _, kind := range []string{"run-start", "effect-start", "effect-decision", "http-request", "http-request-body", "http-response", "effect-outcome", "seal"} {
		if !bytes.Contains(raw, []byte(`"kind":"`+kind+`"`)) {
			t.Errorf("the receipts hold no %s record", kind)
		}
	}
	if leaks := efftest.Leaks(string(raw), sentinel, "u:"+sentinel, efftest.Base64("u:"+sentinel), efftest.EscapeSegment(sentinel)); len(leaks) > 0 {
		t.Errorf("the receipts hold %s", strings.Join(leaks, "; "))
	}
	if !bytes.Contains(raw, []byte("[secret:SENTINEL]")) {
		t.Error("the receipts show no label")
	}
	recs := receiptRecords(t, live)
	for _, want := range []string{`"effect":"write","effect_kind":"http","method":"POST","host":"127.0.0.1","secrets":["SENTINEL"]}`,
		`"chunk":0,"body":"note [secret:SENTINEL] end"`, `"end":true,"chunks":1,"bytes":26,"sha256":"`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("the receipts hold no %s", want)
		}
	}
	if ends := ofKind(recs, "run-end"); len(ends) != 1 || recs[len(recs)-1]["kind"] != "seal" {
		t.Errorf("the receipts end %v, then %v; want one run-end, then the seal", ends, recs[len(recs)-1]["kind"])
	}
	tampered := bytes.Replace(raw, []byte(`"decision":"allow"`), []byte(`"decision":"refuse"`), 1)
	os.WriteFile(filepath.Join(dir, "bad.jsonl"), tampered, 0o600)
	if code := bundle.VerifyMain([]string{filepath.Join(dir, "bad.jsonl")}, &out, &errOut); code != 4 {
		t.Errorf("tampered receipts: exit %d", code)
	}

	r.up.Close()
	replayOuts, rp := receiptsRun(t, r, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, "replay.jsonl"),
		"JR2_EFFECTOR_MODE": "replay", "JR2_EFFECTOR_MODE_FROM": live}, starts, order)
	// Each start makes its own key: the live receipts are not the replay's.
	if code := bundle.VerifyMain([]string{"--pubkey", keyOf(t, rp), live}, &out, &errOut); code != 4 || keyOf(t, rp) == keyOf(t, p) {
		t.Errorf("verify --pubkey with another start's key: exit %d; want 4", code)
	}
	// The size of a replayed answer is the recorded body's: scrubbed, a
	// value's label in place of the value; so its Content-Length, when the
	// recorded body no longer makes it up, is left out (internal/mode).
	size := regexp.MustCompile(`"size":\d+|"content-length":\["\d+"\],`)
	if size.ReplaceAllString(fmt.Sprint(replayOuts), "") != size.ReplaceAllString(fmt.Sprint(liveOuts), "") {
		t.Errorf("replay outcomes\n%q\nwant\n%q", replayOuts, liveOuts)
	}
	noLeak(t, filepath.Join(dir, "replay.jsonl"))
	// A replay that asks for only the read lists the other two in run-end.
	receiptsRun(t, r, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, "replay1.jsonl"),
		"JR2_EFFECTOR_MODE": "replay", "JR2_EFFECTOR_MODE_FROM": live}, starts, []string{"read"})
	if end := ofKind(receiptRecords(t, filepath.Join(dir, "replay1.jsonl")), "run-end"); len(end) != 1 ||
		strings.Count(end[0], `"method":"POST"`) != 2 || !strings.Contains(end[0], `"path":"/v1/note"`) {
		t.Errorf("replay of one: run-end %v; want the two POSTs unasked", end)
	}

	r2 := newRig(t, nil)
	starts2 := map[string]*wire.Start{"read": get(r2.url("/fast/1")), "write": echoStart(r2, `{"a":"b"}`), "note": noteStart(r2)}
	roOuts, _ := receiptsRun(t, r2, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, "ro.jsonl"), "JR2_EFFECTOR_MODE": "read-only"}, starts2, order)
	if r2.up.Hits() != 1 || !strings.Contains(roOuts[1], `"kind":"refused"`) || !strings.Contains(roOuts[1], "mode read-only: POST is not a read") ||
		!strings.Contains(roOuts[2], "mode read-only: POST is not a read") {
		t.Errorf("read-only: upstream %d, outcomes %q", r2.up.Hits(), roOuts)
	}
	if d := ofKind(receiptRecords(t, filepath.Join(dir, "ro.jsonl")), "effect-decision"); strings.Count(fmt.Sprint(d), `"rule":"mode:read-only"`) != 2 {
		t.Errorf("read-only: the decisions %v; want two refusals by mode:read-only", d)
	}
	noLeak(t, filepath.Join(dir, "ro.jsonl"))
	receiptsRun(t, r2, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, "pf.jsonl"), "JR2_EFFECTOR_MODE": "preflight"}, starts2, order)
	if r2.up.Hits() != 1 {
		t.Errorf("preflight sent: the upstream got %d", r2.up.Hits())
	}
	plan := ofKind(receiptRecords(t, filepath.Join(dir, "pf.jsonl")), "effect-planned")
	if len(plan) != 3 || !strings.Contains(plan[1], `"rule":"target https://127.0.0.1:`) || !strings.Contains(plan[1], `"secrets":["SENTINEL"]`) {
		t.Errorf("preflight: the plan %v; want 3 effects, the write naming SENTINEL and its target", plan)
	}
	noLeak(t, filepath.Join(dir, "pf.jsonl"))
	faults := func(name string) []string {
		outs, _ := receiptsRun(t, r2, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, name), "JR2_EFFECTOR_MODE": "faults",
			"JR2_EFFECTOR_FAULT_SEED": "3", "JR2_EFFECTOR_FAULTS": "*=1:error+rate-limit"}, starts2, order)
		return outs
	}
	f1, f2 := faults("f1.jsonl"), faults("f2.jsonl")
	if fmt.Sprint(f1) != fmt.Sprint(f2) || !strings.Contains(f1[0]+f1[1], "jr2 faults: an injected") {
		t.Errorf("faults with one seed twice: %q and %q", f1, f2)
	}
	r1, r2recs := ofKind(receiptRecords(t, filepath.Join(dir, "f1.jsonl")), "fault-injected"), ofKind(receiptRecords(t, filepath.Join(dir, "f2.jsonl")), "fault-injected")
	if len(r1) != 3 || fmt.Sprint(r1) != fmt.Sprint(r2recs) || !strings.Contains(r1[0], `"seed":3`) {
		t.Errorf("faults with one seed twice: records\n%v\n%v", r1, r2recs)
	}
	noLeak(t, filepath.Join(dir, "f1.jsonl"))
}

// A mode without receipts, and receipts that exist, are refused at start,
// naming the variable and the fix.
func TestReceiptsRefusals(t *testing.T) {
	r := newRig(t, nil)
	exists := filepath.Join(t.TempDir(), "r.jsonl")
	os.WriteFile(exists, nil, 0o600)
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"JR2_EFFECTOR_MODE": "replay"}, "JR2_EFFECTOR_MODE=replay records what it does, and JR2_EFFECTOR_RECEIPTS is unset"},
		{map[string]string{"JR2_EFFECTOR_RECEIPTS": exists}, "exists, and receipts are never overwritten"},
		{map[string]string{"JR2_EFFECTOR_RECEIPTS": exists + ".new", "JR2_EFFECTOR_MODE": "rerun"}, `JR2_EFFECTOR_MODE "rerun": the modes are`},
		{map[string]string{"JR2_EFFECTOR_RECEIPTS": exists + ".2", "JR2_EFFECTOR_MODE": "faults", "JR2_EFFECTOR_FAULT_SEED": "x"}, "JR2_EFFECTOR_FAULT_SEED"},
	} {
		p := r.site.run(t, tc.env)
		if code := p.exit(t, 10*time.Second); code != 1 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.env, code, p.stderr.String(), tc.want)
		}
	}
}

// A killed Effector leaves its receipts TRUNCATED, not TAMPERED: every
// record it wrote before the kill verifies, the last effect's outcome
// among them; and a record changed in that prefix is TAMPERED.
func TestReceiptsKilled(t *testing.T) {
	r := newRig(t, nil)
	path := filepath.Join(t.TempDir(), "killed.jsonl")
	p := r.site.run(t, map[string]string{"JR2_EFFECTOR_RECEIPTS": path})
	c := p.client()
	if a, err := c.Start(context.Background(), "k1", noteStart(r)); err != nil || a.Status != 202 {
		t.Fatalf("start: %v %+v", err, a)
	}
	settle(t, c, "k1", p.addr)
	p.cmd.Process.Kill()
	p.exit(t, 10*time.Second)
	var out, errOut bytes.Buffer
	code := bundle.VerifyMain([]string{path}, &out, &errOut)
	if code != 3 || !strings.Contains(out.String(), "TRUNCATED") {
		t.Errorf("killed receipts: exit %d %q %q; want 3, TRUNCATED", code, out.String(), errOut.String())
	}
	recs := receiptRecords(t, path)
	if len(ofKind(recs, "effect-outcome")) != 1 || len(ofKind(recs, "seal")) != 0 {
		t.Errorf("killed receipts: %d records, outcomes %v", len(recs), ofKind(recs, "effect-outcome"))
	}
	noLeakIn(t, path)
	raw, _ := os.ReadFile(path)
	bad := filepath.Join(filepath.Dir(path), "bad.jsonl")
	os.WriteFile(bad, bytes.Replace(raw, []byte(`"method":"POST"`), []byte(`"method":"GET"`), 1), 0o600)
	if code := bundle.VerifyMain([]string{bad}, &out, &errOut); code != 4 {
		t.Errorf("a changed record in killed receipts: exit %d; want 4 (TAMPERED)", code)
	}
}

// TestReplayNonText: a non-text answer's bytes are never recorded (its
// outcome carries none), so its replay has the recorded status, headers
// and content type, and size 0. One whose upstream declared no type (the
// Effector sniffed it live) replays as an empty text answer: no type,
// body "" (docs/effector.md).
func TestReplayNonText(t *testing.T) {
	bin := bytes.Repeat([]byte{0, 1, 2, 0xff}, 64)
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/declared/") {
			w.Header().Set("Content-Type", "application/octet-stream")
		} else {
			w.Header()["Content-Type"] = nil // no Content-Type at all: the Effector sniffs it
		}
		w.Write(bin)
	})
	dir := t.TempDir()
	starts := map[string]*wire.Start{"declared": get(r.url("/declared/1")), "sniffed": get(r.url("/sniffed/1"))}
	order := []string{"declared", "sniffed"}
	live := filepath.Join(dir, "live.jsonl")
	liveOuts, _ := receiptsRun(t, r, map[string]string{"JR2_EFFECTOR_RECEIPTS": live}, starts, order)
	r.up.Close()
	replayOuts, _ := receiptsRun(t, r, map[string]string{"JR2_EFFECTOR_RECEIPTS": filepath.Join(dir, "replay.jsonl"),
		"JR2_EFFECTOR_MODE": "replay", "JR2_EFFECTOR_MODE_FROM": live}, starts, order)
	for i, id := range order {
		var lo, ro wire.Outcome
		if err := json.Unmarshal([]byte(liveOuts[i]), &lo); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(replayOuts[i]), &ro); err != nil {
			t.Fatal(err)
		}
		if lo.Size != int64(len(bin)) || lo.Body != nil || lo.ContentType != "application/octet-stream" {
			t.Errorf("%s live: size %d, body %v, type %q", id, lo.Size, lo.Body != nil, lo.ContentType)
		}
		wantType, wantBody := "application/octet-stream", false
		if id == "sniffed" {
			wantType, wantBody = "", true
		}
		if ro.Kind != wire.OutcomeResponse || ro.Status != 200 || ro.Size != 0 || (ro.Body != nil) != wantBody || (ro.Body != nil && *ro.Body != "") || ro.ContentType != wantType {
			t.Errorf("%s replayed: kind %s status %d size %d body %v type %q; want a 200 of size 0, body %v (empty), type %q",
				id, ro.Kind, ro.Status, ro.Size, ro.Body != nil, ro.ContentType, wantBody, wantType)
		}
	}
}
