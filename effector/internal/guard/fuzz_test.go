package guard

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
)

// FuzzCheck: whatever an agent's process sends to the port — any time,
// nonce, signature, target and body — Check does not panic, and without
// the key nothing passes.
func FuzzCheck(f *testing.F) {
	f.Add("1760000600000", "nonce-1", "kOvJYyx7bfPXIycXdZ3A1ONII9rCa5pAGp84DsPu9q8", "/effects/e1", []byte(`{"kind":"http"}`))
	f.Add("", "", "", "/healthz", []byte(nil))
	f.Add("01", "a.b", "====", "/effects/..%2f", []byte("\x00"))
	f.Fuzz(func(t *testing.T, ts, nonce, sig, target string, body []byte) {
		if target == "" || target[0] != '/' {
			target = "/" + target
		}
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		r.RequestURI = target
		r.Header.Set(wire.HeaderTime, ts)
		r.Header.Set(wire.HeaderNonce, nonce)
		r.Header.Set(wire.HeaderSignature, sig)
		if _, ok := newGuard().Check(r); ok {
			t.Fatalf("passed without the key: %q %q %q", ts, nonce, sig)
		}
	})
}
