//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The bound AWS hosts of the SigV4 pod.
const (
	awsS3      = "s3.us-east-1.amazonaws.com"
	awsBedrock = "bedrock-runtime.us-east-1.amazonaws.com"
	awsName    = "AWS"
)

// TestSigV4Clients: real AWS clients through the Custodian with only
// harness.env (the AWS_* stand-ins, HTTPS_PROXY, the trust variables) and
// the endpoints, against an upstream that checks every SigV4 signature
// with the REAL key using botocore's own signer (e2e/python/
// sigv4_upstream.py): a Bedrock InvokeModel (a JSON POST whose body the
// Custodian hashes), an S3 put, a get, a presigned get, and a client
// signing for another region, which the Custodian refuses before the
// upstream — from boto3 and the AWS SDK for JavaScript v3, whose puts go
// as the SDKs' flexible checksums send them by default (aws-chunked,
// STREAMING-UNSIGNED-PAYLOAD-TRAILER, a CRC32 trailer the upstream checks
// against the data), and the AWS SDK for Go v2 (UNSIGNED-PAYLOAD); and the
// signed aws-chunked puts, plain and with a checksum trailer (the shared
// table's, sent by Go's client), whose chunk and trailer chains the
// upstream checks with the real key. How each client's PUTs went is
// checked by form. The bound names resolve to the local upstream in the
// Custodian's mount namespace (its /etc/hosts); the clients reach them
// only through HTTPS_PROXY. The real key id, secret key and session token
// appear in no answer, no log line of the Custodian or the upstream, and
// no argv of any process the test started.
func TestSigV4Clients(t *testing.T) {
	py := filepath.Join(suiteDir(), "..", ".cache", "python-aws", "venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Fatal("e2e: boto3 is not installed for the AWS clients: run make .cache/python-aws/venv (make tools does)")
	}
	if _, err := os.Stat(filepath.Join(suiteDir(), "node-aws", "node_modules", "@aws-sdk", "client-s3")); err != nil {
		t.Fatal("e2e: the AWS SDK for JavaScript is not installed: run make e2e/node-aws/node_modules (make tools does)")
	}
	for _, host := range hostsToRun(t) {
		run(t, host.Name(), func(t *testing.T) { testSigV4Clients(t, host, py) })
	}
}

// awsPod is a rendered pod holding one AWS key bound to the two hosts on
// the upstream's port, with its upstream and running Custodian.
type awsPod struct {
	port  string
	real  map[string]string // part -> value
	env   []string          // a client's whole environment
	run   *Running
	up    *exec.Cmd
	upErr *output
	cmds  []*exec.Cmd // every process the test started, for their argv
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func newAWSPod(t *testing.T, host Host, py string) *awsPod {
	tmp := t.TempDir()
	p := &awsPod{real: map[string]string{
		"id":     "AKIA" + strings.ToUpper(randomHex(t, 8)),
		"secret": "SENTINEL/aws+" + randomHex(t, 16),
		"token":  "SENTINEL-aws-token/" + randomHex(t, 24) + "==",
	}}
	ca := testpki.NewCA(t, "e2e sigv4 upstream CA")
	leaf := ca.Leaf(t, awsS3, awsBedrock)
	mustWrite(t, filepath.Join(tmp, "up.crt"), string(leaf.CertPEM), 0o644)
	mustWrite(t, filepath.Join(tmp, "up.key"), string(leaf.KeyPEM), 0o600)
	creds, _ := json.Marshal(p.real)
	mustWrite(t, filepath.Join(tmp, "creds.json"), string(creds), 0o600)

	portFile := filepath.Join(tmp, "port")
	p.up = exec.Command(py, filepath.Join(suiteDir(), "python", "sigv4_upstream.py"))
	p.up.Env = []string{"SIGV4_CREDS=" + filepath.Join(tmp, "creds.json"), "SIGV4_CERT=" + filepath.Join(tmp, "up.crt"),
		"SIGV4_KEY=" + filepath.Join(tmp, "up.key"), "SIGV4_PORT_FILE=" + portFile, "PATH=" + os.Getenv("PATH")}
	p.upErr = &output{}
	stderr, err := p.up.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.up.Start(); err != nil {
		t.Fatal(err)
	}
	go p.upErr.read(stderr, "")
	p.cmds = append(p.cmds, p.up)
	t.Cleanup(func() { p.up.Process.Kill(); p.up.Wait() })
	for i := 0; ; i++ {
		if b, err := os.ReadFile(portFile); err == nil {
			p.port = string(b)
			break
		}
		if i > 300 {
			t.Fatalf("the SigV4 upstream did not start: %s", p.upErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	values := map[string]string{
		contract.TokenName:             sentinel(t, contract.TokenName),
		contract.AWSKeyID.Of(awsName):  p.real["id"],
		contract.AWSSecret.Of(awsName): p.real["secret"],
		contract.AWSToken.Of(awsName):  p.real["token"],
	}
	m := manifest{Pod: podName, Orchestrator: serveLoopback(t, http.NotFoundHandler()), Sandbox: podName,
		Secrets: []manifestSecret{{Name: awsName, Hosts: []string{awsS3 + ":" + p.port, awsBedrock + ":" + p.port}, AWS: map[string]bool{"sessionToken": true}}}}
	dir, _ := renderLocalPod(t, tmp, host, m, ca, values)
	hosts := filepath.Join(tmp, "hosts")
	mustWrite(t, hosts, "127.0.0.1 localhost\n127.0.0.1 "+awsS3+"\n127.0.0.1 "+awsBedrock+"\n", 0o644)
	p.run = host.Start(t, dir, hosts)
	p.cmds = append(p.cmds, p.run.cmd)

	hb, err := os.ReadFile(filepath.Join(dir, "harness.env"))
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	mustMkdir(t, home)
	p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"AWS_ENDPOINT_URL_S3=https://" + awsS3 + ":" + p.port,
		"AWS_ENDPOINT_URL_BEDROCK_RUNTIME=https://" + awsBedrock + ":" + p.port,
		"AWS_EC2_METADATA_DISABLED=true"}
	for _, kv := range strings.Split(strings.TrimSuffix(string(hb), "\n"), "\n") {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HTTPS_PROXY" || k == "https_proxy" {
			kv = k + "=http://" + p.run.Egress
		}
		p.env = append(p.env, kv)
	}
	return p
}

// noRealPart fails when a real part of the key is in s.
func (p *awsPod) noRealPart(t *testing.T, where, s string) {
	t.Helper()
	for part, v := range p.real {
		if strings.Contains(s, v) {
			t.Errorf("%s holds the real %s", where, part)
		}
	}
}

// stepResult is one line aws_client.py prints.
type stepResult struct {
	Step   string `json:"step"`
	OK     bool   `json:"ok"`
	Status int    `json:"status"`
	Body   string `json:"body"`
}

func testSigV4Clients(t *testing.T, host Host, py string) {
	p := newAWSPod(t, host, py)
	for _, kv := range p.env {
		if strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") && kv != "AWS_SECRET_ACCESS_KEY="+contract.StandIn(contract.AWSSecret.Of(awsName)) {
			t.Fatalf("harness.env's secret key is not the stand-in")
		}
	}
	steps := []string{"invoke", "put", "get", "presigned", "other-region"}
	verified := 0
	var forms map[string]int
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		body string
		// forms is how the client's verified PUTs were sent, by their
		// x-amz-content-sha256 (the upstream's count of each).
		forms map[string]int
	}{
		{"boto3", exec.Command(py, append([]string{filepath.Join(suiteDir(), "python", "aws_client.py")}, steps...)...), "hello through the custodian", map[string]int{"STREAMING-UNSIGNED-PAYLOAD-TRAILER": 1}},
		// The Go client's Bedrock call runs in a process of its own: under
		// Envoy, while a tunnel to one bound name is open (the SDK keeps
		// its connection), a tunnel to another bound name on the same port
		// is judged as the first's target (421 "the Host header must name
		// bedrock-runtime…"): a defect of the Envoy data plane's shared
		// intercept listener, not of SigV4, that custodian serve does not
		// have. It fails closed; it is reported, not hidden here.
		{"the AWS SDK for Go, Bedrock", exec.Command(bins.self, steps[0]), "", nil},
		{"the AWS SDK for Go", exec.Command(bins.self, append(steps[1:], "chunked", "chunked-trailer")...), "hello from the go sdk",
			map[string]int{"UNSIGNED-PAYLOAD": 1, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD": 1, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER": 1}},
		// The AWS SDK for JavaScript v3 puts a stream as the SDKs' flexible
		// checksums do by default: aws-chunked, unsigned, with a CRC32
		// trailer, which the upstream checks against the data.
		// Every refusal of the shared table (filter/sigv4test) toward the
		// two bound hosts, sent by Go's client through HTTPS_PROXY: the
		// same status from core Envoy with the module as from custodian
		// serve and the engine's own tests, and nothing upstream.
		{"the shared table's refusals", exec.Command(bins.self, "refusals"), "", nil},
		{"the AWS SDK for JavaScript", exec.Command(node24Bin(), append([]string{filepath.Join(suiteDir(), "node-aws", "aws_client.js")}, steps...)...), "hello from the js sdk",
			map[string]int{"STREAMING-UNSIGNED-PAYLOAD-TRAILER": 1}},
	} {
		run(t, c.name, func(t *testing.T) {
			c.cmd.Env = p.env
			if c.cmd.Path == bins.self {
				c.cmd.Env = append(append([]string(nil), p.env...), roleEnv+"=awsgoclient")
			}
			p.cmds = append(p.cmds, c.cmd)
			p.client(t, c.name, c.cmd, c.body)
		})
		for _, a := range c.cmd.Args[1:] {
			if (slices.Contains(steps, a) || strings.HasPrefix(a, "chunked")) && a != "other-region" { // refused by the Custodian, never upstream
				verified++
			}
		}
		now := p.checkStats(t, verified)
		for _, f := range slices.Concat(slices.Collect(maps.Keys(now)), slices.Collect(maps.Keys(c.forms))) {
			if got := now[f] - forms[f]; got != c.forms[f] {
				t.Errorf("%s: the upstream verified %d PUTs sent as %s, want %d (all: %v)", c.name, got, f, c.forms[f], now)
			}
		}
		forms = now
	}
	p.run.out.waitPrefix(t, lineFor("action", "refuse", "target", awsS3+":"+p.port, "reason", "signature-scope"), 10*time.Second, p.run.exited)
	p.noRealPart(t, "the Custodian's output", p.run.out.String())
	p.noRealPart(t, "the upstream's stderr", p.upErr.String())
	for _, c := range p.cmds {
		p.noRealPart(t, "argv of "+filepath.Base(c.Path), strings.Join(c.Args, " "))
	}
}

// client runs one AWS client's steps and checks each outcome.
func (p *awsPod) client(t *testing.T, name string, cmd *exec.Cmd, object string) {
	out, err := cmd.CombinedOutput()
	p.noRealPart(t, name+"'s output", string(out))
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	got := map[string]stepResult{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r stepResult
		if json.Unmarshal([]byte(l), &r) == nil {
			got[r.Step] = r
		}
	}
	for _, c := range []struct {
		step   string
		ok     bool
		status int
		body   string
	}{
		{"invoke", true, 200, "hello from bedrock"},
		{"put", true, 200, ""},
		{"get", true, 200, object},
		{"presigned", true, 200, object},
		{"other-region", false, 403, ""},
		{"chunked", true, 200, ""},
		{"chunked-trailer", true, 200, ""},
	} {
		if !slices.Contains(cmd.Args[1:], c.step) {
			continue
		}
		r, ok := got[c.step]
		if !ok || r.OK != c.ok || r.Status != c.status || !strings.Contains(r.Body, c.body) {
			t.Errorf("%s %s: %+v; want ok=%v status %d holding %q (upstream: %s)", name, c.step, r, c.ok, c.status, c.body, p.upErr.String())
		}
	}
	if slices.Contains(cmd.Args[1:], "refusals") {
		refusals := tableRefusals(p.port)
		if len(refusals) < 10 {
			t.Fatalf("the shared table gives %d refusals toward the AWS hosts, fewer than the 10 it had: did its hosts change?", len(refusals))
		}
		for _, c := range refusals {
			r, ok := got["refusal "+c.Name]
			if !ok || r.Status != c.Status || !strings.HasPrefix(r.Body, "jr2 custodian: ") {
				t.Errorf("%s, %s: %+v; want the Custodian's %d", name, c.Name, r, c.Status)
			}
		}
	}
	if r, ran := got["invoke"]; ran && !strings.Contains(r.Body, "[secret:"+contract.AWSKeyID.Of(awsName)+"] [secret:"+contract.AWSToken.Of(awsName)+"]") {
		t.Errorf("the upstream's echo of the real key id and token was not scrubbed: %q", r.Body)
	}
	if t.Failed() {
		t.Logf("the Custodian's output:\n%s", p.run.out.String())
	}
}

// checkStats asks the upstream how many requests it verified with the real
// key (want) and refused (none: every refusal was the Custodian's), and
// returns how the PUTs it verified were sent (by x-amz-content-sha256).
func (p *awsPod) checkStats(t *testing.T, want int) map[string]int {
	t.Helper()
	c := exec.Command("curl", "-sS", "--max-time", "10", "-k", "--noproxy", "*", "--resolve", awsS3+":"+p.port+":127.0.0.1", "https://"+awsS3+":"+p.port+"/__stats")
	b, err := c.Output()
	if err != nil {
		t.Fatalf("the upstream's stats: %v", err)
	}
	var s struct {
		Verified, Refused int
		Forms             map[string]int
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Verified != want || s.Refused != 0 {
		t.Errorf("the upstream verified %d and refused %d (%s); want %d verified, none refused: %s", s.Verified, s.Refused, b, want, p.upErr.String())
	}
	return s.Forms
}

// tableRefusals are the shared table's requests the Custodian refuses
// before the upstream (a status, not a cut) toward the pod's two bound
// hosts on port.
func tableRefusals(port string) []sigv4test.Case {
	var out []sigv4test.Case
	for _, c := range sigv4test.Cases(time.Now().UTC(), port) {
		if c.Status > 0 && (c.Host == awsS3+":"+port || c.Host == awsBedrock+":"+port) {
			out = append(out, c)
		}
	}
	return out
}

func init() { roles["awsgoclient"] = awsGoClientMain }

// awsGoClientMain is the AWS SDK for Go v2 as a Go tool in the Harness
// runs it: the stand-ins from AWS_*, the endpoints from
// AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_BEDROCK_RUNTIME, the proxy
// (HTTPS_PROXY) and the roots (SSL_CERT_FILE) as Go reads them. It runs
// aws_client.py's steps and prints the same lines.
func awsGoClientMain() int {
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
	})
	cfg := aws.Config{Region: "us-east-1", Credentials: creds, RetryMaxAttempts: 1}
	s3c := func(region string) *s3.Client {
		c := cfg
		c.Region = region
		return s3.NewFromConfig(c, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_S3"))
			o.UsePathStyle = true
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bucket, key, data := aws.String("e2e-bucket"), aws.String("dir/go object.txt"), "hello from the go sdk"
	read := func(rc io.ReadCloser) string { b, _ := io.ReadAll(rc); rc.Close(); return string(b) }
	// send sends one of the shared table's requests, signed with the same
	// stand-ins, with Go's client through HTTPS_PROXY.
	send := func(c sigv4test.Case) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, c.Method, "https://"+c.Host+c.Path, strings.NewReader(c.Body))
		if err != nil {
			return 0, "", err
		}
		for _, h := range c.Headers {
			req.Header[h.Name] = append(req.Header[h.Name], h.Value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		return resp.StatusCode, read(resp.Body), nil
	}
	port := ""
	if u, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_S3")); err == nil {
		port = u.Port()
	}
	tableCase := func(name string) (int, string, error) {
		for _, c := range sigv4test.Cases(time.Now().UTC(), port) {
			if c.Name == name {
				return send(c)
			}
		}
		return 0, "", errors.New("the table has no case " + name)
	}
	steps := map[string]func() (int, string, error){
		"invoke": func() (int, string, error) {
			c := bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
				o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"))
			})
			out, err := c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("anthropic.claude-v2"), Body: []byte(`{"prompt":"hi"}`),
				ContentType: aws.String("application/json"), Accept: aws.String("application/json")})
			if err != nil {
				return 0, "", err
			}
			return 200, string(out.Body), nil
		},
		"put": func() (int, string, error) {
			_, err := s3c("us-east-1").PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: strings.NewReader(data)})
			return 200, "", err
		},
		"get": func() (int, string, error) {
			out, err := s3c("us-east-1").GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
			if err != nil {
				return 0, "", err
			}
			return 200, read(out.Body), nil
		},
		"presigned": func() (int, string, error) {
			req, err := s3.NewPresignClient(s3c("us-east-1")).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key}, s3.WithPresignExpires(5*time.Minute))
			if err != nil {
				return 0, "", err
			}
			resp, err := http.Get(req.URL)
			if err != nil {
				return 0, "", err
			}
			return resp.StatusCode, read(resp.Body), nil
		},
		// The signed aws-chunked uploads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD
		// and its -TRAILER form), which the SDK sends only over plain
		// HTTP, if at all: the shared table's requests (filter/sigv4test).
		"chunked":         func() (int, string, error) { return tableCase("s3 put, signed aws-chunked") },
		"chunked-trailer": func() (int, string, error) { return tableCase("s3 put, signed aws-chunked with a checksum trailer") },
		"other-region": func() (int, string, error) {
			out, err := s3c("eu-west-1").GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
			if err != nil {
				return 0, "", err
			}
			return 200, read(out.Body), nil
		},
	}
	if slices.Contains(os.Args[1:], "refusals") {
		for _, c := range tableRefusals(port) {
			status, body, err := send(c)
			r := stepResult{Step: "refusal " + c.Name, Status: status, Body: body}
			if err != nil {
				r.Body = err.Error()
			}
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
	}
	for _, name := range os.Args[1:] {
		f, ok := steps[name]
		if !ok {
			continue
		}
		status, body, err := f()
		r := stepResult{Step: name, OK: err == nil && status == 200, Status: status, Body: body}
		if err != nil {
			var re interface{ HTTPStatusCode() int }
			if errors.As(err, &re) {
				r.Status = re.HTTPStatusCode()
			}
			r.Body = err.Error()
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	return 0
}
