package serve

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/contract"
)

// awsUpstream is a TLS upstream for the bound AWS hosts that checks, as
// AWS would, that each request is signed with the real key.
type awsUpstream struct {
	srv      *httptest.Server
	port     string
	verified atomic.Int32
	failures chan string
}

func newAWSUpstream(t *testing.T, f *fixture) *awsUpstream {
	u := &awsUpstream{failures: make(chan string, 64)}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var hs []filter.Header
		for k, vs := range r.Header {
			for _, v := range vs {
				hs = append(hs, filter.Header{Name: k, Value: v})
			}
		}
		if err := sigv4test.Verify(r.Method, r.Host, r.URL.RequestURI(), hs, r.Header.Get("Content-Length"), body); err != nil {
			u.failures <- r.URL.Path + ": " + err.Error()
			http.Error(w, "SignatureDoesNotMatch", 403)
			return
		}
		u.verified.Add(1)
		// An upstream that echoes what it got: the real parts must be
		// scrubbed from the answer.
		io.WriteString(w, "ok "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Amz-Security-Token")+" "+string(body))
	}))
	leaf := f.uca.Leaf(t, sigv4test.Hosts...)
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

// TestSigV4 runs the shared SigV4 table (package sigv4test) through
// custodian serve over real HTTP: the agent's client signs with the
// stand-ins, the upstream checks the real key's signature; each refusal is
// the engine's, nothing of it upstream; the real parts are in no answer
// and no log line.
func TestSigV4(t *testing.T) {
	f, up := sigv4Fixture(t)
	forwarded := 0
	for _, c := range sigv4test.Cases(time.Now().UTC(), up.port) {
		t.Run(c.Name, func(t *testing.T) {
			host := c.Host
			resp, b := sendCase(t, f, c)
			for _, v := range sigv4test.Sentinels {
				if strings.Contains(string(b), v) {
					t.Errorf("the answer holds a real part: %q", b)
				}
			}
			if c.Status == -1 { // forwarded, then cut at the chunk that does not verify: nothing reaches the upstream
				if resp.StatusCode != 403 || !strings.Contains(string(b), filter.SigV4ChunkText) {
					t.Fatalf("want the engine's 403 at the bad chunk, got %d %q", resp.StatusCode, b)
				}
				waitLog(t, f.log, "action=intercept target="+host+" secret=AWS method=PUT status=403\n")
				return
			}
			if c.Status == 0 {
				forwarded++
				if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "ok ") {
					select {
					case why := <-up.failures:
						t.Fatalf("%d %q; the upstream: %s", resp.StatusCode, b, why)
					default:
						t.Fatalf("%d %q", resp.StatusCode, b)
					}
				}
				return
			}
			if resp.StatusCode != c.Status || !strings.HasPrefix(string(b), "jr2 custodian: ") {
				t.Fatalf("want %d from the Custodian, got %d %q", c.Status, resp.StatusCode, b)
			}
			waitLog(t, f.log, "action=refuse target="+host+" reason="+c.Reason+"\n")
		})
	}
	if n := int(up.verified.Load()); n != forwarded {
		t.Errorf("the upstream verified %d requests, want %d (a refusal reached it)", n, forwarded)
	}
	waitLog(t, f.log, "secret=AWS method=POST status=200\n")
	for _, v := range append(sigv4test.Sentinels, "jr2-held-") {
		if strings.Contains(f.log.String(), v) {
			t.Errorf("a log line holds %q", v)
		}
	}
}

// sigv4Fixture is a Custodian holding the table's key bound to every
// table host, served by an upstream that checks the real key's signature.
func sigv4Fixture(t *testing.T) (*fixture, *awsUpstream) {
	var up *awsUpstream
	f := newFixtureEdit(t, fakeDNS(t), nil, func(f *fixture, dir string, cfg *filter.Config) {
		up = newAWSUpstream(t, f)
		targets := sigv4test.Targets(up.port)
		cfg.Secrets = append([]filter.SecretConfig{sigv4test.Secret(targets...)}, cfg.Secrets...)
		must(t, sigv4test.WriteValues(filepath.Join(dir, "values")))
		for _, tg := range targets {
			leaf := f.jca.Leaf(t, strings.Split(tg, ":")[0])
			base := filepath.Join(dir, contract.LeafBase(tg))
			must(t, os.WriteFile(base+".crt", leaf.CertPEM, 0o644))
			must(t, os.WriteFile(base+".key", leaf.KeyPEM, 0o600))
		}
	})
	return f, up
}

// sendCase sends the table's case c through f and returns the answer and
// its body.
func sendCase(t *testing.T, f *fixture, c sigv4test.Case) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.Method, "https://"+c.Host+c.Path, bytes.NewReader([]byte(c.Body)))
	must(t, err)
	if c.Body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	for _, h := range c.Headers {
		req.Header[h.Name] = append(req.Header[h.Name], h.Value)
	}
	return do(t, f, req)
}

// do sends req through f and returns the answer and its body.
func do(t *testing.T, f *fixture, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := f.client().Do(req)
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// TestSigV4ChunkHeldBudget: a signed aws-chunked upload's chunk, held
// whole until its signature verified, counts in the process's budget of
// held bytes. Past it, mid-stream: the upstream request (its headers gone
// on) is cut, so the upstream never reads the body whole, and the agent
// gets the budget's 503 with Retry-After; once the budget is back the
// same upload goes through, and nothing stays held.
func TestSigV4ChunkHeldBudget(t *testing.T) {
	f, up := sigv4Fixture(t)
	var c sigv4test.Case
	for _, tc := range sigv4test.Cases(time.Now().UTC(), up.port) {
		for _, h := range tc.Headers {
			if h.Name == "X-Amz-Content-Sha256" && h.Value == filter.StreamingSignedPayload && tc.Status == 0 {
				c = tc
			}
		}
	}
	if c.Name == "" {
		t.Fatal("the table has no signed aws-chunked forward")
	}
	var other filter.Hold // what other requests hold
	if !other.Take(filter.MaxHeldBodies - int(filter.HeldBytes()) - 100) {
		t.Fatal("the budget is taken already")
	}
	defer other.Release()
	resp, b := sendCase(t, f, c)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != strconv.Itoa(filter.RetryAfter) || string(b) != "jr2 custodian: "+filter.HeldChunkText {
		t.Fatalf("%d %v %.200q", resp.StatusCode, resp.Header, b)
	}
	waitLog(t, f.log, "action=intercept target="+c.Host+" secret=AWS method=PUT status=503\n")
	if up.verified.Load() != 0 {
		t.Error("the upstream read the cut upload whole")
	}
	other.Release()
	if resp, b := sendCase(t, f, c); resp.StatusCode != 200 {
		t.Fatalf("once the budget was back: %d %.200q", resp.StatusCode, b)
	}
	if n := filter.HeldBytes(); n != 0 {
		t.Errorf("the process still holds %d bytes after the upload went on", n)
	}
}

// TestSigV4BodyTooLarge: a body the engine must hash is held up to
// filter.MaxSignedBody bytes; past it, the engine's 413 and nothing
// upstream.
func TestSigV4BodyTooLarge(t *testing.T) {
	f, up := bedrockFixture(t)
	host := sigv4test.Bedrock + ":" + up.port
	big := strings.Repeat("x", filter.MaxSignedBody+1)
	resp, b := postSigned(t, f, host, big)
	if resp.StatusCode != 413 || !strings.Contains(string(b), "may be at most 16777216 bytes") {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	waitLog(t, f.log, "action=refuse target="+host+" reason="+filter.ReasonBodySize+"\n")
	if up.verified.Load() != 0 {
		t.Error("the oversized request reached the upstream")
	}
}

// bedrockFixture is a Custodian holding the table's key bound to the
// Bedrock host, served by an upstream that checks the real key's
// signature.
func bedrockFixture(t *testing.T) (*fixture, *awsUpstream) {
	var up *awsUpstream
	f := newFixtureEdit(t, fakeDNS(t), nil, func(f *fixture, dir string, cfg *filter.Config) {
		up = newAWSUpstream(t, f)
		tg := sigv4test.Bedrock + ":" + up.port
		cfg.Secrets = append([]filter.SecretConfig{sigv4test.Secret(tg)}, cfg.Secrets...)
		must(t, sigv4test.WriteValues(filepath.Join(dir, "values")))
		leaf := f.jca.Leaf(t, sigv4test.Bedrock)
		base := filepath.Join(dir, contract.LeafBase(tg))
		must(t, os.WriteFile(base+".crt", leaf.CertPEM, 0o644))
		must(t, os.WriteFile(base+".key", leaf.KeyPEM, 0o600))
	})
	return f, up
}

// postSigned posts body to host's invoke path, signed with the stand-ins
// and no x-amz-content-sha256 (the Custodian hashes the body), and returns
// the answer and its body.
func postSigned(t *testing.T, f *fixture, host, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", "https://"+host+"/model/m/invoke", strings.NewReader(body))
	must(t, err)
	must(t, sigv4test.Sign(req, sigv4test.StandIns, "bedrock", []byte(body), time.Now().UTC()))
	return do(t, f, req)
}

// TestSigV4HeldBudget: the bodies the process holds to hash are bounded
// across requests (filter.MaxHeldBodies); a request whose body would pass
// the bound is answered 503 with Retry-After, nothing upstream, and once
// the bodies held went on the same request goes through and its hold is
// given back.
func TestSigV4HeldBudget(t *testing.T) {
	f, up := bedrockFixture(t)
	host := sigv4test.Bedrock + ":" + up.port
	body := `{"prompt":"` + strings.Repeat("x", 40<<10) + `"}`
	var other filter.Hold // what other requests hold
	if !other.Take(filter.MaxHeldBodies - int(filter.HeldBytes()) - len(body) + 1) {
		t.Fatal("the budget is taken already")
	}
	defer other.Release()
	resp, b := postSigned(t, f, host, body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != strconv.Itoa(filter.RetryAfter) || string(b) != "jr2 custodian: "+filter.HeldBodyText {
		t.Fatalf("%d %v %.200q", resp.StatusCode, resp.Header, b)
	}
	waitLog(t, f.log, "action=refuse target="+host+" reason="+filter.ReasonHeldBudget+"\n")
	if up.verified.Load() != 0 {
		t.Error("the request past the budget reached the upstream")
	}
	other.Release()
	if resp, b := postSigned(t, f, host, body); resp.StatusCode != 200 {
		t.Fatalf("once the budget was back: %d %.200q", resp.StatusCode, b)
	}
	if n := filter.HeldBytes(); n != 0 {
		t.Errorf("the process still holds %d bytes after the body went on", n)
	}
}
