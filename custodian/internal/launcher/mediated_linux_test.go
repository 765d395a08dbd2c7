//go:build linux

package launcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/dnsmsg"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/custodian/internal/sni"
)

// TestMediatedHTTPS puts the run's parts together the way the mediator
// will: DNS on the mediator's port 53, TLS on 443 read by SNI and
// terminated with the run's CA. A real curl inside the namespace, with
// every proxy variable unset and only the run's CA trusted, reaches it by
// name; the test sees the DNS question, the SNI name and the plaintext
// request. A dial by IP literal arrives with no name.
func TestMediatedHTTPS(t *testing.T) {
	requireRoot(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("SKIPPED, NOT PROVEN: needs curl")
	}
	n := newNetwork(t)
	ca, err := runca.New("jr2 run test")
	if err != nil {
		t.Fatal(err)
	}
	caDir := t.TempDir()
	caFile := filepath.Join(caDir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var seen []string
	note := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }

	pc, err := n.ListenUDP(53)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q, err := dnsmsg.Parse(buf[:k])
			if err != nil {
				if r := dnsmsg.ErrorReply(q, err); r != nil {
					pc.WriteTo(r, from)
				}
				continue
			}
			if q.Type == dnsmsg.TypeA {
				note("dns " + q.Name)
			}
			a, _ := dnsmsg.Answer(q, n.Mediator)
			pc.WriteTo(a, from)
		}
	}()

	ln, err := n.ListenTCP(443)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serve(ln, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		name, conn, err := sni.Peek(c)
		if err != nil {
			note("sni error " + err.Error())
			return
		}
		note("sni " + name)
		tc := tls.Server(conn, &tls.Config{GetCertificate: ca.GetCertificate})
		req, err := http.ReadRequest(bufio.NewReader(tc))
		if err != nil {
			note("http error " + err.Error())
			return
		}
		note("http " + req.Method + " " + req.Host + req.URL.Path)
		tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"))
		tc.Close()
	})

	reads := append(systemReads(), "/etc/nsswitch.conf", "/etc/host.conf", "/etc/hosts", "/etc/gai.conf", caDir)
	var stdout, stderr bytes.Buffer
	code, err := n.Run(context.Background(), Spec{
		Argv: []string{curl, "-sS", "--max-time", "5", "https://API.example.com/v1/x",
			"https://" + n.Mediator.String() + "/by-ip"},
		Env:       append([]string{"PATH=/usr/bin:/bin"}, runca.TrustEnv(caFile)...),
		ReadPaths: existing(reads),
		Stdout:    &stdout,
		Stderr:    &stderr,
	})
	if err != nil || code != 0 || stdout.String() != "hellohello" {
		t.Fatalf("curl: exit %d, %v, stdout %q, stderr %q; mediator saw %q", code, err, stdout.String(), stderr.String(), seen)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(seen, "\n")
	for _, want := range []string{"dns api.example.com", "sni api.example.com", "http GET API.example.com/v1/x",
		"sni \n", "http GET " + n.Mediator.String() + "/by-ip"} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("the mediator did not see %q; it saw:\n%s", want, got)
		}
	}
}

func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
