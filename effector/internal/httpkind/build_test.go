package httpkind

import (
	"net/url"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
)

var testValues = map[string]string{
	"TOKEN": "a b/c?d#e%f+g=h&i;j:k@l~m_n.o-p",
	"PLAIN": "plainvalue123",
	"CTRL":  "line1\nline2-value",
}

func values(name string) ([]byte, bool) {
	v, ok := testValues[name]
	return []byte(v), ok
}

func TestEscapeSegment(t *testing.T) {
	for in, want := range map[string]string{
		"abcXYZ019-._~":       "abcXYZ019-._~",
		"a b":                 "a%20b",
		"/?#[]@!$&'()*+,;=:%": "%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%25",
		"ü":                   "%C3%BC",
		"\x00\xff":            "%00%FF",
	} {
		if got := escapeSegment(in); got != want {
			t.Errorf("escapeSegment(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBuildURL pins how a url is built: a secret is one encoded segment,
// path segments go after the path's one trailing '/' and before the query.
func TestBuildURL(t *testing.T) {
	cases := []struct {
		name    string
		url     wire.Value
		path    []string
		want    string
		refused string
	}{
		{"as written", wire.Value{wire.Text("https://api.example.com/v1/items?x=1&y=%20#frag")}, nil,
			"https://api.example.com/v1/items?x=1&y=%20#frag", ""},
		{"secret as one segment", wire.Value{wire.Text("https://api.example.com/v1/items/"), wire.Secret("TOKEN"), wire.Text("/more")}, nil,
			"https://api.example.com/v1/items/a%20b%2Fc%3Fd%23e%25f%2Bg%3Dh%26i%3Bj%3Ak%40l~m_n.o-p/more", ""},
		{"segments after the trailing slash", wire.Value{wire.Text("https://api.example.com/v1/items/")}, []string{"a b", "c"},
			"https://api.example.com/v1/items/a%20b/c", ""},
		{"segments with no trailing slash", wire.Value{wire.Text("https://api.example.com/v1/items")}, []string{"x/y"},
			"https://api.example.com/v1/items/x%2Fy", ""},
		{"segments before the query", wire.Value{wire.Text("https://api.example.com/v1/?q=1")}, []string{"s"},
			"https://api.example.com/v1/s?q=1", ""},
		{"segments on a url with no path", wire.Value{wire.Text("https://api.example.com")}, []string{"s"},
			"https://api.example.com/s", ""},
		{"segments on the root", wire.Value{wire.Text("https://api.example.com/")}, []string{"s", "t"},
			"https://api.example.com/s/t", ""},
		{"secret then segments", wire.Value{wire.Text("https://api.example.com/v1/"), wire.Secret("PLAIN")}, []string{"..x", ".x."},
			"https://api.example.com/v1/plainvalue123/..x/.x.", ""},
		{"dot refused", wire.Value{wire.Text("https://api.example.com/v1/")}, []string{"a", "."}, "", "path[1]"},
		{"dot dot refused", wire.Value{wire.Text("https://api.example.com/v1/")}, []string{".."}, "", "path[0]"},
		{"empty refused", wire.Value{wire.Text("https://api.example.com/v1/")}, []string{""}, "", "path[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := joinURL(c.url, values)
			if err != nil {
				t.Fatal(err)
			}
			got, refused := appendSegments(raw, c.path)
			if c.refused != "" {
				if !strings.HasPrefix(refused, c.refused) {
					t.Fatalf("refused %q, want %s…", refused, c.refused)
				}
				return
			}
			if refused != "" || got != c.want {
				t.Fatalf("built %q (refused %q)\nwant  %q", got, refused, c.want)
			}
			if _, err := parseTarget(got); err != nil {
				t.Errorf("the built url does not parse: %v", err)
			}
		})
	}
}

func TestParseTargetRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"ftp://api.example.com/":    "scheme",
		"api.example.com/v1":        "scheme",
		"https:///v1":               "name the host",
		"https://user:pw@a.example": "credentials",
		"https://a.example:0/":      "port",
		"https://a.example:99999/":  "port",
		"https://a.example/%zz":     "not a url",
		"mailto:x@a.example":        "scheme",
		"https://a.example/a b":     "percent-encoded",
		"https://a.example/ü":       "percent-encoded",
	} {
		_, err := parseTarget(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTarget(%q) = %v, want %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "a.example") {
			t.Errorf("the reason quotes the url: %v", err)
		}
	}
}

// FuzzBuildURL: for any url text and segments, building never panics, and
// a built url parses back to the definition's path followed by exactly the
// segments given.
func FuzzBuildURL(f *testing.F) {
	f.Add("https://api.example.com/v1/", "a b", "c/d")
	f.Add("https://api.example.com", "..", "")
	f.Add("https://api.example.com/x?y#z", "%2e", "\x00")
	f.Fuzz(func(t *testing.T, text, seg1, seg2 string) {
		u0, err := parseTarget(text)
		if err != nil {
			return
		}
		segs := []string{seg1, seg2}
		got, refused := appendSegments(text, segs)
		for _, s := range segs {
			if s == "" || s == "." || s == ".." {
				if refused == "" {
					t.Fatalf("segment %q not refused", s)
				}
				return
			}
		}
		if refused != "" {
			t.Fatalf("refused %q", refused)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("built %q does not parse: %v", got, err)
		}
		if u.Host != u0.Host || u.RawQuery != u0.RawQuery {
			t.Fatalf("host or query moved: %q → %q", text, got)
		}
		parts := strings.Split(u.EscapedPath(), "/")
		if len(parts) < 2 {
			t.Fatalf("path %q", u.EscapedPath())
		}
		for i, s := range segs {
			dec, err := url.PathUnescape(parts[len(parts)-2+i])
			if err != nil || dec != s {
				t.Fatalf("segment %d: %q, want %q (url %q)", i, dec, s, got)
			}
		}
	})
}
