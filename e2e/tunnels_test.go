//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testTunnels: a host that no secret is bound to is reached byte for byte,
// by address and by a name the Custodian resolves; every spelling of a
// guarded address, and every name that resolves to one, is refused with
// 403 before anything is dialled there.
func (w *world) testTunnels(t *testing.T) {
	ns := w.ns
	run(t, "byte for byte", func(t *testing.T) {
		for _, target := range []string{ns.echo(), "nshost.test:" + strconv.Itoa(nsEchoPort)} {
			conn, br := w.connect(t, target, 200)
			payload := make([]byte, 256<<10)
			rand.Read(payload)
			for i := 0; i < 256; i++ {
				payload[i] = byte(i) // every byte value, whatever rand gave
			}
			// The client keeps its half open and reads the echo to its
			// length: Envoy's HTTP/1 connection manager closes the whole
			// connection at a client's FIN (envoyproxy/envoy#2066), so a
			// half-close is not a case both hosts can take (envoy/README.md).
			go conn.Write(payload)
			conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			got := make([]byte, len(payload))
			n, err := io.ReadFull(br, got)
			got = got[:n]
			conn.Close()
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%s: %d of %d bytes came back equal (%v)", target, commonPrefix(got, payload), len(payload), err)
			}
			w.logOf(target).expect(t, lineFor("action", "tunnel", "target", target))
		}
	})

	// The egress listener's own refusals, as raw bytes: a method other than
	// CONNECT (405, not-connect) and CONNECT targets that are not host:port
	// (400, target). Nothing is dialled for either.
	run(t, "egress refusals", func(t *testing.T) {
		for _, tc := range []struct {
			line   string
			status int
			body   string
		}{
			{"GET http://" + ns.https() + "/ HTTP/1.1\r\nHost: " + ns.https(), 405, "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY"},
			{"CONNECT example.test:0 HTTP/1.1\r\nHost: example.test:0", 400, "jr2 custodian: a CONNECT target is host:port: the port must be a number from 1 to 65535"},
			// No port: Envoy's HTTP/1 codec refuses it before the module
			// sees it, with its own text (envoy/README.md).
			{"CONNECT example.test HTTP/1.1\r\nHost: example.test", 400, map[bool]string{true: "Bad Request", false: "jr2 custodian: a CONNECT target is host:port: "}[w.host.Name() == "envoy"]},
		} {
			conn, err := net.DialTimeout("tcp", w.run.Egress, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "%s\r\n\r\n", tc.line)
			conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				conn.Close()
				t.Fatalf("%q: %v", tc.line, err)
			}
			b, _ := io.ReadAll(resp.Body)
			conn.Close()
			if resp.StatusCode != tc.status || !strings.HasPrefix(string(b), tc.body) {
				t.Errorf("%q: %d %q, want %d %q…", strings.SplitN(tc.line, "\r", 2)[0], resp.StatusCode, b, tc.status, tc.body)
			}
		}
	})

	run(t, "curl to an HTTPS host that is not bound", func(t *testing.T) {
		resp := curlClient.do(t, w.env, request{Method: "GET", URL: httpsURL(ns.https(), "/hello")})
		if want := "hello from the test namespace, GET /hello\n"; resp.Status != 200 || resp.Body != want {
			t.Fatalf("%d %q, want 200 %q", resp.Status, resp.Body, want)
		}
		w.logOf(ns.https()).expect(t, lineFor("action", "tunnel", "target", ns.https()))
	})

	// Where a guarded tunnel would land: nothing may ever connect.
	c4 := newCounter(t, "tcp4", "127.0.0.1:0")
	c6 := newCounter(t, "tcp6", "[::1]:0")
	_, p4, _ := net.SplitHostPort(c4.addr)
	_, p6, _ := net.SplitHostPort(c6.addr)
	type guardCase struct{ spelled, target, why string } // target: as answered, when not as spelled
	spelled := []guardCase{
		{"127.0.0.1:" + p4, "", "loopback"},
		{"127.1:" + p4, "", "loopback"},
		{"127.0.1:" + p4, "", "loopback"},
		{"0x7f.0.0.1:" + p4, "", "loopback"},
		{"0x7f000001:" + p4, "", "loopback"},
		{"2130706433:" + p4, "", "loopback"},
		{"0177.0.0.1:" + p4, "", "loopback"},
		{"[::1]:" + p6, "", "loopback"},
		{"[::ffff:127.0.0.1]:" + p4, "", "IPv4-mapped form of loopback"},
		{"[::FFFF:7F00:2]:" + p4, "[::ffff:127.0.0.2]:" + p4, "IPv4-mapped form of loopback"}, // respelled: an address has one spelling
		{"[64:ff9b::7f00:1]:" + p4, "", "NAT64 (well-known prefix) form of loopback"},
		{"[2002:7f00:1::]:" + p4, "", "6to4 form of loopback"},
		{"localhost:" + p4, "", "a localhost name"},
		{"LOCALHOST.:" + p6, "localhost:" + p6, "a localhost name"},
		{"foo.localhost:" + p4, "", "a localhost name"},
		{"0.0.0.0:" + p4, "", "unspecified (this network)"},
		{"0:" + p4, "", "unspecified (this network)"},
		{"[::]:" + p6, "", "unspecified"},
		{"169.254.169.254:80", "", "link-local (the cloud metadata address 169.254.169.254 included)"},
		{"[fd00:ec2::254]:80", "", "AWS metadata (IPv6)"},
		{"100.100.100.200:80", "", "Alibaba Cloud metadata"},
		{"168.63.129.16:80", "", "Azure metadata and wire server"},
		{"224.0.0.1:" + p4, "", "multicast"},
		{"255.255.255.255:" + p4, "", "limited broadcast"},
		{"[fe80::1]:" + p6, "", "link-local"},
	}
	// Names the Custodian's /etc/hosts resolves to guarded addresses:
	// refused on the address it would dial.
	resolved := []guardCase{
		{"evil.test:" + p4, "", "loopback"},
		{"evil6.test:" + p6, "", "loopback"},
		{"metadata.test:80", "", "link-local (the cloud metadata address 169.254.169.254 included)"},
		{"alibaba.test:80", "", "Alibaba Cloud metadata"},
	}
	for i, cases := range [][]guardCase{spelled, resolved} {
		for _, c := range cases {
			// The case's name has no port the run chose, so the same cases
			// have the same names against every host (checkCases).
			name := strings.NewReplacer(":"+p4, ":PORT4", ":"+p6, ":PORT6").Replace(c.spelled)
			run(t, "guard "+name, func(t *testing.T) {
				target, why := c.target, c.why
				if target == "" {
					target = c.spelled
				}
				if i == 1 {
					why = w.host.ResolvedWhy(why)
				}
				body := w.connectRefused(t, c.spelled, 403)
				if want := "jr2 custodian: " + target + " is guarded (" + why + "); a tunnel never reaches it"; body != want {
					t.Errorf("body %q, want %q", body, want)
				}
				w.logOf(target).expect(t, lineFor("action", "refuse", "target", target, "reason", "guard"))
			})
		}
	}
	if n := c4.accepted.Load() + c6.accepted.Load(); n != 0 {
		t.Errorf("%d guarded tunnels reached loopback", n)
	}
}

// sendConnect sends CONNECT target to the egress listener and reads the
// answer's head.
func (w *world) sendConnect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", w.run.Egress, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		conn.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return conn, br, resp
}

// connect returns the tunnel to target, which must be answered want.
func (w *world) connect(t *testing.T, target string, want int) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, br, resp := w.sendConnect(t, target)
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		t.Fatalf("CONNECT %s: %d %q, want %d", target, resp.StatusCode, b, want)
	}
	conn.SetReadDeadline(time.Time{})
	return conn, br
}

// connectRefused returns the body of the answer to CONNECT target, whose
// status must be want.
func (w *world) connectRefused(t *testing.T, target string, want int) string {
	t.Helper()
	conn, _, resp := w.sendConnect(t, target)
	defer conn.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("CONNECT %s: %d %q, want %d", target, resp.StatusCode, b, want)
	}
	return string(b)
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
