package mode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"jr2.dev/boundary/internal/bundle"
)

// recorded is one request of a source bundle and its answer.
type recorded struct {
	seq    uint64
	effect Effect
	at     time.Time // the http-request record's time
	answer *answer   // nil: the recording holds no answer for it
	used   bool
}

// answer is a recorded answer: the status and headers, the body chunks as
// framed, each with its record's time, and whether it was cut.
type answer struct {
	status int
	header [][2]string
	at     time.Time // the status record's time
	asked  time.Time // the request record's time
	chunks [][]byte
	times  []time.Time
	cut    bool
	none   bool // the recorded request got no answer
}

// line is the part of a record a source reads.
type line struct {
	Seq        uint64      `json:"seq"`
	Time       time.Time   `json:"time"`
	Kind       string      `json:"kind"`
	Method     string      `json:"method"`
	URL        string      `json:"url"`
	Headers    [][2]string `json:"headers"`
	Request    uint64      `json:"request"`
	Status     int         `json:"status"`
	Chunk      *int        `json:"chunk"`
	Body       *string     `json:"body"`
	BodyBase64 []byte      `json:"body_base64"`
	End        bool        `json:"end"`
	SHA256     string      `json:"sha256"`
	Bytes      int64       `json:"bytes"`
	Error      string      `json:"error"`
}

// loadSource reads a bundle that must verify, and returns its requests in
// recorded order with their answers. The file is read once: the bytes
// verified are the bytes answered from, so a file rewritten between the
// check and the read cannot slip in.
func loadSource(path, flag string) ([]*recorded, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: name the recorded bundle to answer from", flag)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	res, err := bundle.VerifyReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	if res.Status != bundle.Verified {
		return nil, fmt.Errorf("%s: the recording does not verify (%s); replay only a sealed, unedited bundle", flag, res)
	}
	return parseSource(raw), nil
}

// parseSource reads the requests and answers of a bundle's lines. A line
// it cannot read, or a request with no canonical form, is passed over: a
// verified bundle was written by a host, and what a host could not have
// sent it cannot be asked again.
func parseSource(raw []byte) []*recorded {
	var out []*recorded
	bySeq := map[uint64]*recorded{}
	for _, text := range bytes.Split(raw, []byte("\n")) {
		var l line
		if len(text) == 0 || json.Unmarshal(text, &l) != nil {
			continue
		}
		switch l.Kind {
		case bundle.KindHTTPRequest:
			e, err := Canon(l.Method, l.URL, l.Headers, nil)
			if err != nil || bySeq[l.Seq] != nil {
				continue
			}
			r := &recorded{seq: l.Seq, effect: e, at: l.Time}
			bySeq[l.Seq] = r
			out = append(out, r)
		case bundle.KindRequestBody:
			if r := bySeq[l.Request]; r != nil && l.End && l.Bytes > 0 {
				r.effect.Body, r.effect.Length = l.SHA256, l.Bytes
			}
		case bundle.KindHTTPResponse:
			r := bySeq[l.Request]
			if r == nil {
				continue
			}
			switch {
			case l.Status != 0:
				a := &answer{status: l.Status, header: l.Headers, at: l.Time, asked: r.at}
				if l.Body != nil { // a local answer: its body in the one record
					a.chunks, a.times = [][]byte{[]byte(*l.Body)}, []time.Time{l.Time}
				}
				r.answer = a
			case l.Chunk != nil && r.answer != nil:
				b := l.BodyBase64
				if l.Body != nil {
					b = []byte(*l.Body)
				}
				r.answer.chunks = append(r.answer.chunks, b)
				r.answer.times = append(r.answer.times, l.Time)
			case l.End && r.answer != nil && l.Error != "":
				r.answer.cut = true
			}
		}
	}
	return out
}

// sourceLabel is how a divergence names where the request went.
func sourceLabel(e Effect) string {
	host := e.Host
	switch {
	case (e.Scheme == "https" && e.Port != 443) || (e.Scheme == "http" && e.Port != 80):
		host = net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	case strings.Contains(host, ":"): // an IPv6 literal
		host = "[" + host + "]"
	}
	p := e.Path
	if e.Query != "" {
		p += "?" + e.Query
	}
	return host + strings.TrimSpace(p)
}
