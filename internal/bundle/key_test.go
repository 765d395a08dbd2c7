package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
)

// keyed writes a run's bundle signed with priv, naming pub in run-start.
func keyed(t *testing.T, priv ed25519.PrivateKey, pub ed25519.PublicKey) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := New(&buf, Options{Key: priv})
	if _, err := w.Append(KindRunStart, map[string]string{"run": "0a1b2c3d", "mode": "live", "pubkey": FormatKey(pub)}); err != nil {
		t.Fatal(err)
	}
	w.Append(KindPolicy, map[string]string{"hash": "x", "path": "/p"})
	w.Append(KindRunEnd, map[string]int{"exit": 0})
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reseal is the forger: every line rewritten as they like, every hash and
// the seal recomputed, the seal signed with their own key (nil: unsigned).
func reseal(t *testing.T, raw []byte, edit func(i int, line string) string, priv ed25519.PrivateKey) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	prev := Genesis
	var out bytes.Buffer
	for i, l := range lines {
		l = edit(i, l)
		_, after, _ := strings.Cut(l, `"prev":"`)
		l = strings.Replace(l, `"prev":"`+after[:64], `"prev":"`+prev, 1)
		if strings.Contains(l, `"kind":"seal"`) {
			head := l[:strings.Index(l, `,"records":`)]
			line := head + `,"records":` + strconv.Itoa(len(lines)-1) + `}`
			if priv != nil {
				sig := ed25519.Sign(priv, []byte(line))
				line = line[:len(line)-1] + `,"sig":"` + b64(sig) + `"}`
			}
			sum := sha256.Sum256([]byte(line))
			l = line[:len(line)-1] + `,"seal":"` + hex.EncodeToString(sum[:]) + `"}`
		}
		sum := sha256.Sum256([]byte(l))
		prev = hex.EncodeToString(sum[:])
		out.WriteString(l + "\n")
	}
	return out.Bytes()
}

func TestKeyedSeal(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	fpub, fpriv, _ := ed25519.GenerateKey(rand.Reader)
	real := keyed(t, priv, pub)
	if !bytes.Contains(real, []byte(`"sig":"`)) {
		t.Fatal("the seal carries no signature")
	}
	swapKey := func(i int, l string) string { return strings.Replace(l, FormatKey(pub), FormatKey(fpub), 1) }
	editPolicy := func(i int, l string) string { return strings.Replace(l, `"path":"/p"`, `"path":"/q"`, 1) }
	keepAll := func(i int, l string) string { return l }
	for _, tc := range []struct {
		name string
		raw  []byte
		want ed25519.PublicKey
		res  string
	}{
		{"the real bundle, held to its key", real, pub, "VERIFIED"},
		{"the real bundle, held to itself", real, nil, "VERIFIED"},
		{"the real bundle, held to another key", real, fpub, "TAMPERED (record 1)"},
		{"re-sealed by a forger with their key named", reseal(t, real, swapKey, fpriv), pub, "TAMPERED (record 1)"},
		{"the same forgery, held only to itself", reseal(t, real, swapKey, fpriv), nil, "VERIFIED"},
		{"edited and re-sealed, the real key kept but not its signature", reseal(t, real, editPolicy, fpriv), pub, "TAMPERED (record 4)"},
		{"edited and re-sealed without a signature", reseal(t, real, editPolicy, nil), pub, "TAMPERED (record 4)"},
		{"the forger's re-seal reproduces an honest chain", reseal(t, real, keepAll, priv), pub, "VERIFIED"},
	} {
		res, err := VerifyKeyed(bytes.NewReader(tc.raw), tc.want)
		if err != nil || res.String() != tc.res {
			t.Errorf("%s: %v %v; want %s", tc.name, res, err, tc.res)
		}
	}
	// An unkeyed bundle held to a key is TAMPERED at run-start: it names none.
	var buf bytes.Buffer
	w := New(&buf, Options{})
	w.Append(KindRunStart, map[string]string{"run": "x"})
	w.Seal()
	if res, _ := VerifyKeyed(bytes.NewReader(buf.Bytes()), pub); res.String() != "TAMPERED (record 1)" {
		t.Errorf("an unkeyed bundle held to a key: %v", res)
	}
	if res, _ := VerifyReader(bytes.NewReader(buf.Bytes())); res.String() != "VERIFIED" {
		t.Errorf("an unkeyed bundle: %v", res)
	}
}

func TestVerifyMainPubkey(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	fpub, _, _ := ed25519.GenerateKey(rand.Reader)
	p := t.TempDir() + "/run.jsonl"
	writeFile(t, p, keyed(t, priv, pub))
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--pubkey", FormatKey(pub), p}, 0, "VERIFIED\n"},
		{[]string{"--pubkey", FormatKey(fpub), p}, 4, "TAMPERED (record 1)\n"},
		{[]string{"--pubkey", "ed25519:short", p}, 2, ""},
		{[]string{p}, 0, "VERIFIED\n"},
	} {
		var out, errOut bytes.Buffer
		if code := VerifyMain(tc.args, &out, &errOut); code != tc.code || out.String() != tc.out {
			t.Errorf("%q: exit %d, %q %q; want %d %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.out)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
