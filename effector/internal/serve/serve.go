// Package serve is `effector` with no sub-command: it reads the
// configuration once (the secrets directory then follows its rotations,
// package rotation), listens on 0.0.0.0:$JR2_EFFECTOR_PORT, says ready, and
// on SIGTERM drains — new starts answer 503 while effects in flight finish
// and their outcomes are read, for at most JR2_EFFECTOR_DRAIN_SECONDS.
//
// Invariant: a start that cannot serve ends the process with one
// `action=exit reason=<word>` line on stdout and the reason, which names the
// env variable or field to fix and never a value or a path, on stderr and
// in the container's termination message (/dev/termination-log, where it
// is writable). A Sandbox Effector whose effector.json holds commands never
// says ready on a node whose Landlock probe failed.
//
// Invariant: what net/http would print itself (its server's ErrorLog, the
// standard logger) is one `jr2.effector action=error listener=effector
// reason=<word>` line on stdout (logline.ErrorLog, logline.CaptureStdLog),
// with nothing the peer sent.
package serve

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/commandkind"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/httpkind"
	"jr2.dev/boundary/effector/internal/pushkind"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/rotation"
	"jr2.dev/boundary/effector/internal/server"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/landlock"
	"jr2.dev/boundary/internal/listenerr"
	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/mode"
	"jr2.dev/boundary/internal/valuedir"
)

// Main serves until SIGTERM (or SIGINT) and a drain; it returns the exit
// code.
func Main(getenv func(string) string, stdout, stderr io.Writer) int {
	started := time.Now()
	log := logline.NewWriter(stdout, logline.Effector)
	termination := getenv(config.EnvTestTerminationLog)
	if termination == "" {
		termination = TerminationLog
	}
	exit := func(word string, err error) int {
		fmt.Fprintf(stderr, "effector: %v\n", err)
		writeTermination(termination, err.Error())
		log.Log("action", "exit", "reason", word)
		return 1
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return exit("config", err)
	}
	_, probe := landlock.Probe()
	if err := landlockGate(cfg.Commands, cfg.Node, probe); err != nil {
		return exit("landlock", err)
	}
	shared, err := newShared(cfg.Commands || len(cfg.Pushes) > 0)
	if err != nil {
		return exit("subreaper", err)
	}
	// The secrets follow their directory: an effect reads a value when it
	// starts, and every answer is scrubbed for what is held then.
	secrets, err := rotation.New(rotation.Options{Dir: cfg.SecretsDir, Values: values(cfg), Fixed: Fixed(cfg), Log: log.Log})
	if err != nil {
		return exit("config", err)
	}
	receipts, err := openReceipts(cfg, secrets.Scrubber, stderr)
	if err != nil {
		return exit("config", err)
	}
	if receipts != nil {
		defer receipts.Close() // after a clean drain it is sealed first
	}
	if shared.Mode, err = mode.New(cfg.Mode, config.ModeNames, recorder(receipts)); err != nil {
		return exit("config", err)
	}
	shared.Receipts = recorder(receipts)
	shared.Values = secrets.Value
	srv, err := server.New(server.Options{
		Replica: cfg.Replica,
		Key:     cfg.Key,
		Started: started,
		Kinds:   Kinds(cfg, probe, shared),
		Held:    secrets.Held(),
		Log:     stdout,
		Hold:    cfg.Hold,
		Expire:  cfg.Expire,

		Receipts: shared.Receipts,
	})
	if err != nil {
		return exit("config", err)
	}
	defer srv.Close()
	if cfg.SecretsDir != "" {
		stopWatch := secrets.Watch(srv.SetHeld, valuedir.WatchOptions{})
		defer stopWatch()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(cfg.Port)))
	if err != nil {
		return exit("listen", listenerr.Wrap(fmt.Errorf("cannot listen on port %d: %w", cfg.Port, errors.Unwrap(err)), "the Effector's listener", config.EnvPort+"=PORT", "another Effector"))
	}
	hs := NewHTTPServer(srv, log)
	logline.CaptureStdLog(log)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	logline.NewWriter(stdout, logline.Effector+" ready").Log(
		"placement", cfg.Placement, "replica", cfg.Replica.Name,
		"secrets", strings.Join(cfg.SecretNames(), ","), "targets", strconv.Itoa(len(cfg.Targets)))

	select {
	case err := <-served:
		return exit("serve", err)
	case <-sigs:
	}
	srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Drain)
	srv.WaitDrained(ctx)
	cancel()
	shut, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = hs.Shutdown(shut)
	if receipts != nil {
		// In replay, run-end lists the recorded effects no start asked for.
		if _, err := receipts.Append(bundle.KindRunEnd, runEnd{Unasked: shared.Mode.Unasked()}); err != nil {
			fmt.Fprintf(stderr, "effector: the receipts' run-end could not be written: %v\n", err)
		}
		if err := receipts.Seal(); err != nil {
			fmt.Fprintf(stderr, "effector: the receipts could not be sealed: %v\n", err)
		}
	}
	return 0
}

// openReceipts creates JR2_EFFECTOR_RECEIPTS as a bundle whose seal is
// signed by a key made here and held only in memory; its public half is
// named in the first record and printed once on stderr. nil when unset.
func openReceipts(cfg *config.Config, held func() *scrub.Scrubber, stderr io.Writer) (*bundle.Writer, error) {
	if cfg.Receipts == "" {
		return nil, nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%s: the receipts' key: %w", config.EnvReceipts, err)
	}
	w, err := bundle.Create(cfg.Receipts, bundle.Options{Key: priv,
		ContainsSecret: func(line []byte) bool { return !bytes.Equal(held().Bytes(line), line) }})
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s %s exists, and receipts are never overwritten: name another file, or move it away", config.EnvReceipts, cfg.Receipts)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvReceipts, err)
	}
	m := cfg.Mode.Mode
	if m == "" {
		m = mode.Live
	}
	key := bundle.FormatKey(pub)
	if _, err := w.Append(bundle.KindRunStart, map[string]string{"run": cfg.Replica.Name, "mode": m, "pubkey": key}); err != nil {
		w.Close()
		return nil, fmt.Errorf("%s: %w", config.EnvReceipts, err)
	}
	fmt.Fprintf(stderr, "effector: the receipts' key is %s (custodian verify --pubkey KEY %s proves they are this Effector's)\n", key, cfg.Receipts)
	return w, nil
}

// runEnd is the receipts' closing record, written on a clean shutdown
// before the seal.
type runEnd struct {
	Unasked []mode.Effect `json:"unasked,omitempty"`
}

// recorder is w as a Recorder, nil when there is none.
func recorder(w *bundle.Writer) bundle.Recorder {
	if w == nil {
		return nil
	}
	return w
}

// TerminationLog is where Kubernetes reads a container's termination
// message. A start that cannot serve writes its reason there when the file
// exists and is writable; JR2_EFFECTOR_TEST_TERMINATION_LOG replaces it in
// tests.
const TerminationLog = "/dev/termination-log"

// writeTermination writes reason to path if it is there and writable; it
// never creates it.
func writeTermination(path, reason string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString(reason + "\n")
	_ = f.Close()
}

// Shared is what the kinds that start processes share: the Effector's one
// Tracker and class lock, and its own binary (run as keep and confine).
type Shared struct {
	Tracker *reap.Tracker
	Lock    *classlock.Lock
	Self    string
	// Receipts and Mode are the http kind's (and the server's): the
	// receipts file, and the mode layer; nil for none and live.
	Receipts bundle.Recorder
	Mode     *mode.Layer
	// Values are the held secrets' values as they rotate
	// (rotation.Secrets.Value); nil is the values read at start.
	Values func(name string) ([]byte, bool)
}

// newShared makes this process the subreaper of its descendants (ADR-0068,
// rule 1) and finds its own binary. With commands or pushes, either failing
// ends the start; without, no process is ever started and a failure is left
// unused.
func newShared(commands bool) (Shared, error) {
	sh := Shared{Tracker: reap.NewTracker(), Lock: &classlock.Lock{}}
	err := reap.SetChildSubreaper()
	if err == nil {
		sh.Self, err = os.Executable()
	}
	if err != nil && commands {
		return sh, fmt.Errorf("effector.json holds commands or pushes, which need the subreaper and the Effector's own binary: %w", err)
	}
	return sh, nil
}

// landlockGate refuses the start of an Effector whose effector.json holds a
// credentialed command on a node whose Landlock probe failed: it must not
// become ready (ADR-0068). Without commands, the probe's failure only makes
// a command start answer 400 with the same reason.
func landlockGate(commands bool, node string, probe error) error {
	if commands && probe != nil {
		return errors.New(landlock.Unavailable(node, probe))
	}
	return nil
}

// Kinds wires the kinds this build runs.
func Kinds(cfg *config.Config, probe error, sh Shared) map[string]effect.Kind {
	vals := sh.Values
	if vals == nil {
		vals = cfg.Secret
	}
	targets := make([]httpkind.Target, len(cfg.Targets))
	for i, t := range cfg.Targets {
		targets[i] = httpkind.Target(t)
	}
	return map[string]effect.Kind{
		wire.KindHTTP: httpkind.New(httpkind.Options{
			Targets: targets, Values: vals, Roots: cfg.Roots, Work: cfg.Work,
			Receipts: sh.Receipts, Mode: sh.Mode,
		}),
		wire.KindCommand: commandkind.New(commandkind.Options{
			Commands: cfg.Commands, Node: cfg.Node, Probe: probe,
			Values: vals, SecretsDir: cfg.SecretsDir, Work: cfg.Work, Scratch: cfg.Scratch, Deny: cfg.OwnPaths(),
			Self: sh.Self, Tracker: sh.Tracker, Lock: sh.Lock,
		}),
		wire.KindPush: pushkind.New(pushkind.Options{
			Pushes: cfg.Pushes, Entries: cfg.GitEntries, Work: cfg.Work, Scratch: cfg.Scratch, Repos: cfg.Repos, CAFile: cfg.CAFile,
			Deny: cfg.OwnPaths(), Node: cfg.Node, Probe: probe, Self: sh.Self, Tracker: sh.Tracker, Lock: sh.Lock,
		}),
	}
}

// Held is what every answer is scrubbed for: each held secret (the push
// credentials' secret files among them), and the placement key as its raw bytes and as the hex its file holds.
func Held(cfg *config.Config) []scrub.Secret {
	held := make([]scrub.Secret, 0, len(cfg.Secrets)+2)
	for _, s := range cfg.Secrets {
		held = append(held, scrub.Secret{Name: s.Name, Value: s.Value})
	}
	return append(held, Fixed(cfg)...)
}

// values are the held secrets' values as read at start, by name.
func values(cfg *config.Config) map[string][]byte {
	m := make(map[string][]byte, len(cfg.Secrets))
	for _, s := range cfg.Secrets {
		m[s.Name] = s.Value
	}
	return m
}

// Fixed is what answers are scrubbed for that does not rotate with the
// secrets directory: the push credentials' secret files (read once, at
// start) and the placement key as its raw bytes and as its file's hex.
func Fixed(cfg *config.Config) []scrub.Secret {
	var held []scrub.Secret
	for _, e := range cfg.GitEntries {
		for _, s := range e.Held() {
			held = append(held, scrub.Secret{Name: s.Name, Value: s.Value})
		}
	}
	return append(held,
		scrub.Secret{Name: config.KeyLabel, Value: cfg.Key},
		scrub.Secret{Name: config.KeyLabel, Value: []byte(hex.EncodeToString(cfg.Key))})
}

// NewHTTPServer is the Effector's one http.Server around h. What net/http
// would print itself — a handshake error, a panic, an accept error — is
// one contract line with a fixed word (logline.ErrorLog, the capture every
// host takes): `jr2.effector action=error listener=effector reason=<word>`,
// with nothing the peer sent.
func NewHTTPServer(h http.Handler, log *logline.Writer) *http.Server {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          logline.ErrorLog(log, "effector"),
		// "OPTIONS *" goes to the guard like every request: without this,
		// Go's server answers it 200 itself, unsigned, past the 401 rule.
		DisableGeneralOptionsHandler: true,
	}
	hs.SetKeepAlivesEnabled(true)
	return hs
}
