package keyecho

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestEcho: the answer holds the key in its three forms; Take returns the
// keys in order, then none.
func TestEcho(t *testing.T) {
	var e Echo
	srv := httptest.NewServer(&e)
	defer srv.Close()
	for _, k := range []string{"a/b", "c"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-Api-Key", k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if k == "a/b" && string(b) != "invalid key a/b (base64 YS9i, hex 612f62)\n" {
			t.Errorf("answer %q", b)
		}
	}
	if got := e.Take(); !slices.Equal(got, []string{"a/b", "c"}) {
		t.Errorf("Take %q; want the two keys in order", got)
	}
	if got := e.Take(); len(got) != 0 {
		t.Errorf("a second Take %q; want none", got)
	}
}
