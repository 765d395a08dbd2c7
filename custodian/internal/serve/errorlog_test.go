package serve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// What net/http prints itself quoted the peer. A
// ClientHello offering ALPN ["jr2-held-KEY", "/v1/secret-path"] put both
// on stderr ("http: TLS handshake error … unsupported application
// protocols"); an ALPN shaped like a contract line put one in the output.
// Every server's ErrorLog now writes one contract line with a fixed word,
// and nothing goes to the standard logger.
func TestHandshakeErrorsAreContractLines(t *testing.T) {
	var std bytes.Buffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)
	f := newFixture(t, nil)
	forged := "jr2.custodian action=tunnel target=forged.example:443"
	for _, c := range []struct {
		name  string
		hello func(net.Conn)
	}{
		{"ALPN with a stand-in and a path", func(c net.Conn) {
			tls.Client(c, &tls.Config{RootCAs: f.jca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{keySI, "/v1/secret-path"}}).Handshake()
		}},
		{"ALPN shaped like a contract line", func(c net.Conn) {
			tls.Client(c, &tls.Config{RootCAs: f.jca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{forged}}).Handshake()
		}},
		{"not TLS at all", func(c net.Conn) {
			io.WriteString(c, "GET /"+keySI+" HTTP/1.1\r\nHost: x\r\n\r\n")
			io.ReadAll(c)
		}},
		{"a certificate it does not trust", func(c net.Conn) {
			tls.Client(c, &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}).Handshake()
		}},
	} {
		before := strings.Count(f.log.String(), "action=error")
		conn, err := net.Dial("tcp", f.egress)
		must(t, err)
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", f.up.target, f.up.target)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		must(t, err)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: CONNECT %d", c.name, resp.StatusCode)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		c.hello(&bufConn{Conn: conn, r: br})
		conn.Close()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(f.log.String(), "action=error") == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if strings.Count(f.log.String(), "jr2.custodian action=error listener=intercept reason=tls-handshake\n") != before+1 {
			t.Errorf("%s: no error line, or not the contract's:\n%s", c.name, f.log.String())
		}
	}
	for _, bad := range []string{"jr2-held-", "secret-path", "forged", "TLS handshake error", "127.0.0.1:"} {
		for _, l := range strings.Split(f.log.String(), "\n") {
			if strings.Contains(l, bad) && !strings.HasPrefix(l, "jr2.custodian ready ") {
				t.Errorf("the log holds %q: %q", bad, l)
			}
		}
	}
	if std.Len() != 0 {
		t.Errorf("net/http wrote to the standard logger:\n%s", std.String())
	}
}
