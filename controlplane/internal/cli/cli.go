// Package cli is the controlplane command line: it reads flags and files,
// calls pki, render and effectorkey, and reports. It decides nothing the
// packages it calls do not.
//
// Invariant: stdout carries only what a command produces (a render's
// summary line, a placement key); stderr carries errors that name a file or
// a flag and the fix, and never a key's or a value's bytes.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/internal/effectorkey"
)

// Usage is the whole command line.
const Usage = `usage:
  controlplane ca init --dir CA
      Make the instance CA: CA/ca.crt and CA/ca.key (ECDSA P-256, mode 0600).
      Refuses when either exists; the tool never rotates a CA.

  controlplane render --manifest held.json --ca CA --out DIR [--ca-bundle extra-roots.pem]
                      [--values-dir /etc/jr2/custodian/values] [--data-plane golang|module]
                      [--plugin /opt/jr2/lib/custodian.so] [--module /opt/jr2/lib/custodian-module.so]
                      [--mount-dir PATH] [--harness-ca-dir /etc/jr2/ca] [--allow-local-targets]
      Render one pod's directory: envoy.json, custodian.json, harness.env, tls/ (one leaf
      per bound host:port, reused while valid), ca/extra.crt, ca/bundle.crt, ca/upstream.crt.
      Prints one summary line. A refused manifest writes nothing.
        --ca-bundle       extra roots (PEM) the Harness and the Custodian trust beside the
                          system roots (this machine's bundle, or the file SSL_CERT_FILE names)
        --values-dir      where the Custodian reads one file per held secret
        --data-plane      the Envoy filter that runs the engine: golang (default; the contrib
                          golang filter, envoy-contrib builds only) or module (core Envoy's
                          dynamic-modules filter); envoy.json differs only in that filter
        --plugin          golang: the Go filter's shared object in the Custodian container
        --module          module: the engine's dynamic module (make module) in the Custodian
                          container, an absolute path Envoy opens as it is: any file name,
                          no search path, no environment variable
        --mount-dir       where DIR is mounted for Envoy (default: DIR's absolute path);
                          envoy.json names the leaves and ca/upstream.crt under it
        --harness-ca-dir  where the Harness container sees DIR/ca (harness.env's
                          NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO)
        --allow-local-targets  accept bound targets on loopback and other guarded addresses
                          (tests and demos on one machine; never in a pod)

  controlplane key --signing-key FILE --placement NAME
      Print an Effector placement's key, HMAC-SHA256(signing key, "effector:" + NAME), as
      64 lowercase hex characters.
`

// Exit codes.
const (
	ExitOK    = 0
	ExitFail  = 1 // refused or failed; stderr says why
	ExitUsage = 2
)

// Main runs the command line args (without the program name).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	switch {
	case args[0] == "ca" && len(args) > 1 && args[1] == "init":
		return caInit(args[2:], stderr)
	case args[0] == "render":
		return renderCmd(args[1:], stdout, stderr)
	case args[0] == "key":
		return key(args[1:], stdout, stderr)
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprint(stdout, Usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "controlplane: unknown command %q\n%s", strings.Join(args[:min(2, len(args))], " "), Usage)
	return ExitUsage
}

// flags parses args into fs and checks that each required flag is set.
func flags(fs *flag.FlagSet, args []string, stderr io.Writer, required map[string]*string) bool {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "controlplane %s: %v\n%s", fs.Name(), err, Usage)
		return false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "controlplane %s: unexpected argument %q\n%s", fs.Name(), fs.Arg(0), Usage)
		return false
	}
	for _, name := range slices.Sorted(maps.Keys(required)) {
		if *required[name] == "" {
			fmt.Fprintf(stderr, "controlplane %s: --%s is required\n%s", fs.Name(), name, Usage)
			return false
		}
	}
	return true
}

func caInit(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ca init", flag.ContinueOnError)
	dir := fs.String("dir", "", "")
	if !flags(fs, args, stderr, map[string]*string{"dir": dir}) {
		return ExitUsage
	}
	if err := pki.InitCA(*dir, time.Now()); err != nil {
		fmt.Fprintf(stderr, "controlplane %v\n", err)
		return ExitFail
	}
	return ExitOK
}

// renderFlags are the render command's flags.
type renderFlags struct {
	manifest, ca, out, bundle, valuesDir, dataPlane, plugin, module, mountDir, harnessCA *string
	allowLocal                                                                           *bool
}

func newRenderFlags() (*flag.FlagSet, *renderFlags) {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	return fs, &renderFlags{
		manifest:   fs.String("manifest", "", ""),
		ca:         fs.String("ca", "", ""),
		out:        fs.String("out", "", ""),
		bundle:     fs.String("ca-bundle", "", ""),
		valuesDir:  fs.String("values-dir", render.DefaultValuesDir, ""),
		dataPlane:  fs.String("data-plane", string(bootstrap.DataPlaneGolang), ""),
		plugin:     fs.String("plugin", render.DefaultPlugin, ""),
		module:     fs.String("module", render.DefaultModule, ""),
		mountDir:   fs.String("mount-dir", "", ""),
		harnessCA:  fs.String("harness-ca-dir", render.DefaultHarnessCADir, ""),
		allowLocal: fs.Bool("allow-local-targets", false, ""),
	}
}

func renderCmd(args []string, stdout, stderr io.Writer) int {
	fs, f := newRenderFlags()
	if !flags(fs, args, stderr, map[string]*string{"manifest": f.manifest, "ca": f.ca, "out": f.out, "values-dir": f.valuesDir, "plugin": f.plugin, "module": f.module, "harness-ca-dir": f.harnessCA}) {
		return ExitUsage
	}
	dp, err := bootstrap.ParseDataPlane(*f.dataPlane)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane render: %v\n", err)
		return ExitUsage
	}
	// The flag of the data plane not chosen would be ignored: refuse it.
	use, other := "plugin", "module"
	if dp == bootstrap.DataPlaneModule {
		use, other = other, use
	}
	if isSet(fs, other) {
		fmt.Fprintf(stderr, "controlplane render: --%s is not read with --data-plane %s, which loads --%s; drop it or choose the other data plane\n", other, dp, use)
		return ExitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "controlplane render: %v; nothing was written\n", err)
		return ExitFail
	}
	m, err := readLimited(*f.manifest, manifest.MaxSize)
	if err != nil {
		return fail(fmt.Errorf("--manifest: %w", err))
	}
	var extra []byte
	if *f.bundle != "" {
		if extra, err = readLimited(*f.bundle, 64<<20); err != nil {
			return fail(fmt.Errorf("--ca-bundle: %w", err))
		}
	}
	_, roots, err := pki.SystemRoots()
	if err != nil {
		return fail(err)
	}
	res, err := render.Render(render.Options{
		Manifest: m, CADir: *f.ca, OutDir: *f.out, CABundle: extra, SystemRoots: roots,
		ValuesDir: *f.valuesDir, DataPlane: dp, Plugin: *f.plugin, Module: *f.module, MountDir: *f.mountDir, HarnessCADir: *f.harnessCA, Now: time.Now(),
		AllowLocalTargets: *f.allowLocal,
	})
	var refused *manifest.Refused
	if errors.As(err, &refused) {
		fmt.Fprintf(stderr, "controlplane render: %s is refused; nothing was written. Fix each line:\n%s\n", *f.manifest, refused.Error())
		return ExitFail
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, res.Summary)
	return ExitOK
}

// isSet reports whether the command line set the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func key(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	file := fs.String("signing-key", "", "")
	placement := fs.String("placement", "", "")
	if !flags(fs, args, stderr, map[string]*string{"signing-key": file, "placement": placement}) {
		return ExitUsage
	}
	for _, c := range []byte(*placement) {
		if c <= ' ' || c >= 0x7f {
			fmt.Fprintln(stderr, "controlplane key: --placement is a placement name (printable ASCII, no space), such as instance")
			return ExitUsage
		}
	}
	k, err := effectorkey.ReadSigningKey(*file)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane key: %v\n", err)
		return ExitFail
	}
	fmt.Fprintln(stdout, effectorkey.Hex(k, *placement))
	return ExitOK
}

// readLimited reads a file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
