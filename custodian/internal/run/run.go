// Package run is `custodian run`: it wires the policy, the broker, the run
// CA, the launcher's namespaces, the mediator and the bundle into one
// contained run of a command, and returns the command's exit code.
//
//	custodian run --policy POLICY.toml --bundle OUT.jsonl [--mode MODE …] -- CMD [ARG…]
//
// Invariant: the command runs only contained (launcher), with stand-ins
// only, an AWS key's parts and an OAuth secret's token included (broker),
// and only after the bundle holds run-start, policy and env; every attempt
// it makes is recorded by the mediator before it is decided (the runner's
// own requests to an OAuth token endpoint are not the command's, and in no
// record); when it ends, run-end and the seal close the bundle. A run that
// cannot start contained does not start at all, and says why, and a run
// refused before its command starts leaves no bundle ("no bundle was
// written"); a bundle is never overwritten. A held value, a minted token
// too, is never the reason a record is missing, nor reaches the child
// through its argv: the runner's own strings are recorded scrubbed
// (runner.scrub) and the child's argv carries stand-ins (runner.argv).
//
// Run lists the steps in order; docs/run.md ("Containment, in order") is
// the contract. A runner killed outright (SIGKILL) leaves a bundle that
// verifies as TRUNCATED with every record it wrote; the child dies with it
// (parent death signal) and the next run sweeps the namespaces and what the
// command left running in them.
package run

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/custodian/internal/mediator"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/mode"
)

// Modes are the modes a run knows (internal/mode): live, the command's
// effects happen; read-only, only reads pass; replay, answered from a
// recorded bundle and nothing sent; faults, sent with seeded faults;
// preflight, nothing sent and every effect planned.
var Modes = []string{mode.Live, mode.ReadOnly, mode.Replay, mode.Faults, mode.Preflight}

// modeNames are the flags of a mode's settings, for its errors.
var modeNames = mode.Names{Mode: "--mode", From: "--from", Seed: "--seed", Faults: "--faults", Timing: "--timing"}

// ProxyPort is the mediator's explicit proxy port.
const ProxyPort = 8080

// fixedPorts are caught whatever the policy: HTTP, HTTPS and the proxy.
var fixedPorts = []uint16{80, 443, ProxyPort}

// Options are one run.
type Options struct {
	Policy string   // the policy file
	Bundle string   // the bundle to create; it must not exist
	Mode   string   // "" is live
	From   string   // --from: the recorded bundle replay (and preflight) answer from
	Timing string   // --timing: replay's pace, fast or recorded
	Seed   uint64   // --seed: faults
	Faults string   // --faults: faults' SPEC
	Argv   []string // the command
	// Environ is the runner's environment: the secrets' values are read
	// from it, and the child's environment built from it. nil is
	// os.Environ().
	Environ []string
	Stdin   io.Reader
	Stdout  io.Writer
	// Stderr is the child's, and the mediator's refuse and intercept
	// lines; Run serialises the two unless it is an *os.File.
	Stderr io.Writer
	// Resolve, when set, gives the address the mediator dials for an
	// allowed host:port (tests); nil is the system resolver.
	Resolve func(host string, port uint16) (string, error)
	// UpstreamRoots verify the upstreams' TLS; nil is the system roots.
	UpstreamRoots *x509.CertPool
	// LocalUpstreams lets the mediator dial loopback and the other
	// addresses the dial guard refuses (tests whose upstream is on this
	// machine). The CLI never sets it.
	LocalUpstreams bool
}

// Errors a run can end with before its command ran.
var (
	ErrUsage = errors.New("custodian run: usage")
)

// Run runs o's command contained and returns its exit code. The error is
// for a run whose command did not run, or whose record could not be
// completed; with a *launcher.ChildError the code is the failed step's.
//
// A run refused before its command starts writes no bundle: every
// refusal the runner can make up front (the policy, a read or write path
// that does not exist, the bundle's place, a secret's value, a bundle that
// exists) comes before the bundle is created, and a refusal after it (the
// mode's settings, the namespaces, the mediator, the contained child's
// setup: nothing of the command ran) removes the file it created. The
// error says "no bundle was written", so the same command line runs again
// once the cause is fixed. Once the command has started, the bundle is the
// run's record, sealed when it ends; a bundle is never overwritten, and the
// error for one that exists names the fix (another --bundle, or moving it
// away).
//
// # Order
//
//  1. the policy is loaded (its hash is of the bytes on disk), the mode
//     checked (one of Modes), every read and write path checked to exist,
//     the bundle refused where a read or write path would expose it;
//  2. the secrets' values (an AWS key's and an OAuth grant's parts:
//     broker.New) are read from the runner's environment and the engine
//     built; a missing or unusable value refuses the run, naming it; a
//     runner that is not root, or lacks CAP_SYS_ADMIN or CAP_NET_ADMIN, is
//     refused, saying so (no key is announced, no bundle written);
//  3. the bundle is created (it must not exist), the mode's settings
//     checked, the bundle's key announced on stderr, run-start and policy
//     recorded, and runs left by a killed runner swept;
//  4. the namespaces are made; the mediator listens on its address for DNS
//     (UDP and TCP 53), catches TCP 80, 443, 8080 and every port of
//     allow_hosts at any address, and starts minting the OAuth secrets'
//     tokens; the run CA's certificate is written to a directory the child
//     may read;
//  5. env is recorded (names only), the command runs contained; SIGINT,
//     SIGTERM, SIGHUP and SIGQUIT reach it;
//  6. when it has ended: what it left running is killed, the mediator
//     stops, the namespaces and the CA file are removed, run-end (its exit
//     code) is recorded and the bundle sealed. When a step after the
//     bundle's creation failed before the command started, the bundle is
//     closed and removed instead.
func Run(ctx context.Context, o Options) (int, error) {
	if len(o.Argv) == 0 || o.Argv[0] == "" {
		return 2, fmt.Errorf("%w: no command; write it after --", ErrUsage)
	}
	modeName := o.Mode
	if modeName == "" {
		modeName = mode.Live
	}
	if !contains(Modes, modeName) {
		return 2, fmt.Errorf("%w: --mode %q: the modes are: %v", ErrUsage, o.Mode, Modes)
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	for _, w := range []*io.Writer{&o.Stdout, &o.Stderr} {
		if *w == nil {
			*w = io.Discard
		}
	}
	if _, isFile := o.Stderr.(*os.File); !isFile {
		// A file is written by the kernel one write at a time, and the
		// child keeps it as its own (a terminal stays a terminal).
		o.Stderr = &lockedWriter{w: o.Stderr}
	}
	pol, err := policy.Load(o.Policy)
	if err != nil {
		return refused(err)
	}
	bundlePath, err := filepath.Abs(o.Bundle)
	if err != nil || o.Bundle == "" {
		return 2, fmt.Errorf("%w: --bundle: name the file to write the record to", ErrUsage)
	}
	if err := pathsExist(pol); err != nil {
		return refused(err)
	}
	if err := pol.Exposes(bundlePath); err != nil {
		return refused(fmt.Errorf("policy: %w", err))
	}
	ports, err := caughtPorts(pol)
	if err != nil {
		return refused(err)
	}
	br, err := broker.New(pol, o.Environ)
	if err != nil {
		return refused(err)
	}
	if err := privileged(); err != nil {
		return refused(err)
	}
	id := runID()
	ca, err := runca.New("jr2 run " + id)
	if err != nil {
		return refused(err)
	}
	// The seal's key lives in this process's memory only; its public half
	// is printed once, before the command starts, and named in run-start.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return refused(fmt.Errorf("custodian run: the bundle's key: %w", err))
	}
	w, err := bundle.Create(bundlePath, bundle.Options{ContainsSecret: br.Contains, Key: priv})
	if errors.Is(err, fs.ErrExist) {
		return 1, fmt.Errorf("--bundle %s exists, and a bundle is never overwritten: pass another --bundle, or move it away (custodian verify %s says what it holds)", o.Bundle, o.Bundle)
	}
	if err != nil {
		return refused(err)
	}
	layer, err := mode.New(mode.Config{Mode: modeName, From: o.From, Timing: o.Timing, Seed: o.Seed, Faults: o.Faults}, modeNames, w)
	if err != nil {
		w.Close()
		os.Remove(bundlePath)
		return 2, fmt.Errorf("%w: %v"+notStarted, ErrUsage, err)
	}
	r := &runner{o: o, pol: pol, br: br, ca: ca, w: w, ports: ports, layer: layer, pubkey: bundle.FormatKey(pub)}
	fmt.Fprintf(o.Stderr, "custodian run: the bundle's key is %s (custodian verify --pubkey KEY %s proves the bundle is this run's)\n", r.pubkey, o.Bundle)
	code, runErr := r.run(ctx, id, modeName, bundlePath)
	if !r.started {
		// Nothing of the command ran: the refusal is stderr's, and the
		// same command line can run again once its cause is fixed.
		w.Close()
		if err := os.Remove(bundlePath); err != nil {
			return code, errors.Join(runErr, fmt.Errorf("the command did not start, but its bundle could not be removed: %w", err))
		}
		return code, fmt.Errorf("%w"+notStarted, runErr)
	}
	end := runEnd{Exit: code, Error: errText(runErr), Unasked: layer.Unasked()}
	end.Scrubbed = r.scrub(&end.Error)
	if _, err := r.appendOr(bundle.KindRunEnd, end, runEnd{Exit: code, Error: withheld, Scrubbed: true}); err != nil {
		w.Close()
		return code, errors.Join(runErr, err)
	}
	if err := w.Seal(); err != nil {
		return code, errors.Join(runErr, err)
	}
	return code, runErr
}

// notStarted ends every refusal that comes before the command starts:
// nothing ran, nothing was recorded, and the same line can run again
// once the cause is fixed.
const notStarted = "; the command did not start, and no bundle was written"

// refused is a refusal before the bundle exists: exit 1 and the cause,
// with notStarted.
func refused(err error) (int, error) { return 1, fmt.Errorf("%w"+notStarted, err) }

// The records' fields. Every string the runner chose (argv, the
// directory, the policy's path, the variables' names, an error's text) is
// recorded with each form of a held value replaced by its label, and
// "scrubbed": true on the record when one was; see runner.scrub.

type runStart struct {
	Run      string   `json:"run"`
	Mode     string   `json:"mode"`
	Pubkey   string   `json:"pubkey"` // the key that signs the seal (bundle.FormatKey)
	Argv     []string `json:"argv"`
	Dir      string   `json:"dir"`
	Scrubbed bool     `json:"scrubbed,omitempty"`
}

type policyRecord struct {
	Hash     string `json:"hash"`
	Path     string `json:"path"`
	Scrubbed bool   `json:"scrubbed,omitempty"`
}

type envRecord struct {
	Names    []string `json:"names"`
	StandIns []string `json:"stand_ins"`
	Scrubbed bool     `json:"scrubbed,omitempty"`
}

type runEnd struct {
	Exit  int    `json:"exit"`
	Error string `json:"error,omitempty"`
	// Unasked are, in replay, the recorded effects the run never asked
	// for, in recorded order.
	Unasked  []mode.Effect `json:"unasked,omitempty"`
	Scrubbed bool          `json:"scrubbed,omitempty"`
}

// withheld stands for a field the bundle writer's guard still refused
// once scrubbed (see runner.appendOr).
const withheld = "[withheld]"

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runner is one run between the bundle's creation and run-end.
type runner struct {
	o     Options
	pol   *policy.Policy
	br    *broker.Broker
	ca    *runca.CA
	w     *bundle.Writer
	ports []uint16
	layer *mode.Layer
	// pubkey is the bundle's public key, as run-start names it.
	pubkey string
	// started is set once the command has been executed: from then on
	// the bundle is the run's record, whatever happens.
	started bool
}

func (r *runner) run(ctx context.Context, id, modeName, bundlePath string) (int, error) {
	dir, err := os.Getwd()
	if err != nil {
		dir = "/"
	}
	policyPath, _ := filepath.Abs(r.o.Policy)
	argv, start := r.argv(id, modeName, dir)
	start.Pubkey = r.pubkey
	if _, err := r.appendOr(bundle.KindRunStart, start, runStart{Run: id, Mode: modeName, Pubkey: r.pubkey, Argv: []string{withheld}, Dir: withheld, Scrubbed: true}); err != nil {
		return 1, err
	}
	pr := policyRecord{Hash: r.pol.Hash, Path: policyPath}
	pr.Scrubbed = r.scrub(&pr.Path)
	if _, err := r.appendOr(bundle.KindPolicy, pr, policyRecord{Hash: r.pol.Hash, Path: withheld, Scrubbed: true}); err != nil {
		return 1, err
	}
	if _, err := launcher.Sweep(); err != nil {
		fmt.Fprintf(r.o.Stderr, "custodian run: a run a killed runner left could not be swept: %v\n", err)
	}
	n, err := launcher.NewNetwork()
	if err != nil {
		return 1, err
	}
	defer n.Close()
	m, err := r.mediate(n)
	if err != nil {
		return 1, err
	}
	defer m.Close()                  // again after the explicit Close below: a no-op
	caDir, err := launcher.TempDir() // a killed runner's is removed by the next run's sweep
	if err != nil {
		return 1, fmt.Errorf("custodian run: %w", err)
	}
	defer os.RemoveAll(caDir)
	caFile := filepath.Join(caDir, "ca.pem")
	if err := os.Chmod(caDir, 0o755); err != nil {
		return 1, fmt.Errorf("custodian run: %w", err)
	}
	if err := os.WriteFile(caFile, r.ca.PEM(), 0o644); err != nil {
		return 1, fmt.Errorf("custodian run: %w", err)
	}
	proxy := "http://" + net.JoinHostPort(n.Mediator.String(), fmt.Sprint(ProxyPort))
	env, standIns := r.br.ChildEnv(r.o.Environ, proxy, caFile)
	er := envRecord{Names: broker.Names(env), StandIns: standIns}
	for i := range er.Names {
		er.Scrubbed = r.scrub(&er.Names[i]) || er.Scrubbed
	}
	if _, err := r.appendOr(bundle.KindEnv, er, envRecord{Names: []string{withheld}, StandIns: standIns, Scrubbed: true}); err != nil {
		return 1, err
	}
	if err := r.w.Sync(); err != nil {
		return 1, err
	}
	code, err := n.Run(ctx, launcher.Spec{
		Argv:       argv,
		Env:        env,
		Dir:        dir,
		ReadPaths:  append(append([]string(nil), r.pol.ReadPaths...), caDir),
		WritePaths: r.pol.WritePaths,
		Hidden:     []string{bundlePath},
		Stdin:      r.o.Stdin,
		Stdout:     r.o.Stdout,
		Stderr:     r.o.Stderr,
	})
	m.Close()
	var ce *launcher.ChildError
	if errors.As(err, &ce) {
		return ce.Code, err
	}
	// Run returns -1 only when the command could not be started; a
	// command that ran has its status or 128 plus a signal.
	r.started = err == nil || code >= 0
	if err != nil {
		return 1, err
	}
	return code, nil
}

// scrub replaces, in *s, every form of every held value by its label (the
// engine's scrubber, the one the bundle writer's guard asks) and reports
// whether there was one.
//
// Each string the runner chose (argv, the directory, the policy's path,
// the child's variable names, an error's text) is recorded so, the record
// marked "scrubbed": true; the child gets its argv with each such form
// replaced by the secret's stand-in instead (runner.argv), and the run
// goes on. Should the guard still refuse a scrubbed line, the record is
// written with "[withheld]" in place of the runner's text (runner.appendOr):
// the guard stays the last line of defence, never a hole in the record.
func (r *runner) scrub(s *string) bool {
	out := r.br.Engine().Scrubber().String(*s) // the newest: a minted token too
	if out == *s {
		return false
	}
	*s = out
	return true
}

// argv returns the command as the child gets it, each form of a held value
// in a word replaced by the secret's stand-in (the child holds stand-ins
// only), and the run-start record, which shows the value's label instead.
// In a word that held a form, text that already read as a label becomes
// the stand-in too.
func (r *runner) argv(id, modeName, dir string) ([]string, runStart) {
	rec := runStart{Run: id, Mode: modeName, Argv: append([]string(nil), r.o.Argv...), Dir: dir}
	child := append([]string(nil), r.o.Argv...)
	for i := range rec.Argv {
		if !r.scrub(&rec.Argv[i]) {
			continue
		}
		rec.Scrubbed = true
		child[i] = rec.Argv[i]
		for _, name := range r.br.Engine().Scrubber().Names() {
			child[i] = strings.ReplaceAll(child[i], "[secret:"+name+"]", r.pol.StandIn(name))
		}
	}
	rec.Scrubbed = r.scrub(&rec.Dir) || rec.Scrubbed
	return child, rec
}

// appendOr appends the record fields, scrubbed by the caller; when the
// bundle writer's guard still refuses its line (a form the JSON encoding
// of the scrubbed text made whole), it appends fallback, which carries no
// text the runner chose. The guard stays the last line of defence, and is
// never the reason a record is missing.
func (r *runner) appendOr(kind string, fields, fallback any) (uint64, error) {
	seq, err := r.w.Append(kind, fields)
	if errors.Is(err, bundle.ErrSecret) {
		return r.w.Append(kind, fallback)
	}
	return seq, err
}

// mediate opens the mediator's listeners in n and starts it.
func (r *runner) mediate(n *launcher.Network) (*mediator.Mediator, error) {
	m, err := mediator.New(mediator.Options{
		Policy:  r.pol,
		Broker:  r.br,
		Record:  r.w,
		CA:      r.ca,
		Addr:    n.Mediator,
		Log:     r.o.Stderr,
		Resolve: r.o.Resolve,
		Roots:   r.o.UpstreamRoots,

		LocalUpstreams: r.o.LocalUpstreams,
		Mode:           r.layer,
	})
	if err != nil {
		return nil, err
	}
	var l mediator.Listeners
	var opened []io.Closer
	fail := func(err error) (*mediator.Mediator, error) {
		for _, c := range opened {
			c.Close()
		}
		return nil, err
	}
	if l.DNS, err = n.ListenUDP(53); err != nil {
		return fail(err)
	}
	opened = append(opened, l.DNS)
	if l.DNSTCP, err = n.ListenTCP(53); err != nil {
		return fail(err)
	}
	opened = append(opened, l.DNSTCP)
	for _, p := range r.ports {
		ln, err := n.CatchTCP(int(p))
		if err != nil {
			return fail(err)
		}
		opened = append(opened, ln)
		l.TCP = append(l.TCP, mediator.Caught{Listener: ln})
	}
	m.Serve(l)
	return m, nil
}

// pathsExist refuses a policy whose read or write path does not exist on
// this machine (the launcher would refuse it once the namespaces are made;
// here it comes before the bundle is created).
func pathsExist(pol *policy.Policy) error {
	for _, l := range []struct {
		key   string
		paths []string
	}{{"read_paths", pol.ReadPaths}, {"write_paths", pol.WritePaths}} {
		for i, p := range l.paths {
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("policy: %s[%d]: %q: %v; create it, or take it out of the policy", l.key, i, p, errors.Unwrap(err))
			}
		}
	}
	return nil
}

// caughtPorts are the fixed ports and every port of allow_hosts, sorted.
// Port 53 is the mediator's DNS and cannot be an allowed host's.
func caughtPorts(pol *policy.Policy) ([]uint16, error) {
	set := map[uint16]bool{}
	for _, p := range fixedPorts {
		set[p] = true
	}
	for i, h := range pol.AllowHosts {
		if h.Port == 53 {
			return nil, fmt.Errorf("policy: allow_hosts[%d]: %s: port 53 is the mediator's DNS in a contained run; the child cannot reach another resolver", i, h)
		}
		set[h.Port] = true
	}
	out := make([]uint16, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// lockedWriter serialises writes: the child's stderr is copied by one
// goroutine while the mediator logs from others.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
