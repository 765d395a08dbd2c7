package wsframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzFrames feeds the Scrubber arbitrary upstream bytes (and a stream of
// well-formed frames built from the input, so the fuzzer reaches deep
// states) in arbitrary splits: it never panics, the value never comes out,
// and what comes out is well-formed frames (read, strictly) whose messages
// are the well-formed input's, scrubbed.
func FuzzFrames(f *testing.F) {
	f.Add([]byte("\x81\x05hello"), []byte{3}, uint16(0))
	f.Add(frame(false, OpText, []byte(value[:9]), nil), []byte{1, 1, 7}, uint16(16))
	f.Add([]byte(value+"abc"+value), []byte{5, 9, 2}, uint16(40))
	f.Add([]byte{0x88, 0x02, 0x03, 0xe8}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data, splits []byte, max uint16) {
		sc := scrubber(t)
		// 1: the raw bytes as frames.
		run := func(in []byte) ([]byte, error) {
			s := New(sc, int(max))
			defer s.Close()
			var out []byte
			var err error
			for i, p := 0, 0; p < len(in); i++ {
				n := len(in) - p
				if i < len(splits) {
					n = min(n, int(splits[i])+1)
				}
				var e error
				out, e = s.Write(out, in[p:p+n])
				if e != nil && err == nil {
					err = e
				}
				p += n
			}
			return out, err
		}
		out, err := run(data)
		if bytes.Contains(out, []byte(value)) {
			t.Fatalf("the value came out")
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("err %v", err)
		}
		// Whole frames only, except that a stream cut mid-message has no end.
		readPrefix(t, out)

		// 2: data cut into messages of well-formed frames, the value
		// spliced in; each message comes out whole with the label.
		var in []byte
		var want []msg
		for k, rest := 0, data; len(rest) > 0; k++ {
			n := min(len(rest), 1+int(rest[0])%40)
			part := rest[:n]
			rest = rest[n:]
			p := append(append([]byte{}, part...), value...)
			switch k % 3 {
			case 0:
				in = append(in, frame(true, OpBinary, p, nil)...)
				want = append(want, msg{OpBinary, string(sc.Bytes(p))})
			case 1:
				h := len(p) / 2
				in = append(in, frame(false, OpText, p[:h], nil)...)
				in = append(in, frame(true, OpPing, part[:min(len(part), 100)], nil)...)
				in = append(in, frame(true, OpContinuation, p[h:], nil)...)
				want = append(want, msg{OpPing, string(sc.Bytes(part[:min(len(part), 100)]))}, msg{OpText, string(sc.Bytes(p))})
			case 2:
				in = append(in, frame(false, OpText, nil, nil)...)
				in = append(in, frame(true, OpContinuation, p, nil)...)
				want = append(want, msg{OpText, string(sc.Bytes(p))})
			}
		}
		out, err = run(in)
		if err != nil {
			t.Fatalf("well-formed frames: %v", err)
		}
		if bytes.Contains(out, []byte(value)) {
			t.Fatalf("the value came out")
		}
		got := read(t, out)
		if len(got) != len(want) {
			t.Fatalf("%d messages, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("message %d: got %q want %q", i, got[i], want[i])
			}
		}
	})
}

// readPrefix checks that b is whole, well-formed output frames, a last
// message possibly left open.
func readPrefix(t *testing.T, b []byte) {
	open := false
	for len(b) > 0 {
		if len(b) < 2 || b[0]&0x70 != 0 || b[1]&0x80 != 0 {
			t.Fatalf("bad output frame header")
		}
		fin, op, l, h := b[0]&0x80 != 0, b[0]&0x0f, uint64(b[1]&0x7f), 2
		switch l {
		case 126:
			l, h = uint64(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			l, h = binary.BigEndian.Uint64(b[2:10]), 10
		}
		if uint64(len(b)-h) < l {
			t.Fatalf("output ends inside a frame")
		}
		switch {
		case op >= OpClose && (!fin || l > maxControl):
			t.Fatalf("bad control frame out")
		case op == OpContinuation && !open, op == OpText && open, op == OpBinary && open:
			t.Fatalf("bad message framing out")
		case op > OpBinary && op < OpClose, op > OpPong:
			t.Fatalf("reserved opcode out")
		}
		if op < OpClose {
			open = !fin
		}
		b = b[h+int(l):]
	}
}
