//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
	"jr2.dev/boundary/internal/valuedir/valuedirtest"
)

// rotName is the rotated secret of the rotation pod.
const rotName = "ROT_KEY"

// TestRotation: each host follows a kubelet-style rotation of
// its value directory with no restart. 32 clients send swapped requests
// on their own keep-alive connections without pause while the directory
// is rotated ten times (a new timestamped directory, ..data swapped: the
// kubelet's atomic writer's steps, valuedirtest.Write): every request the
// upstream gets carries exactly one whole value, one that was current
// around its time; after a rotation, new requests carry the new value (polled for,
// within 2 s); the old value, echoed by the upstream after the rotation,
// is still scrubbed; no connection is cut. Then a rotation to a guessable
// value, to an empty file and to a directory missing the file are each
// refused with their line while the old value still serves, and the next
// good rotation is taken.
func TestRotation(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) {
			p := newRotPod(t, host)
			run(t, "32 clients across ten rotations", p.testRotations)
			run(t, "refused rotations change nothing", p.testRefusedRotations)
			if err := p.run.Stop(); err != nil {
				t.Errorf("the host did not stop cleanly: %v\n%s", err, p.run.out.String())
			}
			for _, v := range p.all() {
				if strings.Contains(p.run.out.String(), v) {
					t.Fatal("the host's output holds a value")
				}
			}
		})
	}
}

// rotPod is a pod whose one secret is rotated under it.
type rotPod struct {
	run    *Running
	dir    string // the value directory, kubelet layout
	target string
	roots  *x509.CertPool
	token  string

	mu     sync.Mutex
	values []string       // every value ROT_KEY had, in order
	index  map[string]int // value -> its index in values
	seen   []seenRequest  // what the upstream got, by request id
}

// seenRequest is one request as the upstream got it.
type seenRequest struct {
	id    int64
	value string // the x-api-key value, whole
}

func newRotPod(t *testing.T, host Host) *rotPod {
	tmp := t.TempDir()
	p := &rotPod{token: sentinel(t, contract.TokenName), index: map[string]int{}}
	upCA := testpki.NewCA(t, "e2e rotation upstream CA")
	p.target = serveTLS(t, upCA, "127.0.0.1", http.HandlerFunc(p.upstream))
	orch := serveLoopback(t, http.NotFoundHandler())
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName,
		Secrets: []manifestSecret{{Name: rotName, Hosts: []string{p.target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}}}}
	first := p.next(t)
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{rotName: first, contract.TokenName: p.token})
	p.roots = roots
	// renderLocalPod wrote plain files; lay the directory out as the
	// kubelet does before the host reads it.
	p.dir = filepath.Join(tmp, "values")
	for _, n := range []string{rotName, contract.TokenName} {
		os.Remove(filepath.Join(p.dir, n))
	}
	p.rotate(t, map[string]string{rotName: first, contract.TokenName: p.token})
	p.run = host.Start(t, dir, "")
	return p
}

// next makes a fresh value and remembers it.
func (p *rotPod) next(t *testing.T) string {
	v := sentinel(t, rotName)
	p.mu.Lock()
	p.index[v] = len(p.values)
	p.values = append(p.values, v)
	p.mu.Unlock()
	return v
}

func (p *rotPod) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.token}, p.values...)
}

// rotate writes files into the value directory as the kubelet does.
func (p *rotPod) rotate(t *testing.T, files map[string]string) {
	t.Helper()
	lines := make(map[string]string, len(files))
	for n, v := range files {
		lines[n] = v + "\n"
	}
	valuedirtest.Write(t, p.dir, lines)
}

// upstream records the value each request carried (x-rot-id names the
// request) and echoes it; /v1/old echoes the value before it too.
func (p *rotPod) upstream(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("X-Api-Key")
	id, _ := strconv.ParseInt(r.Header.Get("X-Rot-Id"), 10, 64)
	p.mu.Lock()
	p.seen = append(p.seen, seenRequest{id: id, value: got})
	prev := ""
	if i, ok := p.index[got]; ok && i > 0 {
		prev = p.values[i-1]
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	if r.URL.Path == "/v1/old" {
		w.Header().Set("X-Old", prev)
		io.WriteString(w, "old "+prev+" now "+got)
		return
	}
	io.WriteString(w, "got "+got)
}

func (p *rotPod) client() *http.Client {
	pu, _ := url.Parse("http://" + p.run.Egress)
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:               http.ProxyURL(pu),
		TLSClientConfig:     &tls.Config{RootCAs: p.roots},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
	}}
}

// sent is one request as a client sent it.
type sent struct {
	id         int64
	start, end time.Time
}

// probe sends one request and returns the value the upstream got (the
// last the upstream saw with this id).
func (p *rotPod) probe(t *testing.T, c *http.Client, id int64, path string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+p.target+path, nil)
	req.Header.Set("x-api-key", standIn(rotName))
	req.Header.Set("x-rot-id", strconv.FormatInt(id, 10))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("probe: %d, %v", resp.StatusCode, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.seen) - 1; i >= 0; i-- {
		if p.seen[i].id == id {
			return p.seen[i].value, string(b) + "\n" + resp.Header.Get("X-Old")
		}
	}
	t.Fatal("the upstream did not see the probe")
	return "", ""
}

// waitValue polls with fresh probes until the upstream gets want; a
// rotation reaches new requests within 2 s (docs/custodian-json.md).
func (p *rotPod) waitValue(t *testing.T, c *http.Client, ids *atomic.Int64, want string) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); ; {
		if got, _ := p.probe(t, c, ids.Add(1), "/v1/probe"); got == want {
			return
		}
		if time.Now().After(end) {
			t.Fatal("2 s after the rotation, a new request still did not carry the new value")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *rotPod) testRotations(t *testing.T) {
	const clients = 32
	var ids atomic.Int64
	var (
		mu      sync.Mutex
		sends   []sent
		newConn = make([]int, clients)
	)
	stop := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.client()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := ids.Add(1)
				req, _ := http.NewRequest("GET", "https://"+p.target+"/v1/x", nil)
				req.Header.Set("x-api-key", standIn(rotName))
				req.Header.Set("x-rot-id", strconv.FormatInt(id, 10))
				req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) {
						if !i.Reused {
							mu.Lock()
							newConn[k]++
							mu.Unlock()
						}
					},
				}))
				start := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					errs <- fmt.Errorf("client %d: %v", k, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != "got [secret:"+rotName+"]" {
					errs <- fmt.Errorf("client %d: %d %q %v; want 200 and the echo scrubbed", k, resp.StatusCode, b, err)
					return
				}
				mu.Lock()
				sends = append(sends, sent{id: id, start: start, end: time.Now()})
				mu.Unlock()
			}
		}()
	}

	pc := p.client()
	var rotated, switched []time.Time // when rotation i was written, and when a probe first got its value
	for i := 1; i <= 10; i++ {
		time.Sleep(150 * time.Millisecond) // traffic on the old value
		v := p.next(t)
		rotated = append(rotated, time.Now())
		p.rotate(t, map[string]string{rotName: v, contract.TokenName: p.token})
		p.waitValue(t, pc, &ids, v)
		switched = append(switched, time.Now())
		// The old value, echoed after the rotation, is still scrubbed.
		got, echo := p.probe(t, pc, ids.Add(1), "/v1/old")
		want := "old [secret:" + rotName + "] now [secret:" + rotName + "]\n[secret:" + rotName + "]"
		if got != v || echo != want {
			t.Fatalf("rotation %d: the old value echoed after it is not scrubbed", i)
		}
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// Every request the upstream got carried one whole value: value j
	// (written at rotated[j-1]; value 0 at start) no later than the
	// request ended, and not yet replaced by j+1 when the request began
	// (the replacement was seen at switched[j]).
	p.mu.Lock()
	defer p.mu.Unlock()
	byID := map[int64]string{}
	for _, s := range p.seen {
		byID[s.id] = s.value
	}
	for _, s := range sends {
		v, ok := byID[s.id]
		if !ok {
			t.Fatalf("request %d: the upstream never got it", s.id)
		}
		j, ok := p.index[v]
		if !ok {
			t.Fatalf("request %d carried no whole value (a mix, a cut or a stand-in)", s.id)
		}
		if j > 0 && rotated[j-1].After(s.end) {
			t.Fatalf("request %d carried value %d before it was written", s.id, j)
		}
		if j < len(switched) && switched[j].Before(s.start) {
			t.Fatalf("request %d began after value %d was served and still carried value %d", s.id, j+1, j)
		}
	}
	counts := map[int]int{}
	for _, s := range sends {
		counts[p.index[byID[s.id]]]++
	}
	for j := 0; j <= 10; j++ {
		if counts[j] == 0 {
			t.Errorf("no client request carried value %d: the traffic did not span the rotations", j)
		}
	}
	for k, n := range newConn {
		if n != 1 {
			t.Errorf("client %d opened %d connections; a rotation must cut none", k, n)
		}
	}
	t.Logf("%d client requests across 10 rotations", len(sends))
	oks := p.run.out.matching(func(l string) bool { return strings.Contains(l, "jr2.custodian action=reload result=ok secrets=2") })
	if len(oks) < 10 {
		t.Errorf("%d reload ok lines after ten rotations, want at least 10", len(oks))
	}
}

func (p *rotPod) testRefusedRotations(t *testing.T) {
	var ids atomic.Int64
	ids.Store(1 << 40)
	c := p.client()
	p.mu.Lock()
	serving := p.values[len(p.values)-1]
	p.mu.Unlock()
	cases := []struct {
		name, word string
		files      map[string]string
	}{
		{"a guessable value", "guessable", map[string]string{rotName: "password1234", contract.TokenName: p.token}},
		{"an empty file", "empty", map[string]string{rotName: "", contract.TokenName: p.token}},
		{"a directory missing the file", "missing", map[string]string{contract.TokenName: p.token}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.rotate(t, tc.files)
			want := "jr2.custodian action=reload result=refused secret=" + rotName + " reason=" + tc.word
			has := func(l string) bool { return strings.HasSuffix(l, want) }
			for end := time.Now().Add(20 * time.Second); len(p.run.out.matching(has)) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("no line %q:\n%s", want, p.run.out.String())
				}
			}
			if got, _ := p.probe(t, c, ids.Add(1), "/v1/probe"); got != serving {
				t.Fatal("a refused rotation changed the value served")
			}
		})
	}
	v := p.next(t)
	p.rotate(t, map[string]string{rotName: v, contract.TokenName: p.token})
	p.waitValue(t, c, &ids, v)
	for _, l := range p.run.out.matching(func(l string) bool { return strings.Contains(l, "action=reload") }) {
		if strings.Contains(l, p.dir) || strings.Contains(l, "password1234") {
			t.Fatalf("a reload line holds a path or a value: %q", l)
		}
	}
}
