// Package envoyrun is `custodian envoy`: it runs Envoy from a rendered
// envoy.json and gives it the stop custodian serve has. Envoy exits at
// once on SIGTERM, dropping every request in flight, and drains only
// through its admin interface; so this process starts Envoy as its child
// and, on SIGTERM or SIGINT, drives the stop through envoy.json's admin
// socket (Stop).
//
// Invariant: this process makes no decision about traffic and reads no
// value; it moves signals and reads counters, and it drains no Envoy but
// its own child (each admin connection's peer pid is checked first). It
// writes nothing on stdout or stderr but its own start-up errors and one
// line when the admin socket does not answer at a stop; Envoy's output
// passes through untouched.
package envoyrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"jr2.dev/boundary/internal/cliflag"
	"jr2.dev/boundary/internal/hostlimits"
)

// Usage is `custodian envoy --help`.
const Usage = `usage: custodian envoy -- ENVOY -c DIR/envoy.json [ENVOY-ARG…]

Runs Envoy (the command after --) from a rendered envoy.json and stops it
as custodian serve stops: on SIGTERM or SIGINT new connections are refused
at once, requests in flight finish (each answer then closes its
connection), and Envoy exits once none is left or after 10 s, whichever
comes first. Envoy itself would exit at once on SIGTERM and cut them. The
stop goes through envoy.json's admin socket (each render names its own,
/tmp/jr2-custodian-admin-<id>.sock, mode 0600, in this container only). --drain-strategy immediate,
--drain-time-s 10 and --disable-hot-restart are added to Envoy's arguments
unless given (hot restart is off unless --restart-epoch or --base-id asks
for it: its shared memory would outlive Envoy).

The pod's start command (envoy/README.md):
  custodian envoy -- envoy -c /etc/jr2/custodian/config/envoy.json --concurrency 1 \
    --disable-hot-restart --log-format %v --log-path /dev/stdout --file-flush-interval-msec 1000 \
    --drain-strategy immediate --drain-time-s 10
`

// Main runs `custodian envoy` with args (the words after "envoy") and
// returns the exit code: Envoy's (0 after a stop), 1 when Envoy cannot be
// started or envoy.json has no admin socket, 2 for a usage error. The admin
// socket (a unix socket under hostlimits.AdminSocketDir, each render's
// own), which Envoy never removes, is removed before Envoy starts (when
// nothing answers on it) and after it exits.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := Flags()
	if ok, code := cliflag.Parse(fs, args, Usage, stdout, stderr); !ok {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "custodian envoy: no Envoy command: write it after --, such as -- envoy -c DIR/envoy.json\n%s", Usage)
		return 2
	}
	cfg := configPath(argv[1:])
	if cfg == "" {
		fmt.Fprintf(stderr, "custodian envoy: Envoy is given no config: add -c DIR/envoy.json (the file controlplane render wrote)\n%s", Usage)
		return 2
	}
	sock, err := AdminSocketOf(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "custodian envoy: %v\n", err)
		return 1
	}
	if err := removeStale(sock); err != nil {
		fmt.Fprintf(stderr, "custodian envoy: %v\n", err)
		return 1
	}
	cmd := exec.Command(argv[0], withDrainFlags(argv[1:])...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
	cmd.SysProcAttr = childAttr()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "custodian envoy: start %s: %v\n", argv[0], err)
		return 1
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-sigs:
		Stop(cmd.Process, exited, sock, hostlimits.StopGrace, stderr)
	}
	<-exited
	// Envoy leaves its socket behind; nothing answers on it now.
	_ = removeStale(sock)
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	return 1 // killed by a signal
}

// Flags is the flag set Main parses (none of its own: everything after --
// is Envoy's).
func Flags() *flag.FlagSet { return flag.NewFlagSet("custodian envoy", flag.ContinueOnError) }

// Stop drains Envoy through its admin socket and then ends it: at most
// grace after the stop began (plus 5 s for Envoy's own exit, then it is
// killed). exited closes when Envoy has exited. The steps:
//
//  1. POST /healthcheck/fail: the drain sequence starts on every listener
//     (drain_type DEFAULT); with --drain-strategy immediate each answer
//     from then on carries Connection: close.
//  2. POST /drain_listeners: every listener stops accepting at once, so a
//     new connection is refused, as custodian serve closes its listeners.
//  3. Every 50 ms, GET /stats: once no request is in flight on any
//     listener of the agent's (the sum of http.*.downstream_rq_active but
//     the admin's and the health listener's: an intercepted request, a
//     tunnel, a long poll; InFlight), or once grace (hostlimits.StopGrace)
//     is over, Envoy gets SIGTERM and what is still open is closed.
//
// Every connection to the socket is first checked to be served by p itself
// (its peer's pid): a path names whichever socket was bound there last, and
// an Envoy started later with the same admin path takes it over, so a
// drain sent without the check could stop another pod's Envoy. When the
// check fails or cannot be made, nothing is sent and p is stopped at once.
func Stop(p *os.Process, exited <-chan struct{}, sock string, grace time.Duration, stderr io.Writer) {
	deadline := time.Now().Add(grace)
	c := adminClient(sock, p.Pid)
	err := post(c, "/healthcheck/fail")
	if err == nil {
		err = post(c, "/drain_listeners")
	}
	var other *notOurs
	switch {
	case errors.As(err, &other):
		fmt.Fprintf(stderr, "custodian envoy: no drain: %v; Envoy is stopped now, cutting what is in flight\n", other)
	case err != nil:
		fmt.Fprintf(stderr, "custodian envoy: the drain did not start (%v); Envoy is stopped now\n", err)
	default:
		for time.Now().Before(deadline) {
			n, err := InFlight(c)
			if err != nil || n == 0 {
				break
			}
			select {
			case <-exited:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		p.Kill()
	}
}

// InFlight is the number of requests in flight on the agent's listeners:
// the sum of every http.<prefix>.downstream_rq_active but the admin's and
// the health listener's.
func InFlight(c *http.Client) (int, error) {
	resp, err := c.Get("http://admin/stats?filter=downstream_rq_active")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("/stats answered %d", resp.StatusCode)
	}
	return SumInFlight(resp.Body)
}

// SumInFlight reads /stats text lines "http.<prefix>.downstream_rq_active: N".
func SumInFlight(r io.Reader) (int, error) {
	sum := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok || !strings.HasPrefix(name, "http.") || !strings.HasSuffix(name, ".downstream_rq_active") {
			continue
		}
		prefix := strings.TrimSuffix(strings.TrimPrefix(name, "http."), ".downstream_rq_active")
		if prefix == "admin" || prefix == "health" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("/stats: %s is not a number", name)
		}
		sum += n
	}
	return sum, sc.Err()
}

// notOurs is a drain refused because the admin socket is not the Envoy's
// this process started.
type notOurs struct {
	sock      string
	want, got int
	why       error
}

func (e *notOurs) Error() string {
	if e.why != nil {
		return fmt.Sprintf("cannot tell whether %s is served by the Envoy this custodian envoy started (pid %d): %v", e.sock, e.want, e.why)
	}
	return fmt.Sprintf("%s is served by process %d, not by the Envoy this custodian envoy started (pid %d): another Envoy bound the same admin socket path; give each Envoy its own render (each names its own socket)", e.sock, e.got, e.want)
}

// adminClient talks to the admin socket only while it is served by the
// process pid: each new connection is checked before a byte is sent.
func adminClient(sock string, pid int) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			got, err := peerPID(c)
			if err != nil || got != pid {
				c.Close()
				return nil, &notOurs{sock: sock, want: pid, got: got, why: err}
			}
			return c, nil
		},
	}}
}

func post(c *http.Client, path string) error {
	resp, err := c.Post("http://admin"+path, "text/plain", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s answered %d", path, resp.StatusCode)
	}
	return nil
}

// configPath is the value of Envoy's -c or --config-path.
func configPath(args []string) string {
	for i, a := range args {
		for _, f := range []string{"-c", "--config-path"} {
			if a == f && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v
			}
		}
	}
	return ""
}

// withDrainFlags adds --drain-strategy immediate and --drain-time-s
// (StopGrace) unless args set them: a gradual drain over Envoy's default
// 600 s would leave most connections open through the whole grace. It
// adds --disable-hot-restart unless args ask for hot restart
// (--restart-epoch, --base-id or --use-dynamic-base-id): this stop is not
// hot restart's, and hot restart's shared memory region
// (/dev/shm/envoy_shared_memory_N) outlives Envoy and blocks the next
// Envoy with the same base id.
func withDrainFlags(args []string) []string {
	has := func(flags ...string) bool {
		for _, a := range args {
			for _, f := range flags {
				if a == f || strings.HasPrefix(a, f+"=") {
					return true
				}
			}
		}
		return false
	}
	out := append([]string(nil), args...)
	if !has("--drain-strategy") {
		out = append(out, "--drain-strategy", "immediate")
	}
	if !has("--drain-time-s") {
		out = append(out, "--drain-time-s", strconv.Itoa(int(hostlimits.StopGrace/time.Second)))
	}
	if !has("--disable-hot-restart", "--restart-epoch", "--base-id", "--use-dynamic-base-id") {
		out = append(out, "--disable-hot-restart")
	}
	return out
}

// AdminSocketOf reads envoy.json's admin socket path (admin.address.pipe.path).
func AdminSocketOf(envoyJSON string) (string, error) {
	b, err := os.ReadFile(envoyJSON)
	if err != nil {
		return "", fmt.Errorf("%w; give Envoy the envoy.json controlplane render wrote", err)
	}
	var bs struct {
		Admin struct {
			Address struct {
				Pipe struct {
					Path string `json:"path"`
				} `json:"pipe"`
			} `json:"address"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(b, &bs); err != nil {
		return "", fmt.Errorf("%s is not JSON (%v); give Envoy the envoy.json controlplane render wrote", envoyJSON, err)
	}
	if bs.Admin.Address.Pipe.Path == "" {
		return "", fmt.Errorf("%s has no admin socket (admin.address.pipe.path), so its stop cannot be drained; render it again with this release's controlplane render", envoyJSON)
	}
	return bs.Admin.Address.Pipe.Path, nil
}

// removeStale removes a socket left at path by an Envoy that has exited
// (Envoy never removes its admin socket); a
// socket something still answers on, or anything else at path, is an
// error.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s (the admin socket envoy.json names) is not a socket; remove it or render again", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("%s (the admin socket envoy.json names) is another running Envoy's; stop that one first", path)
	}
	return os.Remove(path)
}
