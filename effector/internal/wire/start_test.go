package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeStartAccepts(t *testing.T) {
	cases := []struct {
		name, body string
		check      func(*Start) bool
	}{
		{"white space around and inside", " \n{ \"kind\" : \"http\" ,\t\"http\":{\"method\":\"GET\",\"url\":[ {\"text\":\"https://a.example/\"} ]}}\n ",
			func(s *Start) bool { return s.HTTP.URL[0].Value == "https://a.example/" }},
		{"escaped key means the same key", `{"\u006bind":"http","http":{"method":"GET","url":[{"text":"https://a.example/"}]}}`,
			func(s *Start) bool { return s.Kind == KindHTTP }},
		{"secret as its own segment", `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/v1/"},{"secret":"T0KEN"},{"text":"/x?y=1"}]}}`,
			func(s *Start) bool { return reflect.DeepEqual(s.Secrets(), []string{"T0KEN"}) }},
		{"json body null", `{"kind":"http","http":{"method":"POST","url":[{"text":"https://a.example/"}],"body":{"json":null}}}`,
			func(s *Start) bool { return string(s.HTTP.Body.JSON) == "null" }},
		{"json body compacted", `{"kind":"http","http":{"method":"POST","url":[{"text":"https://a.example/"}],"body":{"json":{ "a" : [1, 2] }}}}`,
			func(s *Start) bool { return string(s.HTTP.Body.JSON) == `{"a":[1,2]}` }},
		{"empty path list", `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/"}],"path":[]}}`,
			func(s *Start) bool { return s.HTTP.Path != nil && len(s.HTTP.Path) == 0 }},
		{"secrets from every place", `{"kind":"http","http":{"method":"GET","url":[{"text":"https://a.example/"},{"secret":"B-url"}],"headers":{"x":[{"secret":"C.hdr"}]},"auth":{"type":"text","secret":"A_auth"}}}`,
			func(s *Start) bool { return reflect.DeepEqual(s.Secrets(), []string{"A_auth", "B-url", "C.hdr"}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeStart([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(s) {
				t.Errorf("decoded %#v", s)
			}
			// What decodes encodes to something that decodes the same.
			enc, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeStart(enc)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Errorf("round trip: %v\n%s", err, enc)
			}
		})
	}
}

func TestFraming(t *testing.T) {
	for name, want := range map[string]bool{"Host": true, "PROXY-anything": true, "proxy-": true, "te": true, "TE": true,
		"x-te": false, "accept": false, "authorization": false, "hostname": false} {
		if Framing(name) != want {
			t.Errorf("Framing(%q) = %v", name, !want)
		}
	}
}

func TestOutcomeMapStrings(t *testing.T) {
	o := &Outcome{Kind: OutcomeResponse, Status: 200, Headers: map[string][]string{"a-SECRET": {"SECRET"}, "a-other": {"x"}},
		ContentType: "text/SECRET", Body: func() *string { s := "the SECRET"; return &s }()}
	o.MapStrings(func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	})
	o.MapStrings(func(s string) string { return strings.ReplaceAll(s, "SECRET", "[s]") })
	if o.ContentType != "text/[s]" || *o.Body != "the [s]" || o.Headers["a-[s]"][0] != "[s]" || o.Kind != OutcomeResponse {
		t.Errorf("mapped %#v", o)
	}
}
