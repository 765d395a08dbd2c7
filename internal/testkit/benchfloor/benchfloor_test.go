package benchfloor

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/testkit/testpki"
)

// A request through the floor reaches its CONNECT target over verified TLS
// and comes back byte for byte, twice on one connection.
func TestFloorRelaysBytes(t *testing.T) {
	ca := testpki.NewCA(t, "floor test CA")
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // whole first: Go's HTTP/1 server stops a body once its answer begins
		w.Write(b)
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "127.0.0.1").TLS}}
	up.StartTLS()
	defer up.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go Serve(l, ca.Leaf(t, "127.0.0.1").TLS, ca.Pool())
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()}), TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, body := range []string{"first \x00 body", strings.Repeat("x", 100000)} {
		resp, err := c.Post(up.URL, "application/octet-stream", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != body {
			t.Fatalf("echo of %d bytes came back as %d: %v", len(body), len(got), err)
		}
	}
}
