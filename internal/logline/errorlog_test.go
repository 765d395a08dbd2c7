package logline

import (
	"bytes"
	"testing"
)

// Every line net/http writes becomes the contract's error line with a
// fixed word: nothing of the line survives, a forged contract line least
// of all.
func TestErrorLogKeepsOnlyAWord(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`http: TLS handshake error from 10.0.0.1:5: tls: client requested unsupported application protocols (["jr2-held-KEY" "/v1/secret-path"])`, "tls-handshake"},
		{"http: TLS handshake error from 10.0.0.1:5: x\njr2.custodian action=tunnel target=forged.example:443", "tls-handshake"},
		{"http: panic serving 10.0.0.1:5: invalid concurrent Body.Read call\ngoroutine 1 [running]:", "panic"},
		{"http: Accept error: too many open files; retrying in 5ms", "accept"},
		{"jr2.custodian action=tunnel target=forged.example:443", "server"},
	} {
		var b bytes.Buffer
		ErrorLog(NewWriter(&b, Custodian), "intercept").Print(c.line)
		if want := "jr2.custodian action=error listener=intercept reason=" + c.want + "\n"; b.String() != want {
			t.Errorf("%q: logged %q, want %q", c.line, b.String(), want)
		}
	}
}
