// Package runtest holds what the tests of a contained run share: reading a
// bundle's records back, finding records by their fields, and the check
// that a held value appears in no form in some bytes.
//
// Invariant: only tests import it.
package runtest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

// Rec is one record, decoded.
type Rec map[string]any

// Parse decodes each line of a bundle that is a JSON object.
func Parse(raw []byte) []Rec {
	var out []Rec
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var r Rec
		if json.Unmarshal(line, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// Find returns the records of kind whose fields print as every value of
// want (fmt.Sprint on both sides: 443 matches the decoded 443.0's "443").
func Find(rs []Rec, kind string, want Rec) []Rec {
	var out []Rec
next:
	for _, r := range rs {
		if r["kind"] != kind {
			continue
		}
		for k, v := range want {
			if fmt.Sprint(r[k]) != fmt.Sprint(v) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// Forms are spellings a leaked value could take: itself, base64 (standard
// and URL, padded or not), hex, query escaping.
func Forms(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		hex.EncodeToString([]byte(v)), url.QueryEscape(v)}
}

// AssertNoValue fails t when b holds any of Forms(value); what names b.
func AssertNoValue(t testing.TB, what string, b []byte, value string) {
	t.Helper()
	for _, f := range Forms(value) {
		if bytes.Contains(b, []byte(f)) {
			t.Errorf("%s holds the value (as %q)", what, f)
		}
	}
}
