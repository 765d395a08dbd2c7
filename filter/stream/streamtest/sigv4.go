package streamtest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/sigv4test"
)

// BodyStream is a Stream that also takes the request's body, as Envoy's
// decoder hooks hand it: the stream an adapter must give for SigV4, whose
// signature may cover the body's hash.
type BodyStream interface {
	Stream
	// RequestHeadersEnd is RequestHeaders told whether the request ends
	// with its headers.
	RequestHeadersEnd(h []filter.Header, endStream bool) (out []filter.Header, stop bool)
	// RequestData passes one request chunk; out is what goes on of it.
	RequestData(chunk []byte, endStream bool) (out []byte, stop bool)
	// RequestTrailers passes the request's trailers.
	RequestTrailers() (stop bool)
	// Request is the request's headers as Envoy holds them now.
	Request() []filter.Header
}

// SigV4 runs the shared SigV4 table (package sigv4test) through d's
// streams toward a bound AWS key: a forward carries the real key's
// signature (sigv4test.Verify) and the body whole, marked; a request whose
// body the engine hashes is held, its chunks taken, until the last; each
// refusal is the engine's status and reason, unmarked. Then a held body
// past filter.MaxSignedBody is the 413, and a held request that ends in
// trailers the fail-closed 400.
func SigV4(t *testing.T, d Driver) {
	dir := t.TempDir()
	c := Config(t, dir)
	if err := sigv4test.WriteValues(dir); err != nil {
		t.Fatal(err)
	}
	c.Secrets = append(c.Secrets, sigv4test.Secret(sigv4test.Targets("443")...))
	pod := d.Pod(t, c)
	for _, tc := range sigv4test.Cases(time.Now().UTC(), "") {
		t.Run(tc.Name, func(t *testing.T) {
			s := bodyStream(t, pod, tc.Host)
			defer s.Destroy()
			out, stop, body := sendSigned(t, s, tc)
			noAWS(t, s)
			if tc.Status == -1 { // forwarded, then cut at the chunk that does not verify
				if rs := s.Replies(); !stop || len(rs) != 1 || rs[0].Status != 403 || rs[0].Details != "jr2_custodian_"+filter.ReasonSignature {
					t.Fatalf("want the engine's 403 at the bad chunk, got stop %v, replies %+v", stop, rs)
				}
				return
			}
			if tc.Status != 0 {
				rs := s.Replies()
				if !stop || len(rs) != 1 || rs[0].Status != tc.Status || rs[0].Details != "jr2_custodian_"+tc.Reason {
					t.Fatalf("want the engine's %d %s, got stop %v, replies %+v", tc.Status, tc.Reason, stop, rs)
				}
				if set, v := s.Mark(); set && v {
					t.Error("a refused request was marked")
				}
				return
			}
			if stop || len(s.Replies()) != 0 {
				t.Fatalf("stopped: %+v", s.Replies())
			}
			if set, v := s.Mark(); !set || !v {
				t.Fatal("a forwarded request was not marked")
			}
			if len(body) != len(tc.Body) || !resigned(get(tc.Headers, "X-Amz-Content-Sha256")) && body != tc.Body {
				t.Errorf("the body went on as %d bytes %.40q, want %d bytes %.40q (a signed chunked body re-signed, any other as sent)", len(body), body, len(tc.Body), tc.Body)
			}
			if err := sigv4test.Verify(tc.Method, get(out, ":authority"), get(out, ":path"), out, get(out, "content-length"), []byte(body)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("a held body past the limit: 413", func(t *testing.T) {
		tc := invokeCase(t)
		s := bodyStream(t, pod, tc.Host)
		defer s.Destroy()
		if _, stop := s.RequestHeadersEnd(requestHeaders(tc, filter.MaxSignedBody+1), false); !stop || len(s.Replies()) != 0 {
			t.Fatal("the request was not held for its body")
		}
		chunk := []byte(strings.Repeat("x", 1<<20))
		for sent := 0; ; sent += len(chunk) {
			if _, stop := s.RequestData(chunk, false); stop && len(s.Replies()) > 0 {
				break
			}
			if sent > filter.MaxSignedBody {
				t.Fatal("a body past the limit was held on")
			}
		}
		if rs := s.Replies(); len(rs) != 1 || rs[0].Status != 413 || rs[0].Details != "jr2_custodian_"+filter.ReasonBodySize {
			t.Fatalf("replies %+v", rs)
		}
	})
	t.Run("the process's budget of held bodies spent: 503, then held again", func(t *testing.T) {
		tc := invokeCase(t)
		var other filter.Hold // what other streams hold
		if !other.Take(filter.MaxHeldBodies - int(filter.HeldBytes()) - len(tc.Body) + 1) {
			t.Fatal("the budget is taken already")
		}
		defer other.Release()
		s := bodyStream(t, pod, tc.Host)
		s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false)
		if _, stop := s.RequestData([]byte(tc.Body), true); !stop {
			t.Fatal("the body went on past the budget")
		}
		rs := s.Replies()
		if len(rs) != 1 || rs[0].Status != 503 || rs[0].Body != "jr2 custodian: "+filter.HeldBodyText || rs[0].Details != "jr2_custodian_"+filter.ReasonHeldBudget || !slices.Contains(rs[0].Headers, filter.Header{Name: "retry-after", Value: strconv.Itoa(filter.RetryAfter)}) {
			t.Fatalf("replies %+v", rs)
		}
		s.Destroy()
		other.Release()
		s = bodyStream(t, pod, tc.Host)
		defer s.Destroy()
		s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false)
		if _, stop := s.RequestData([]byte(tc.Body), true); stop || len(s.Replies()) != 0 {
			t.Fatalf("refused once the budget was back: %+v", s.Replies())
		}
		nothingHeld(t, "after the body went on")
	})
	t.Run("a held request that ends before its body: its hold given back", func(t *testing.T) {
		tc := invokeCase(t)
		s := bodyStream(t, pod, tc.Host)
		s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false)
		s.RequestData([]byte(tc.Body[:4]), false)
		if filter.HeldBytes() == 0 {
			t.Fatal("the held bytes were not counted")
		}
		s.Destroy()
		nothingHeld(t, "after the stream ended")
	})
	t.Run("a signed chunk past the process's budget of held bytes: 503 mid-stream, nothing held after", func(t *testing.T) {
		tc := chunkCase(t)
		other := spendBudget(t, 100) // what other streams hold
		defer other.Release()
		s := bodyStream(t, pod, tc.Host)
		if _, stop := s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false); stop || len(s.Replies()) != 0 {
			t.Fatalf("the chunked upload was not forwarded: %+v", s.Replies())
		}
		// The request went upstream with its headers: the refusal resets
		// it there, and the agent gets the budget's 503.
		_, stop := s.RequestData([]byte(tc.Body[:len(tc.Body)/2]), false)
		rs := s.Replies()
		if !stop || len(rs) != 1 || rs[0].Status != 503 || rs[0].Body != "jr2 custodian: "+filter.HeldChunkText || rs[0].Details != "jr2_custodian_"+filter.ReasonHeldBudget || !slices.Contains(rs[0].Headers, filter.Header{Name: "retry-after", Value: strconv.Itoa(filter.RetryAfter)}) {
			t.Fatalf("want the budget's 503 at the chunk, got stop %v, replies %+v", stop, rs)
		}
		s.Destroy()
		other.Release()
		nothingHeld(t, "after the refusal")
	})
	t.Run("a signed chunk held, the stream reset mid-chunk: nothing held after", func(t *testing.T) {
		tc := chunkCase(t)
		s := bodyStream(t, pod, tc.Host)
		s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false)
		if out, stop := s.RequestData([]byte(tc.Body[:len(tc.Body)/2]), false); stop || len(out) != 0 || filter.HeldBytes() == 0 {
			t.Fatalf("half a chunk: stop %v, %d bytes on, %d held", stop, len(out), filter.HeldBytes())
		}
		s.Destroy()
		nothingHeld(t, "after the stream ended")
	})
	t.Run("a signed chunked upload sent whole: nothing held after", func(t *testing.T) {
		tc := chunkCase(t)
		s := bodyStream(t, pod, tc.Host)
		defer s.Destroy()
		if _, stop, body := sendSigned(t, s, tc); stop || len(body) != len(tc.Body) {
			t.Fatalf("stop %v, %d of %d bytes on, replies %+v", stop, len(body), len(tc.Body), s.Replies())
		}
		nothingHeld(t, "after the body went on")
	})
	t.Run("a held request that ends in trailers: 400", func(t *testing.T) {
		tc := invokeCase(t)
		s := bodyStream(t, pod, tc.Host)
		defer s.Destroy()
		s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), false)
		s.RequestData([]byte(tc.Body), false)
		if stop := s.RequestTrailers(); !stop {
			t.Fatal("the trailers went on")
		}
		if rs := s.Replies(); len(rs) != 1 || rs[0].Status != 400 || rs[0].Details != "jr2_custodian_"+filter.ReasonBodySize {
			t.Fatalf("replies %+v", rs)
		}
		if set, v := s.Mark(); set && v {
			t.Error("marked")
		}
	})
}

// spendBudget takes all but free bytes of the process's budget of held
// bytes, as other streams would hold them.
func spendBudget(t *testing.T, free int) *filter.Hold {
	t.Helper()
	other := new(filter.Hold)
	if !other.Take(filter.MaxHeldBodies - int(filter.HeldBytes()) - free) {
		t.Fatal("the budget is taken already")
	}
	return other
}

// nothingHeld fails when the process holds any byte of its budget.
func nothingHeld(t *testing.T, after string) {
	t.Helper()
	if n := filter.HeldBytes(); n != 0 {
		t.Errorf("the process still holds %d bytes %s", n, after)
	}
}

// chunkCase is the table's signed aws-chunked upload that goes upstream.
func chunkCase(t *testing.T) sigv4test.Case {
	for _, c := range sigv4test.Cases(time.Now().UTC(), "") {
		if c.Status == 0 && get(c.Headers, "X-Amz-Content-Sha256") == filter.StreamingSignedPayload {
			return c
		}
	}
	t.Fatal("the table has no signed aws-chunked forward")
	return sigv4test.Case{}
}

// invokeCase is the table's request whose body the engine hashes.
func invokeCase(t *testing.T) sigv4test.Case {
	for _, c := range sigv4test.Cases(time.Now().UTC(), "") {
		if c.Host == sigv4test.Bedrock && c.Status == 0 {
			return c
		}
	}
	t.Fatal("the table has no bedrock forward")
	return sigv4test.Case{}
}

func bodyStream(t *testing.T, pod Pod, host string) BodyStream {
	t.Helper()
	s, ok := pod.Stream(t, pluginconf.RoleIntercept, host+":443").(BodyStream)
	if !ok {
		t.Fatal("the adapter's stream takes no request body (streamtest.BodyStream)")
	}
	return s
}

// requestHeaders are tc's headers as Envoy's map holds them.
func requestHeaders(tc sigv4test.Case, length int) []filter.Header {
	hs := H(":method", tc.Method, ":authority", tc.Host, ":path", tc.Path)
	for _, h := range tc.Headers {
		hs = append(hs, filter.Header{Name: strings.ToLower(h.Name), Value: h.Value})
	}
	if length > 0 {
		hs = append(hs, filter.Header{Name: "content-length", Value: strconv.Itoa(length)})
	}
	return hs
}

// sendSigned sends tc's request, its body in two chunks, as Envoy does:
// out is the request's headers as they went on (or stopped), body what
// went on of the body.
func sendSigned(t *testing.T, s BodyStream, tc sigv4test.Case) (out []filter.Header, stop bool, body string) {
	t.Helper()
	out, stop = s.RequestHeadersEnd(requestHeaders(tc, len(tc.Body)), tc.Body == "")
	if tc.Body == "" || len(s.Replies()) > 0 {
		return out, stop, ""
	}
	half := len(tc.Body) / 2
	chunks := []string{tc.Body[:half], tc.Body[half:]}
	for i, c := range chunks {
		b, st := s.RequestData([]byte(c), i == len(chunks)-1)
		body += string(b)
		if st && len(s.Replies()) > 0 {
			return s.Request(), true, body
		}
		if stop && i < len(chunks)-1 && (!st || len(b) != 0) {
			t.Fatalf("a held request's chunk went on (%d bytes)", len(b))
		}
		stop = st
	}
	return s.Request(), stop, body
}

// noAWS fails when the real key's secret, token or id is in a reply or a
// log line.
func noAWS(t *testing.T, s BodyStream) {
	t.Helper()
	var all []string
	for _, r := range s.Replies() {
		all = append(all, r.Body, r.Details)
	}
	all = append(all, s.Logs()...)
	for _, v := range sigv4test.Sentinels {
		if strings.Contains(strings.Join(all, "\n"), v) {
			t.Errorf("a reply or a log line holds a real part of the key")
		}
	}
}

// resigned reports whether a body of this x-amz-content-sha256 goes on
// re-signed (its chunk signatures the real key's), not as sent.
func resigned(contentSHA string) bool {
	return contentSHA == filter.StreamingSignedPayload || contentSHA == filter.StreamingSignedTrailer
}
