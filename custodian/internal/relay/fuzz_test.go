package relay

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
)

// fuzzValue is the held value the fuzzed upstream echoes; "$V" in the
// fuzzer's input stands for it.
const fuzzValue = "sk-FUZZ/relay+9f8e7d6c5b4a3210&<Qz>"

const fuzzTarget = "api.example.com:443"

var (
	fuzzOnce  sync.Once
	fuzzEng   *filter.Engine
	fuzzErr   error
	fuzzForms [][]byte
)

func fuzzEngine(t *testing.T) *filter.Engine {
	fuzzOnce.Do(func() {
		cfg := &filter.Config{
			Pod: "fuzz", Orchestrator: "orch.example:4000", ValuesDir: "values",
			Listeners: filter.Listeners{Control: "127.0.0.1:0", Egress: "127.0.0.1:0", Health: "127.0.0.1:0"},
			Secrets: []filter.SecretConfig{
				{Name: "KEY", StandIn: contract.StandIn("KEY"), Targets: []string{fuzzTarget}, Headers: []string{"x-api-key"}},
			},
		}
		fuzzEng, fuzzErr = filter.New(cfg, map[string][]byte{"KEY": []byte(fuzzValue)})
		fuzzForms = scrub.Forms([]byte(fuzzValue))
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzEng
}

// encode applies the content codings named in order, as an honest
// upstream would: gzip, x-gzip and deflate truly; identity and any name it
// does not know leave the bytes as they are (a server that lies, which the
// engine must refuse to pass on unread).
func encode(b []byte, codings []string) []byte {
	for _, c := range codings {
		var buf bytes.Buffer
		switch c {
		case "gzip", "x-gzip":
			zw := gzip.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
		case "deflate":
			zw := zlib.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
		default:
			continue
		}
		b = buf.Bytes()
	}
	return b
}

// readings are the ways an agent could read b: as is, and through up to
// three layers of gzip, zlib or raw deflate, whatever the headers said.
func readings(b []byte, depth int) [][]byte {
	out := [][]byte{b}
	if depth == 0 {
		return out
	}
	try := func(r io.Reader, err error) {
		if err != nil {
			return
		}
		d, _ := io.ReadAll(io.LimitReader(r, 1<<20))
		if len(d) > 0 {
			out = append(out, readings(d, depth-1)...)
		}
	}
	try(gzip.NewReader(bytes.NewReader(b)))
	try(zlib.NewReader(bytes.NewReader(b)))
	try(flate.NewReader(bytes.NewReader(b)), nil)
	return out
}

// FuzzResponse is the response path's property (an encoding named in
// Connection once hid a gzipped echo from the scrubber): whatever
// headers an upstream sends (Connection naming anything, encodings in any
// case, several of them, a value in a name, a value or a trailer), and a
// body that echoes the value encoded as those headers declare, no form of
// the value is in the agent's bytes: not in a header, not in the body as
// it is, and not in the body un-gzipped or inflated however the agent
// tries.
func FuzzResponse(f *testing.F) {
	f.Add("Connection: content-encoding\nContent-Encoding: gzip", "you sent ", "", uint16(200), false, "")
	f.Add("Connection: Content-Encoding, keep-alive\nContent-Encoding: x-gzip\nContent-Type: text/plain", "", "!", uint16(200), true, "X-Sum: $V")
	f.Add("Connection: content-encoding\nContent-Encoding: deflate", "a", "b", uint16(200), false, "")
	f.Add("Connection: content-encoding, content-type\nContent-Encoding: br", "", "", uint16(201), false, "")
	f.Add("Content-Encoding: gzip\nContent-Encoding: gzip", "", "", uint16(200), false, "")
	f.Add("Content-Encoding: gzip, identity\nX-Echo: $V\nConnection: x-echo", "v=", "", uint16(200), true, "$V: 1")
	f.Add("Content-Encoding: identity\nCONNECTION: Content-Encoding\nX-$V: 1", "", "", uint16(404), false, "")
	f.Fuzz(func(t *testing.T, hdrs, pre, post string, status uint16, chunked bool, trailers string) {
		eng := fuzzEngine(t)
		if status < 200 || status > 999 {
			status = 200
		}
		var head strings.Builder
		var codings []string
		for _, line := range strings.Split(strings.ReplaceAll(hdrs, "$V", fuzzValue), "\n") {
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.ContainsAny(line, "\r") {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "content-length", "transfer-encoding", "trailer":
				continue // this test frames the body itself
			case "content-encoding":
				for _, c := range strings.Split(value, ",") {
					if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
						codings = append(codings, c)
					}
				}
			}
			head.WriteString(line + "\r\n")
		}
		body := encode([]byte(pre+fuzzValue+post), codings)
		var raw bytes.Buffer
		fmt.Fprintf(&raw, "HTTP/1.1 %d X\r\n%s", status, head.String())
		if chunked {
			raw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			fmt.Fprintf(&raw, "%x\r\n%s\r\n0\r\n", len(body), body)
			for _, tl := range strings.Split(strings.ReplaceAll(trailers, "$V", fuzzValue), "\n") {
				if strings.Contains(tl, ":") && !strings.ContainsAny(tl, "\r") {
					raw.WriteString(tl + "\r\n")
				}
			}
			raw.WriteString("\r\n")
		} else {
			fmt.Fprintf(&raw, "Content-Length: %d\r\n\r\n%s", len(body), body)
		}
		resp, err := http.ReadResponse(bufio.NewReader(&raw), &http.Request{Method: "GET"})
		if err != nil {
			return // not an answer Go's client would hand over
		}
		rec := httptest.NewRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					t.Fatalf("panic: %v", p)
				}
			}()
			var st int
			Response(eng, rec, fuzzTarget, "GET", resp, &st, nil)
		}()
		var hb bytes.Buffer
		rec.Result().Header.Write(&hb)
		rec.Result().Trailer.Write(&hb)
		for k, vs := range rec.Header() {
			fmt.Fprintf(&hb, "%s: %s\n", k, strings.Join(vs, ","))
		}
		for _, got := range append(readings(rec.Body.Bytes(), 3), hb.Bytes()) {
			for _, form := range fuzzForms {
				if bytes.Contains(got, form) {
					t.Fatalf("a form of the value reached the agent (%q)\nheaders %v\nbody %q", form, rec.Header(), rec.Body.Bytes())
				}
			}
		}
	})
}
