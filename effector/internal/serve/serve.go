// Package serve is `effector` with no sub-command: it reads the
// configuration once, listens on 0.0.0.0:$JR2_EFFECTOR_PORT, says ready, and
// on SIGTERM drains — new starts answer 503 while effects in flight finish
// and their outcomes are read, for at most JR2_EFFECTOR_DRAIN_SECONDS.
//
// Invariant: a start that cannot serve ends the process with one
// `action=exit reason=<word>` line on stdout and the reason, which names the
// env variable or field to fix and never a value or a path, on stderr.
package serve

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"jr2.dev/boundary/effector/internal/commandkind"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/httpkind"
	"jr2.dev/boundary/effector/internal/server"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/logline"
)

// Main serves until SIGTERM (or SIGINT) and a drain; it returns the exit
// code.
func Main(getenv func(string) string, stdout, stderr io.Writer) int {
	started := time.Now()
	log := logline.NewWriter(stdout, logline.Effector)
	exit := func(word string, err error) int {
		fmt.Fprintf(stderr, "effector: %v\n", err)
		log.Log("action", "exit", "reason", word)
		return 1
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return exit("config", err)
	}
	_, probe := commandkind.Probe()
	if err := landlockGate(cfg.Commands, cfg.Node, probe); err != nil {
		return exit("landlock", err)
	}
	srv, err := server.New(server.Options{
		Replica: cfg.Replica,
		Key:     cfg.Key,
		Started: started,
		Kinds:   Kinds(cfg, probe),
		Held:    Held(cfg),
		Log:     stdout,
		Hold:    cfg.Hold,
		Expire:  cfg.Expire,
	})
	if err != nil {
		return exit("config", err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(cfg.Port)))
	if err != nil {
		return exit("listen", fmt.Errorf("%s: cannot listen on port %d: %w", config.EnvPort, cfg.Port, errors.Unwrap(err)))
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	hs.SetKeepAlivesEnabled(true)

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
	return 0
}

// landlockGate refuses the start of an Effector whose effector.json holds a
// credentialed command on a node whose Landlock probe failed: it must not
// become ready (ADR-0068). Without commands, the probe's failure only makes
// a command start answer 400 with the same reason.
func landlockGate(commands bool, node string, probe error) error {
	if commands && probe != nil {
		return errors.New(commandkind.Unavailable(node, probe))
	}
	return nil
}

// Kinds wires the kinds this build runs.
func Kinds(cfg *config.Config, probe error) map[string]effect.Kind {
	targets := make([]httpkind.Target, len(cfg.Targets))
	for i, t := range cfg.Targets {
		targets[i] = httpkind.Target(t)
	}
	return map[string]effect.Kind{
		wire.KindHTTP: httpkind.New(httpkind.Options{
			Targets: targets, Values: cfg.Secret, Roots: cfg.Roots, Work: cfg.Work,
		}),
		wire.KindCommand: commandkind.New(cfg.Commands, cfg.Node, probe),
	}
}

// Held is what every answer is scrubbed for: each held secret, and the
// placement key as its raw bytes and as the hex its file holds.
func Held(cfg *config.Config) []scrub.Secret {
	held := make([]scrub.Secret, 0, len(cfg.Secrets)+2)
	for _, s := range cfg.Secrets {
		held = append(held, scrub.Secret{Name: s.Name, Value: s.Value})
	}
	return append(held,
		scrub.Secret{Name: config.KeyLabel, Value: cfg.Key},
		scrub.Secret{Name: config.KeyLabel, Value: []byte(hex.EncodeToString(cfg.Key))})
}
