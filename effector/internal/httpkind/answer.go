package httpkind

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/sendtrace"
	"jr2.dev/boundary/effector/internal/wire"
)

// sniffLen is how many bytes http.DetectContentType reads.
const sniffLen = 512

// readAnswer turns resp into a response outcome: every header, the content
// type, the size of everything received, and — when it is text — the body,
// scrubbed and then bounded to max bytes.
func readAnswer(ctx context.Context, resp *http.Response, max int64, sc *effect.Scrubber) wire.Outcome {
	o := wire.Outcome{Kind: wire.OutcomeResponse, Status: resp.StatusCode, Headers: map[string][]string{}}
	for name, vs := range resp.Header {
		n := strings.ToLower(name)
		o.Headers[n] = append(o.Headers[n], vs...)
	}
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(resp.Body, head)
	head = head[:n]
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	declared := resp.Header.Get("Content-Type")
	o.ContentType = declared
	if declared == "" && n > 0 {
		o.ContentType = http.DetectContentType(head)
	}
	text := isText(declared, head) && !encoded(resp)
	var body []byte
	var size int64
	if err == nil {
		body, size, o.Truncated, err = readBody(resp.Body, head, text, max, sc)
	} else {
		size = int64(n)
	}
	o.Size = size
	if err != nil {
		return wire.Outcome{Kind: wire.OutcomeUnknown, Reason: fmt.Sprintf(
			"the server answered %d and its body did not arrive whole (%d bytes read): %s", resp.StatusCode, size, sendtrace.Reason(reasonErr(ctx, err)))}
	}
	if text {
		s := string(body)
		o.Body = &s
	}
	return o
}

// reasonErr names the effect's timeout when it is what ended a read.
func reasonErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readBody reads the rest of the body after head. A text body is scrubbed
// as it streams; once the scrubbed output passes max, the rest is only
// counted. size is every byte received, past the bound too.
func readBody(r io.Reader, head []byte, text bool, max int64, sc *effect.Scrubber) (body []byte, size int64, truncated bool, err error) {
	var st *effect.Stream
	if text {
		st = sc.NewStream()
	}
	cut := false
	feed := func(p []byte) {
		size += int64(len(p))
		if !text || cut {
			return
		}
		body = st.Write(body, p)
		if int64(len(body)) > max {
			cut = true
		}
	}
	feed(head)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		feed(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, size, false, rerr
		}
	}
	if !text {
		return nil, size, false, nil
	}
	if !cut {
		body = st.Flush(body)
	}
	if int64(len(body)) > max {
		return effect.Cut(body, int(max)), size, true, nil
	}
	return body, size, false, nil
}

// encoded reports a body still in a content coding (the transport decodes
// only the gzip it asked for itself): its bytes are not text, whatever the
// type says, and could not be scrubbed.
func encoded(resp *http.Response) bool {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	return ce != "" && !strings.EqualFold(ce, "identity")
}

// isText decides whether a body is returned: a declared text/*, JSON, XML,
// form or JavaScript type; with no type declared, what its first bytes
// sniff as.
func isText(declared string, head []byte) bool {
	if declared == "" {
		return textType(http.DetectContentType(head))
	}
	return textType(declared)
}

func textType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	mt = strings.ToLower(mt)
	typ, sub, _ := strings.Cut(mt, "/")
	switch {
	case typ == "text":
		return true
	case sub == "json" || strings.HasSuffix(sub, "+json"):
		return true
	case sub == "xml" || strings.HasSuffix(sub, "+xml"):
		return true
	case mt == "application/x-www-form-urlencoded":
		return true
	case sub == "javascript" || sub == "ecmascript" || sub == "x-javascript":
		return true
	}
	return false
}
