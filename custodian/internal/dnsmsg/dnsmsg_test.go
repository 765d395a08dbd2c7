package dnsmsg

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/fuzz seed files")

var mediator = netip.MustParseAddr("10.231.0.1")

// wireName encodes a dotted name as uncompressed labels.
func wireName(name string) []byte {
	var b []byte
	if name != "" {
		for _, l := range strings.Split(name, ".") {
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
	}
	return append(b, 0)
}

// msg builds a message: header with id, flags and qdcount, then body.
func msg(id, flags, qdcount uint16, body ...[]byte) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b[0:], id)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[4:], qdcount)
	for _, p := range body {
		b = append(b, p...)
	}
	return b
}

func typeClass(t, c uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, t), c)
}

// query is a standard recursive query for name and type.
func query(name string, t uint16) []byte {
	return msg(0xBEEF, flagRD, 1, wireName(name), typeClass(t, ClassIN))
}

// optRR is an EDNS0 OPT record as Go's resolver and glibc send it.
var optRR = []byte{0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0}

func withAdditional(m []byte, rr []byte) []byte {
	m = bytes.Clone(m)
	binary.BigEndian.PutUint16(m[10:], 1)
	return append(m, rr...)
}

// seeds are the parser's cases; each is also a fuzz seed file.
var seeds = []struct {
	file   string
	in     []byte
	name   string // wanted name on success
	reason string // wanted Error.Reason, "" for success
}{
	{"a-query", query("example.com", TypeA), "example.com", ""},
	{"aaaa-query", query("example.com", TypeAAAA), "example.com", ""},
	{"mixed-case-edns", withAdditional(query("Api.EXAMPLE.com", TypeA), optRR), "api.example.com", ""},
	{"underscore", query("_dmarc.example.com", 16), "_dmarc.example.com", ""},
	{"short", []byte{1, 2, 3}, "", "short"},
	{"response", msg(1, flagQR, 1, wireName("a.com"), typeClass(1, 1)), "", "response"},
	{"opcode-status", msg(1, 2<<opcodeShift, 1, wireName("a.com"), typeClass(1, 1)), "", "opcode"},
	{"no-question", msg(1, 0, 0), "", "qdcount"},
	{"two-questions", msg(1, 0, 2, wireName("a.com"), typeClass(1, 1), wireName("b.com"), typeClass(1, 1)), "", "qdcount"},
	{"no-type", msg(1, 0, 1, wireName("a.com"), []byte{0, 1}), "", "truncated"},
	{"cut-label", msg(1, 0, 1, []byte{5, 'a', 'b'}), "", "truncated"},
	{"no-root", msg(1, 0, 1, []byte{1, 'a'}), "", "truncated"},
	{"pointer-self", msg(1, 0, 1, []byte{0xC0, 12}, typeClass(1, 1)), "", "pointer-loop"},
	{"pointer-header", msg(1, 0, 1, []byte{1, 'a', 0xC0, 0}, typeClass(1, 1)), "", "pointer-loop"},
	{"pointer-forward", msg(1, 0, 1, []byte{0xC0, 20, 0, 0, 0, 0, 0, 0, 1, 'a', 0}, typeClass(1, 1)), "", "pointer-loop"},
	{"pointer-cut", msg(1, 0, 1, []byte{0xC0}), "", "truncated"},
	{"label-type-01", msg(1, 0, 1, []byte{0x41, 'a', 0}, typeClass(1, 1)), "", "label-type"},
	{"name-too-long", query(strings.Repeat(strings.Repeat("a", 63)+".", 4)+"com", TypeA), "", "name-too-long"},
	{"dot-in-label", msg(1, 0, 1, []byte{3, 'a', '.', 'b', 3, 'c', 'o', 'm', 0}, typeClass(1, 1)), "", "invalid-name"},
	{"space-in-label", query("a b.com", TypeA), "", "invalid-name"},
	{"nul-in-label", query("a\x00b.com", TypeA), "", "invalid-name"},
	{"root", query("", 2), "", "invalid-name"},
	{"ip-spelling", query("127.0.0.1", TypeA), "", "invalid-name"},
}

func TestParse(t *testing.T) {
	for _, tc := range seeds {
		q, err := Parse(tc.in)
		if tc.reason == "" {
			if err != nil || q.Name != tc.name || q.ID != 0xBEEF || !q.RD {
				t.Errorf("%s: Parse = %+v, %v; want name %q", tc.file, q, err, tc.name)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.reason || q.Name != "" {
			t.Errorf("%s: Parse = %+v, %v; want reason %s", tc.file, q, err, tc.reason)
		}
	}
}

// TestPointers exercises pointer following where it is legal: a name later
// in a message that continues by pointing back. A query's one question can
// never hold a legal pointer (nothing but the header precedes it), so the
// reader is called at an offset past a first name.
func TestPointers(t *testing.T) {
	m := msg(7, 0, 1, wireName("example.com"))
	second := len(m)
	m = append(m, 3, 'a', 'p', 'i', 0xC0, 12)
	labels, wire, end, err := readName(m, second)
	if err != nil || end != len(m) || !bytes.Equal(wire, wireName("api.example.com")) || len(labels) != 3 {
		t.Fatalf("readName = %q, %x, %d, %v", labels, wire, end, err)
	}
	// A pointer to the start of its own segment repeats forever: refused.
	self := append(bytes.Clone(m[:second]), 1, 'a', 0xC0, byte(second))
	if _, _, _, err := readName(self, second); err == nil || err.Reason != "pointer-loop" {
		t.Fatalf("a pointer to its own segment: %v", err)
	}
	// A chain of MaxPointers+1 backward pointers, each legal alone.
	chain := msg(7, 0, 1, []byte{1, 'a', 0})
	prev := HeaderLen
	for range MaxPointers + 1 {
		at := len(chain)
		chain = append(chain, 1, 'b', 0xC0, byte(prev))
		prev = at
	}
	if _, _, _, err := readName(chain, prev); err == nil || err.Reason != "pointer-limit" {
		t.Fatalf("%d pointers: %v", MaxPointers+1, err)
	}
	if _, _, _, err := readName(chain, len(chain)-4*2); err != nil {
		t.Fatalf("%d pointers: %v", MaxPointers, err)
	}
}

func TestAnswer(t *testing.T) {
	q, err := Parse(query("Example.com", TypeA))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Answer(q, mediator)
	if err != nil {
		t.Fatal(err)
	}
	want := msg(0xBEEF, flagQR|flagAA|flagRD|flagRA, 1, wireName("Example.com"), typeClass(TypeA, ClassIN),
		[]byte{0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 231, 0, 1})
	binary.BigEndian.PutUint16(want[6:], 1)
	if !bytes.Equal(got, want) {
		t.Errorf("A answer\n got %x\nwant %x", got, want)
	}

	q, _ = Parse(query("example.com", TypeAAAA))
	got, _ = Answer(q, mediator)
	want = msg(0xBEEF, flagQR|flagAA|flagRD|flagRA, 1, wireName("example.com"), typeClass(TypeAAAA, ClassIN))
	if !bytes.Equal(got, want) {
		t.Errorf("AAAA answer\n got %x\nwant %x", got, want)
	}
	if _, err := Answer(q, netip.MustParseAddr("fd00::1")); err == nil {
		t.Error("an IPv6 mediator address was accepted for A")
	}
}

func TestErrorReply(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want []byte // nil: no reply
	}{
		{[]byte{1, 2, 3}, nil},
		{msg(9, flagQR, 1, wireName("a.com"), typeClass(1, 1)), nil},
		{msg(9, flagRD, 2), msg(9, flagQR|flagAA|flagRD|flagRA|RcodeFormErr, 0)},
		{msg(9, 2<<opcodeShift, 1), msg(9, flagQR|flagAA|flagRA|RcodeNotImp|2<<opcodeShift, 0)},
		{query("a b.com", TypeA), append(msg(0xBEEF, flagQR|flagAA|flagRD|flagRA|RcodeRefused, 1), append(wireName("a b.com"), typeClass(TypeA, ClassIN)...)...)},
	} {
		q, err := Parse(tc.in)
		if err == nil {
			t.Fatalf("Parse(%x) succeeded", tc.in)
		}
		if got := ErrorReply(q, err); !bytes.Equal(got, tc.want) {
			t.Errorf("ErrorReply(%x, %v)\n got %x\nwant %x", tc.in, err, got, tc.want)
		}
	}
}

// TestGoResolver serves Parse and Answer on loopback UDP and asks Go's own
// resolver: a real client's queries (EDNS included) get the mediator's
// address for A and nothing for AAAA.
func TestGoResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	seen := make(chan string, 8)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q, err := Parse(buf[:n])
			var reply []byte
			if err != nil {
				reply = ErrorReply(q, err)
			} else {
				seen <- q.Name + " " + strconv.Itoa(int(q.Type))
				reply, _ = Answer(q, mediator)
			}
			if reply != nil {
				pc.WriteTo(reply, from)
			}
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", "Api.Example.COM.")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0] != mediator {
		t.Fatalf("LookupNetIP = %v; want [%s]", addrs, mediator)
	}
	if _, err := r.LookupNetIP(ctx, "ip6", "api.example.com."); err == nil {
		t.Error("an AAAA lookup found an address")
	}
	got := map[string]bool{}
	for len(seen) > 0 {
		got[<-seen] = true
	}
	if !got["api.example.com 1"] || !got["api.example.com 28"] {
		t.Errorf("queries seen: %v", got)
	}
}

// TestSeedCorpus keeps testdata/fuzz/FuzzParse equal to the seeds table
// (rewrite it with -update).
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	for _, s := range seeds {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.in)
		file := filepath.Join(dir, s.file)
		if *update {
			os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil || string(got) != want {
			t.Errorf("%s: stale or missing (%v); run go test -run TestSeedCorpus -update", file, err)
		}
	}
}

// FuzzParse: no message panics the parser or leaks an unchecked name, and
// every accepted query gets a well-formed answer echoing its ID.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add(s.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		q, err := Parse(in)
		if err != nil {
			if q.Name != "" {
				t.Fatalf("refused query carries name %q", q.Name)
			}
			if r := ErrorReply(q, err); r != nil && (len(r) < HeaderLen || binary.BigEndian.Uint16(r) != q.ID) {
				t.Fatalf("error reply %x", r)
			}
			return
		}
		if len(q.Name) > 253 || strings.ToLower(q.Name) != q.Name || strings.ContainsAny(q.Name, " \"=\x00") {
			t.Fatalf("accepted name %q", q.Name)
		}
		a, err := Answer(q, mediator)
		if err != nil || binary.BigEndian.Uint16(a) != q.ID {
			t.Fatalf("Answer = %x, %v", a, err)
		}
		// The answer's question is the query's own: parsing it back (as a
		// query) gives the same name.
		back := bytes.Clone(a)
		binary.BigEndian.PutUint16(back[2:], 0)
		if q2, err := Parse(back); err != nil || q2.Name != q.Name || q2.Type != q.Type {
			t.Fatalf("answer's question reads back as %+v, %v", q2, err)
		}
	})
}

func BenchmarkParseAnswer(b *testing.B) {
	m := withAdditional(query("api.example.com", TypeA), optRR)
	for b.Loop() {
		q, err := Parse(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Answer(q, mediator); err != nil {
			b.Fatal(err)
		}
	}
}
