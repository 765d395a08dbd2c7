package sni

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/fuzz seed files from a live crypto/tls client")

// serverCert is a throwaway self-signed leaf for the TLS server side of
// the replay tests.
func serverCert(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{"api.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// capture returns the bytes a crypto/tls client sends first with cfg.
func capture(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c2.Close()
	go func() {
		tls.Client(c1, cfg).Handshake()
		c1.Close()
	}()
	raw, _, err := ReadClientHello(c2)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	return raw
}

// TestGoClient: a real crypto/tls client's ClientHello gives its server
// name, and the replaying conn carries a full TLS handshake and data to a
// crypto/tls server afterwards.
func TestGoClient(t *testing.T) {
	cert := serverCert(t)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"tls13", &tls.Config{ServerName: "API.Example.com", InsecureSkipVerify: true}, "api.example.com"},
		{"tls12-alpn", &tls.Config{ServerName: "api.example.com", MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, InsecureSkipVerify: true}, "api.example.com"},
		{"ip-literal-no-sni", &tls.Config{ServerName: "10.231.0.1", InsecureSkipVerify: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				tc := tls.Client(c, tc.cfg)
				err = tc.Handshake()
				if err == nil {
					_, err = tc.Write([]byte("ping"))
				}
				done <- err
			}()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			name, conn, err := Peek(c)
			if err != nil || name != tc.want {
				t.Fatalf("Peek = %q, %v; want %q", name, err, tc.want)
			}
			srv := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}})
			buf := make([]byte, 4)
			if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("after replay: read %q, %v", buf, err)
			}
			if err := <-done; err != nil {
				t.Fatalf("client: %v", err)
			}
		})
	}
}

// refragment re-frames the handshake bytes of raw into records of at most
// size bytes each.
func refragment(t testing.TB, raw []byte, size int) []byte {
	t.Helper()
	var hs []byte
	for r := raw; len(r) > 0; {
		n := int(binary.BigEndian.Uint16(r[3:]))
		hs = append(hs, r[5:5+n]...)
		r = r[5+n:]
	}
	var out []byte
	for len(hs) > 0 {
		n := min(size, len(hs))
		out = append(out, typeHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, hs[:n]...)
		hs = hs[n:]
	}
	return out
}

// TestSplitAcrossRecordsAndReads: a ClientHello spread over many records,
// read one byte at a time, gives the same name, and nothing past its last
// record is consumed.
func TestSplitAcrossRecordsAndReads(t *testing.T) {
	raw := capture(t, &tls.Config{ServerName: "api.example.com"})
	for _, size := range []int{1, 3, 100, 1 << 14} {
		split := refragment(t, raw, size)
		in := bytes.NewReader(append(bytes.Clone(split), "NEXT"...))
		got, name, err := ReadClientHello(iotest.OneByteReader(in))
		if err != nil || name != "api.example.com" || !bytes.Equal(got, split) {
			t.Fatalf("size %d: %q, %v; read %d of %d bytes", size, name, err, len(got), len(split))
		}
		if rest, _ := io.ReadAll(in); string(rest) != "NEXT" {
			t.Fatalf("size %d: consumed past the ClientHello; left %q", size, rest)
		}
	}
}

// TestEveryCutFails: a ClientHello cut anywhere is an error, never a name.
func TestEveryCutFails(t *testing.T) {
	raw := capture(t, &tls.Config{ServerName: "api.example.com"})
	for n := range len(raw) {
		if _, name, err := ReadClientHello(bytes.NewReader(raw[:n])); err == nil || name != "" {
			t.Fatalf("cut at %d: %q, %v", n, name, err)
		}
	}
}

// hello builds a ClientHello handshake message with the given extensions
// block (nil: no extensions block at all).
func hello(exts []byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)                // session id
	body = append(body, 0, 2, 0x13, 0x01) // one cipher suite
	body = append(body, 1, 0)             // null compression
	if exts != nil {
		body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
		body = append(body, exts...)
	}
	msg := []byte{typeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

func ext(typ uint16, data []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// serverNameExt builds a server_name extension listing entries (type, name).
func serverNameExt(entries ...any) []byte {
	var list []byte
	for i := 0; i < len(entries); i += 2 {
		list = append(list, byte(entries[i].(int)))
		name := entries[i+1].(string)
		list = binary.BigEndian.AppendUint16(list, uint16(len(name)))
		list = append(list, name...)
	}
	return ext(extServerName, append(binary.BigEndian.AppendUint16(nil, uint16(len(list))), list...))
}

func record(msg []byte) []byte {
	return append([]byte{typeHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// handmade are ClientHellos built by hand: name wanted, or the reason.
var handmade = []struct {
	file   string
	msg    []byte
	name   string
	reason string
}{
	{"plain", hello(serverNameExt(0, "api.example.com")), "api.example.com", ""},
	{"upper", hello(serverNameExt(0, "API.Example.COM")), "api.example.com", ""},
	{"other-ext-first", hello(cat(ext(16, []byte{0, 3, 2, 'h', '2'}), serverNameExt(0, "a.example"))), "a.example", ""},
	{"unknown-name-type-skipped", hello(serverNameExt(7, "zzz", 0, "a.example")), "a.example", ""},
	{"no-extensions", hello(nil), "", ""},
	{"no-sni", hello(ext(16, []byte{0, 3, 2, 'h', '2'})), "", ""},
	{"two-host-names", hello(serverNameExt(0, "a.example", 0, "b.example")), "", "duplicate-name"},
	{"duplicate-extension", hello(cat(serverNameExt(0, "a.example"), serverNameExt(0, "a.example"))), "", "duplicate-extension"},
	{"ip-literal", hello(serverNameExt(0, "10.0.0.1")), "", "ip-literal"},
	{"ipv6-literal", hello(serverNameExt(0, "::1")), "", "ip-literal"},
	{"trailing-dot", hello(serverNameExt(0, "a.example.")), "", "invalid-name"},
	{"space", hello(serverNameExt(0, "a example")), "", "invalid-name"},
	{"nul", hello(serverNameExt(0, "a\x00.example")), "", "invalid-name"},
	{"empty-name", hello(serverNameExt(0, "")), "", "malformed"},
	{"empty-list", hello(ext(extServerName, []byte{0, 0})), "", "malformed"},
	{"list-overruns", hello(ext(extServerName, []byte{0, 9, 0, 0, 1, 'a'})), "", "malformed"},
	{"ext-overruns", hello([]byte{0, 0, 0, 40, 0}), "", "malformed"},
	{"session-id-33", func() []byte { m := hello(nil); m[4+34] = 33; return m }(), "", "malformed"},
	{"not-client-hello", func() []byte { m := hello(nil); m[0] = 2; return m }(), "", "not-client-hello"},
	{"length-lies", func() []byte { m := hello(nil); m[3]++; return m }(), "", "not-client-hello"},
}

func TestParseHello(t *testing.T) {
	for _, tc := range handmade {
		name, err := ParseHello(tc.msg)
		var e *Error
		switch {
		case tc.reason == "" && (err != nil || name != tc.name):
			t.Errorf("%s: %q, %v; want %q", tc.file, name, err, tc.name)
		case tc.reason != "" && (!errors.As(err, &e) || e.Reason != tc.reason || name != ""):
			t.Errorf("%s: %q, %v; want reason %s", tc.file, name, err, tc.reason)
		}
	}
}

func TestRecordLayer(t *testing.T) {
	good := hello(serverNameExt(0, "a.example"))
	big := hello(ext(21, make([]byte, MaxHello))) // padding past the bound
	for _, tc := range []struct {
		name   string
		in     []byte
		reason string
	}{
		{"http", []byte("GET / HTTP/1.1\r\n"), "not-handshake"},
		{"sslv2", []byte{0x80, 0x2e, 0x01, 0x00, 0x02}, "not-handshake"},
		{"record-version", cat([]byte{22, 2, 0, 0, 4}, good), "record-version"},
		{"empty-record", []byte{22, 3, 1, 0, 0}, "record-length"},
		{"record-too-long", []byte{22, 3, 1, 0x40, 0x01}, "record-length"},
		{"server-hello", record(func() []byte { m := hello(nil); m[0] = 2; return m }()), "not-client-hello"},
		{"too-large", record(big[:1<<14]), "too-large"},
		{"declared-too-large", record([]byte{1, 0x01, 0, 0}), "too-large"},
	} {
		_, name, err := ReadClientHello(bytes.NewReader(tc.in))
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.reason || name != "" {
			t.Errorf("%s: %q, %v; want reason %s", tc.name, name, err, tc.reason)
		}
	}
}

// Seed files: the hand-made messages, and live captures from crypto/tls
// (written only under -update, since a live ClientHello is random).
func TestSeedCorpus(t *testing.T) {
	parseDir := filepath.Join("testdata", "fuzz", "FuzzParseHello")
	readDir := filepath.Join("testdata", "fuzz", "FuzzReadClientHello")
	if *update {
		os.MkdirAll(parseDir, 0o755)
		os.MkdirAll(readDir, 0o755)
		for _, tc := range handmade {
			writeSeed(t, filepath.Join(parseDir, tc.file), tc.msg)
		}
		writeSeed(t, filepath.Join(readDir, "go-tls13"), capture(t, &tls.Config{ServerName: "api.example.com"}))
		writeSeed(t, filepath.Join(readDir, "go-tls12-alpn"), capture(t, &tls.Config{ServerName: "api.example.com", MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}))
		writeSeed(t, filepath.Join(readDir, "go-ip-literal"), capture(t, &tls.Config{ServerName: "10.231.0.1"}))
		writeSeed(t, filepath.Join(readDir, "go-tls13-split"), refragment(t, capture(t, &tls.Config{ServerName: "api.example.com"}), 200))
	}
	for _, tc := range handmade {
		if got := readSeed(t, filepath.Join(parseDir, tc.file)); !bytes.Equal(got, tc.msg) {
			t.Errorf("%s: stale seed; run go test -run TestSeedCorpus -update", tc.file)
		}
	}
	for file, want := range map[string]string{
		"go-tls13": "api.example.com", "go-tls12-alpn": "api.example.com",
		"go-ip-literal": "", "go-tls13-split": "api.example.com",
	} {
		raw := readSeed(t, filepath.Join(readDir, file))
		if _, name, err := ReadClientHello(bytes.NewReader(raw)); err != nil || name != want {
			t.Errorf("seed %s: %q, %v; want %q", file, name, err, want)
		}
	}
}

func writeSeed(t *testing.T, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readSeed(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSeedCorpus -update)", err)
	}
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
	s, ok2 := strings.CutSuffix(s, ")")
	v, err := strconv.Unquote(s)
	if !ok || !ok2 || err != nil {
		t.Fatalf("%s: not a fuzz seed file", file)
	}
	return []byte(v)
}

// checkName fails t unless name is empty or a checked host name.
func checkName(t *testing.T, name string) {
	if name != "" && (strings.ToLower(name) != name || strings.ContainsAny(name, " \"=\x00:")) {
		t.Fatalf("returned name %q", name)
	}
}

func FuzzParseHello(f *testing.F) {
	for _, tc := range handmade {
		f.Add(tc.msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		name, err := ParseHello(msg)
		if err != nil && name != "" {
			t.Fatalf("error %v with name %q", err, name)
		}
		checkName(t, name)
	})
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(record(hello(serverNameExt(0, "a.example"))))
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, name, err := ReadClientHello(bytes.NewReader(in))
		if len(raw) > len(in) || !bytes.Equal(raw, in[:len(raw)]) || len(raw) > MaxHello {
			t.Fatalf("raw is not a prefix of the input (%d of %d bytes)", len(raw), len(in))
		}
		if err != nil && name != "" {
			t.Fatalf("error %v with name %q", err, name)
		}
		checkName(t, name)
	})
}

func BenchmarkReadClientHello(b *testing.B) {
	raw := capture(b, &tls.Config{ServerName: "api.example.com"})
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, name, err := ReadClientHello(bytes.NewReader(raw)); err != nil || name == "" {
			b.Fatal(name, err)
		}
	}
}
