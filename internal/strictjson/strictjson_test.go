package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeObjectRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1,"a":2}`: "a: given twice",
		`{"A":1}`:       "A: unknown field",
		`{"b":1}`:       "b: unknown field",
		`[]`:            "want an object",
		`null`:          "want an object",
	} {
		_, err := DecodeObject("x", json.RawMessage(raw), "a")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeObject(%s) = %v, want %q", raw, err, want)
		}
	}
	o, err := DecodeObject("", json.RawMessage(`{"a":null}`), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Str("a", false); err == nil || !strings.Contains(err.Error(), "must not be null") {
		t.Errorf("null: %v", err)
	}
}

func TestQuoteCuts(t *testing.T) {
	q := Quote(strings.Repeat("é", 40))
	if len(q) > 70 || !strings.HasSuffix(q, "…") {
		t.Errorf("Quote = %q", q)
	}
}

// FuzzString: the fast path and encoding/json read every JSON string the
// same, and refuse the same non-strings.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b"`, `"\u00e9\n"`, `"é"`, "\"\xff\"", `"a`, `""`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		werr := json.Unmarshal(raw, &want)
		got, err := String("p", raw)
		if (werr == nil) != (err == nil) && len(raw) > 0 && raw[0] == '"' {
			t.Fatalf("%q: json says %v, String says %v", raw, werr, err)
		}
		if werr == nil && err == nil && got != want {
			t.Fatalf("%q: %q, want %q", raw, got, want)
		}
	})
}
