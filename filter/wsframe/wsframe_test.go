package wsframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"jr2.dev/boundary/filter/scrub"
)

const (
	value = "sk-ws-Sentinel-0123456789abcdef"
	label = "[secret:WS_KEY]"
)

func scrubber(t testing.TB) *scrub.Scrubber {
	t.Helper()
	sc, err := scrub.New([]scrub.Secret{{Name: "WS_KEY", Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// frame builds one upstream frame; mask is applied when set.
func frame(fin bool, op byte, payload []byte, mask []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var b []byte
	var m byte
	if mask != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, b0, m|byte(n))
	case n <= 0xffff:
		b = append(b, b0, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, b0, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if mask != nil {
		b = append(b, mask...)
		for i, c := range payload {
			b = append(b, c^mask[i%4])
		}
		return b
	}
	return append(b, payload...)
}

// msg is one message (or control frame) as a client reads it.
type msg struct {
	op      byte
	payload string
}

// read is a strict reference reader of the Scrubber's output: each frame
// unmasked, its length in the shortest form, fragments joined into
// messages. It fails the test on anything else.
func read(t testing.TB, b []byte) []msg {
	t.Helper()
	var out []msg
	var cur *msg
	for len(b) > 0 {
		if len(b) < 2 {
			t.Fatalf("output ends inside a frame header")
		}
		fin, op, l := b[0]&0x80 != 0, b[0]&0x0f, uint64(b[1]&0x7f)
		if b[0]&0x70 != 0 || b[1]&0x80 != 0 {
			t.Fatalf("output frame has a reserved bit or a mask: % x", b[:2])
		}
		h := 2
		switch l {
		case 126:
			l = uint64(binary.BigEndian.Uint16(b[2:4]))
			h = 4
			if l < 126 {
				t.Fatalf("output length not in its shortest form")
			}
		case 127:
			l = binary.BigEndian.Uint64(b[2:10])
			h = 10
			if l <= 0xffff {
				t.Fatalf("output length not in its shortest form")
			}
		}
		if uint64(len(b)-h) < l {
			t.Fatalf("output ends inside a frame's payload")
		}
		p := string(b[h : h+int(l)])
		b = b[h+int(l):]
		switch {
		case op >= OpClose:
			if !fin || len(p) > maxControl {
				t.Fatalf("output control frame fragmented or long")
			}
			out = append(out, msg{op, p})
		case op == OpContinuation:
			if cur == nil {
				t.Fatalf("output continuation without a message")
			}
			cur.payload += p
		default:
			if cur != nil {
				t.Fatalf("output message inside a message")
			}
			cur = &msg{op, p}
		}
		if fin && op < OpClose {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		t.Fatalf("output ends inside a message")
	}
	return out
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// Every message of the upstream reaches the agent with the label where the
// value was, in every split of the stream into two and into single bytes.
func TestScrubsEveryMessage(t *testing.T) {
	long := strings.Repeat("x", 300) + value + strings.Repeat("y", 70000)
	cases := []struct {
		name string
		in   []byte
		want []msg
	}{
		{"text", frame(true, OpText, []byte(`{"auth":"Bearer `+value+`"}`), nil),
			[]msg{{OpText, `{"auth":"Bearer ` + label + `"}`}}},
		{"binary", frame(true, OpBinary, []byte("\x00\x01"+value+"\xff"), nil),
			[]msg{{OpBinary, "\x00\x01" + label + "\xff"}}},
		{"three fragments", cat(
			frame(false, OpText, []byte("a="+value[:5]), nil),
			frame(false, OpContinuation, []byte(value[5:20]), nil),
			frame(true, OpContinuation, []byte(value[20:]+";"), nil)),
			[]msg{{OpText, "a=" + label + ";"}}},
		{"ping inside a fragmented message", cat(
			frame(false, OpText, []byte(value[:10]), nil),
			frame(true, OpPing, []byte("p:"+value), nil),
			frame(true, OpContinuation, []byte(value[10:]), nil)),
			[]msg{{OpPing, "p:" + label}, {OpText, label}}},
		{"pong", frame(true, OpPong, []byte(value), nil), []msg{{OpPong, label}}},
		{"close reason", frame(true, OpClose, closePayload(4000, "bad key "+value), nil),
			[]msg{{OpClose, string(closePayload(4000, "bad key "+label))}}},
		{"close without payload", frame(true, OpClose, nil, nil), []msg{{OpClose, ""}}},
		{"after close nothing", cat(frame(true, OpClose, closePayload(1000, ""), nil), frame(true, OpText, []byte(value), nil)),
			[]msg{{OpClose, string(closePayload(1000, ""))}}},
		{"16-bit length", frame(true, OpText, []byte(strings.Repeat("a", 200)+value), nil),
			[]msg{{OpText, strings.Repeat("a", 200) + label}}},
		{"64-bit length", frame(true, OpBinary, []byte(long), nil),
			[]msg{{OpBinary, strings.Replace(long, value, label, 1)}}},
		{"empty messages", cat(frame(true, OpText, nil, nil), frame(false, OpBinary, nil, nil), frame(true, OpContinuation, nil, nil)),
			[]msg{{OpText, ""}, {OpBinary, ""}}},
		{"two messages", cat(frame(true, OpText, []byte(value), nil), frame(true, OpText, []byte("ok"), nil)),
			[]msg{{OpText, label}, {OpText, "ok"}}},
	}
	sc := scrubber(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			splits := [][]int{nil}
			for i := 1; i < len(c.in) && i < 400; i++ {
				splits = append(splits, []int{i})
			}
			splits = append(splits, everyByte(len(c.in)))
			for _, sp := range splits {
				s := New(sc, 0)
				var out []byte
				var err error
				prev := 0
				for _, at := range append(sp, len(c.in)) {
					out, err = s.Write(out, c.in[prev:at])
					if err != nil {
						t.Fatalf("split %v: %v", sp, err)
					}
					prev = at
				}
				got := read(t, out)
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("split %v: got %q, want %q", sp, got, c.want)
				}
				if bytes.Contains(out, []byte(value)) {
					t.Fatalf("split %v: the value reached the agent", sp)
				}
			}
		})
	}
}

func everyByte(n int) []int {
	if n > 2000 {
		return nil
	}
	out := make([]int, 0, n)
	for i := 1; i < n; i++ {
		out = append(out, i)
	}
	return out
}

// Beyond the hold a message goes on in fragments as it arrives, scrubbed in
// a sliding window: a value across the fragments' border is still replaced.
func TestOverTheHoldIsASlidingWindow(t *testing.T) {
	sc := scrubber(t)
	s := New(sc, 64)
	body := strings.Repeat("a", 60) + value + strings.Repeat("b", 100)
	var out []byte
	var err error
	in := frame(true, OpText, []byte(body), nil)
	for i := 0; i < len(in); i += 16 {
		out, err = s.Write(out, in[i:min(i+16, len(in))])
		if err != nil {
			t.Fatal(err)
		}
	}
	got := read(t, out)
	if len(got) != 1 || got[0].payload != strings.Replace(body, value, label, 1) {
		t.Fatalf("got %q", got)
	}
	// More than one frame went out: the message was not held whole.
	if out[0]&0x80 != 0 {
		t.Fatalf("a message over the hold went as one frame")
	}
}

// Malformed framing ends the stream: the Custodian's close frame (1002)
// and nothing of the upstream's after the fault, in every split.
func TestMalformedFraming(t *testing.T) {
	good := frame(true, OpText, []byte("fine"), nil)
	cases := []struct {
		name string
		in   []byte
	}{
		{"masked", frame(true, OpText, []byte(value), []byte{1, 2, 3, 4})},
		{"rsv1 (permessage-deflate)", append([]byte{0xC1, 5}, "hello"...)},
		{"rsv3", append([]byte{0x91, 1}, 'x')},
		{"reserved opcode 3", append([]byte{0x83, 1}, 'x')},
		{"reserved opcode 0xB", append([]byte{0x8B, 1}, 'x')},
		{"fragmented ping", append([]byte{0x09, 1}, 'x')},
		{"long ping", frame(true, OpPing, bytes.Repeat([]byte("p"), 126), nil)},
		{"continuation without a message", frame(true, OpContinuation, []byte(value), nil)},
		{"message inside a message", cat(frame(false, OpText, []byte("a"), nil), frame(true, OpText, []byte(value), nil))},
		{"16-bit length not shortest", append([]byte{0x81, 126, 0, 5}, "hello"...)},
		{"64-bit length not shortest", append([]byte{0x81, 127, 0, 0, 0, 0, 0, 0, 0, 5}, "hello"...)},
		{"64-bit length over the limit", []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"close of one byte", []byte{0x88, 1, 3}},
	}
	sc := scrubber(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := cat(good, c.in, frame(true, OpText, []byte(value), nil))
			for at := 0; at <= len(in); at++ {
				s := New(sc, 0)
				out, err1 := s.Write(nil, in[:at])
				out, err2 := s.Write(out, in[at:])
				if err := errors.Join(err1, err2); !errors.Is(err, ErrMalformed) {
					t.Fatalf("split %d: err %v", at, err)
				}
				got := read(t, out)
				want := []msg{{OpText, "fine"}, {OpClose, string(closePayload(1002, CloseReason))}}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("split %d: got %q", at, got)
				}
				if more, err := s.Write(nil, good); err == nil || len(more) != 0 {
					t.Fatalf("a write after the fault passed %q, %v", more, err)
				}
			}
		})
	}
}

// A close reason whose label would make it longer than a control frame
// may be is cut before the label, never through it.
func TestCloseReasonStaysAControlFrame(t *testing.T) {
	sc := scrubber(t)
	reason := strings.Repeat("r", 123-len(value)) + value
	out, err := New(sc, 0).Write(nil, frame(true, OpClose, closePayload(1008, reason), nil))
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, out)
	if len(got) != 1 || len(got[0].payload) > maxControl || strings.Contains(got[0].payload, value) ||
		got[0].payload[:2] != "\x03\xf0" {
		t.Fatalf("got %q", got)
	}
}
