// Package cli is the controlplane command line: it reads flags and files,
// calls pki, render and effectorkey, and reports. It decides nothing the
// packages it calls do not.
//
// Invariant: stdout carries only what a command produces (a render's
// summary line, the one custodian.md pins; a placement key; the usage
// asked for with help, -h or --help); stderr carries errors that name a
// file or a flag and the fix, and after a render the notes of what render
// cannot check — the value files the Custodian needs at start (the Sandbox
// token's included: every pod's control listener holds it) and, with
// --allow-local-targets, which clients reach each loopback target around
// the Custodian, and the Secrets of the user's the pod's objects project
// the values from — and never a key's or a value's bytes. Usage lists every
// flag each command defines (TestUsageListsEveryFlag).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/effectorkey"
)

// Usage is the whole command line.
const Usage = `usage:
  controlplane ca init --dir CA
      Make the instance CA: CA/ca.crt and CA/ca.key (ECDSA P-256, mode 0600).
      Refuses when either exists; the tool never rotates a CA.
        --dir             the directory to make the CA in

  controlplane help | -h | --help
      Print this text (also: any command with -h or --help).

  controlplane render --manifest held.json --ca CA --out DIR [--ca-bundle extra-roots.pem]
                      [--values-dir /etc/jr2/custodian/values] [--data-plane module|golang]
                      [--plugin /opt/jr2/lib/custodian.so] [--module /opt/jr2/lib/custodian-module.so]
                      [--module-in-pod] [--mount-dir PATH] [--harness-ca-dir /etc/jr2/ca]
                      [--health 0.0.0.0:15021] [--allow-local-targets]
                      [--namespace NS] [--sidecar envoy|serve] [--custodian-image IMAGE]
                      [--agent-image IMAGE] [--agent-container agent] [--agent-uid 1000]
                      [--pod-config-dir /etc/jr2/custodian/config]
      Render one pod's directory: envoy.json, custodian.json, harness.env, tls/ (one leaf
      per bound host:port, reused while valid), ca/extra.crt, ca/bundle.crt, ca/upstream.crt,
      and the pod's Kubernetes objects, one per file in DIR/kubernetes/ (deploy them with a
      server-side kubectl apply of DIR/kubernetes/, field manager jr2: docs/kubernetes.md)
      and a patch that adds the same boundary to a pod template of yours in
      DIR/kubernetes-patch/. No file or object holds a value.
      Prints one summary line on stdout, then on stderr the value files the Custodian
      needs at start: one per held secret and JR2_SANDBOX_TOKEN (the Sandbox token the
      control listener presents to the Orchestrator; every pod holds it), and the
      Secrets of yours the pod projects them from. A refused manifest writes nothing.
        --manifest        the held manifest (JSON: names and bindings, never a value)
        --ca              the instance CA's directory (controlplane ca init)
        --out             the pod's directory to write (DIR)
        --ca-bundle       extra roots (PEM) the Harness and the Custodian trust beside the
                          system roots (this machine's bundle, or the file SSL_CERT_FILE names)
        --values-dir      where the Custodian reads one file per held secret, an absolute
                          path (on one machine: "$PWD/values")
        --data-plane      the Envoy filter that runs the engine: module (default; core Envoy's
                          dynamic-modules filter, what the pod's objects run) or golang (the
                          contrib golang filter, envoy-contrib builds only); envoy.json
                          differs only in that filter
        --plugin          golang: the Go filter's shared object in the Custodian container
        --module          module: the engine's dynamic module (make module) in the Custodian
                          container, an absolute path Envoy opens as it is: any file name,
                          no search path, no environment variable. The default is where
                          the Custodian image holds it; a --module given is refused when
                          it is not a readable file on this machine, unless --module-in-pod
        --module-in-pod   --module is where the Custodian container sees the module, not a
                          file on this machine: render does not look for it
        --mount-dir       where DIR is mounted for Envoy (default: DIR's absolute path);
                          envoy.json names the leaves and ca/upstream.crt under it
        --harness-ca-dir  where the Harness container sees DIR/ca (harness.env's
                          NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO,
                          …), an absolute path; on one machine, DIR/ca's ("$PWD/pod/ca")
        --health          the health listener's address in envoy.json and custodian.json
                          (IP:port; default every interface, for the kubelet); on one
                          machine 127.0.0.1:15021
        --allow-local-targets  accept bound targets on loopback and other guarded addresses
                          (tests and demos on one machine; never in a pod). harness.env's
                          NO_PROXY (localhost,127.0.0.1,::1) sends every client to those
                          around the Custodian, and Go never proxies any loopback address:
                          bind another loopback address (127.0.0.2) and use curl, Python or
                          Node. Render prints, per loopback target, which clients go around.
        The pod's objects (paths and names in the pod, not on this machine):
        --namespace       the objects' namespace (default: none written; kubectl's own)
        --sidecar         what the Custodian container runs: envoy (default; core Envoy
                          1.39.3 with the module, images/custodian-envoy.Dockerfile) or
                          serve (custodian serve, images/custodian-serve.Dockerfile)
        --custodian-image the Custodian container's image (default jr2-custodian-envoy or
                          jr2-custodian-serve, the tags the recipes' docker build lines give)
        --agent-image     the agent container's image (default jr2-agent: name yours)
        --agent-container the agent container's name (default agent); the patch merges
                          into the container of that name in your pod template
        --agent-uid       the agent container's uid: not 0, not the Custodian's 65532
                          (default 1000)
        --pod-config-dir  where the Custodian container sees custodian.json, envoy.json,
                          tls/ and ca/upstream.crt (default /etc/jr2/custodian/config);
                          beside --values-dir, never inside it or around it

  controlplane effector --config effector.json --out DIR [--namespace NS] [--image jr2-effector]
                        [--key-secret NAME] [--key-key effector-key] [--secrets-secret NAME]
                        [--drain 30] [--ca-file extra-roots.pem]
      Write the Effector's Kubernetes objects, one per file in DIR/kubernetes/: a ConfigMap
      of effector.json, a Deployment running effector (images/effector.Dockerfile), a
      headless Service for its signed wire (docs/kubernetes.md) and, with --ca-file, a
      ConfigMap of its certificates. Its placement key and effect secrets are projected
      from Secrets of yours, named on stderr; no object holds a value. http effects only:
      commands and pushes are refused.
        --config          effector.json (the Effector's own parser checks it)
        --out             the directory to write DIR/kubernetes/ in
        --namespace       the objects' namespace (default: none written)
        --image           the Effector's image (default jr2-effector, the recipe's tag)
        --key-secret      your Secret holding the placement key (the key command's
                          output; default <name>-key)
        --key-key         its key (default effector-key)
        --secrets-secret  your Secret whose keys are the effect secrets effector.json
                          names (default <name>-secrets)
        --drain           JR2_EFFECTOR_DRAIN_SECONDS; terminationGracePeriodSeconds is 5 more
        --ca-file         extra roots (PEM, certificates only) the Effector trusts for its
                          https targets beside the image's system roots: ConfigMap
                          <name>-ca, mounted read-only where JR2_CA_FILE points
                          (default: none, the system roots only)

  controlplane key --signing-key FILE --placement NAME
      Print an Effector placement's key, HMAC-SHA256(signing key, "effector:" + NAME), as
      64 lowercase hex characters.
        --signing-key     the instance's signing key file
        --placement       the placement's name: instance, or the Sandbox's
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
		return caInit(args[2:], stdout, stderr)
	case args[0] == "ca" && len(args) > 1 && isHelp(args[1]):
		fmt.Fprint(stdout, Usage)
		return ExitOK
	case args[0] == "ca":
		fmt.Fprintf(stderr, "controlplane ca: the one ca command is \"controlplane ca init --dir CA\"\n%s", Usage)
		return ExitUsage
	case args[0] == "render":
		return renderCmd(args[1:], stdout, stderr)
	case args[0] == "key":
		return key(args[1:], stdout, stderr)
	case args[0] == "effector":
		return effectorCmd(args[1:], stdout, stderr)
	case isHelp(args[0]):
		fmt.Fprint(stdout, Usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "controlplane: unknown command %q\n%s", strings.Join(args[:min(2, len(args))], " "), Usage)
	return ExitUsage
}

// isHelp reports whether arg asks for the usage.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// flags parses args into fs and checks that each required flag is set. It
// returns false when the command must not go on, with the exit code:
// ExitOK after -h or --help (the usage on stdout), else ExitUsage.
func flags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, required map[string]*string) (bool, int) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, Usage)
			return false, ExitOK
		}
		fmt.Fprintf(stderr, "controlplane %s: %v\n%s", fs.Name(), err, Usage)
		return false, ExitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "controlplane %s: unexpected argument %q\n%s", fs.Name(), fs.Arg(0), Usage)
		return false, ExitUsage
	}
	for _, name := range slices.Sorted(maps.Keys(required)) {
		if *required[name] == "" {
			fmt.Fprintf(stderr, "controlplane %s: --%s is required\n%s", fs.Name(), name, Usage)
			return false, ExitUsage
		}
	}
	return true, ExitOK
}

func newCAInitFlags() (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("ca init", flag.ContinueOnError)
	return fs, fs.String("dir", "", "")
}

func caInit(args []string, stdout, stderr io.Writer) int {
	fs, dir := newCAInitFlags()
	if ok, code := flags(fs, args, stdout, stderr, map[string]*string{"dir": dir}); !ok {
		return code
	}
	if err := pki.InitCA(*dir, time.Now()); err != nil {
		fmt.Fprintf(stderr, "controlplane %v\n", err)
		return ExitFail
	}
	return ExitOK
}

// renderFlags are the render command's flags.
type renderFlags struct {
	manifest, ca, out, bundle, valuesDir, dataPlane, plugin, module, mountDir, harnessCA, health *string
	allowLocal, moduleInPod                                                                      *bool
	kube                                                                                         *kubeFlags
}

func newRenderFlags() (*flag.FlagSet, *renderFlags) {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	return fs, &renderFlags{
		manifest:    fs.String("manifest", "", ""),
		ca:          fs.String("ca", "", ""),
		out:         fs.String("out", "", ""),
		bundle:      fs.String("ca-bundle", "", ""),
		valuesDir:   fs.String("values-dir", render.DefaultValuesDir, ""),
		dataPlane:   fs.String("data-plane", string(bootstrap.DataPlaneModule), ""),
		plugin:      fs.String("plugin", render.DefaultPlugin, ""),
		module:      fs.String("module", render.DefaultModule, ""),
		mountDir:    fs.String("mount-dir", "", ""),
		harnessCA:   fs.String("harness-ca-dir", render.DefaultHarnessCADir, ""),
		allowLocal:  fs.Bool("allow-local-targets", false, ""),
		health:      fs.String("health", filter.DefaultHealth, ""),
		moduleInPod: fs.Bool("module-in-pod", false, ""),
		kube:        addKubeFlags(fs),
	}
}

func renderCmd(args []string, stdout, stderr io.Writer) int {
	fs, f := newRenderFlags()
	if ok, code := flags(fs, args, stdout, stderr, map[string]*string{"manifest": f.manifest, "ca": f.ca, "out": f.out, "values-dir": f.valuesDir, "plugin": f.plugin, "module": f.module, "harness-ca-dir": f.harnessCA}); !ok {
		return code
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
	if *f.moduleInPod && dp != bootstrap.DataPlaneModule {
		fmt.Fprintf(stderr, "controlplane render: --module-in-pod is read only with --data-plane module; drop it\n")
		return ExitUsage
	}
	// The default --module is the Custodian image's path (kube.ModulePath),
	// which the pod's objects load and this machine need not hold; a
	// --module given names a file of this machine's unless --module-in-pod.
	if dp == bootstrap.DataPlaneModule && isSet(fs, "module") && !*f.moduleInPod && filepath.IsAbs(*f.module) {
		if err := readableFile(*f.module); err != nil {
			return fail(fmt.Errorf("--module: %w; build it (make module writes bin/custodian-module.so) and name its absolute path, or add --module-in-pod if the path is where the Custodian container sees it, not a file on this machine", err))
		}
	}
	m, err := readLimited(*f.manifest, manifest.MaxSize)
	if err != nil {
		return fail(fmt.Errorf("--manifest: %w", err))
	}
	var extra []byte
	if *f.bundle != "" {
		if extra, err = readLimited(*f.bundle, 64<<20); err != nil {
			return fail(fmt.Errorf("--ca-bundle: %w; name a PEM file of the extra roots that exists now (a CA file its server removes when it stops must be rendered while that server runs), or drop --ca-bundle", err))
		}
	}
	_, roots, err := pki.SystemRoots()
	if err != nil {
		return fail(err)
	}
	ko, err := f.kube.options()
	if err != nil {
		fmt.Fprintf(stderr, "controlplane render: %v\n", err)
		return ExitUsage
	}
	res, err := render.Render(render.Options{
		Manifest: m, CADir: *f.ca, OutDir: *f.out, CABundle: extra, SystemRoots: roots,
		ValuesDir: *f.valuesDir, DataPlane: dp, Plugin: *f.plugin, Module: *f.module, MountDir: *f.mountDir, HarnessCADir: *f.harnessCA, Now: time.Now(),
		AllowLocalTargets: *f.allowLocal, Health: *f.health, Kube: ko,
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
	renderNotes(stderr, res.Manifest, *f.valuesDir, *f.allowLocal, noProxy(*f.out))
	kubeNotes(stderr, res.Kube)
	return ExitOK
}

// renderNotes writes, after a render, what render cannot check and the
// operator must still do: the value files the Custodian reads at start —
// one per held secret and the Sandbox token's, which every pod's control
// listener holds — and, with --allow-local-targets, which clients reach
// each loopback target around the Custodian (NO_PROXY and Go's own rule
// send them direct, with no error a user would see). Names,
// targets and a directory only: render never sees a value.
func renderNotes(w io.Writer, m *manifest.Manifest, valuesDir string, local bool, noProxy []string) {
	names := make([]string, 0, len(m.Secrets)+1)
	for _, s := range m.Secrets {
		names = append(names, s.ValueNames()...)
	}
	names = append(names, contract.TokenName)
	fmt.Fprintf(w, "controlplane render: the Custodian starts only with one value file per held secret in %s: %s (%s is the Sandbox token the control listener presents to the Orchestrator; every pod holds it)\n",
		valuesDir, strings.Join(names, ", "), contract.TokenName)
	if !local {
		return
	}
	seen := map[string]bool{}
	for _, s := range m.Secrets {
		for _, t := range s.Targets {
			if seen[t] {
				continue
			}
			seen[t] = true
			if note := localNote(t, noProxy); note != "" {
				fmt.Fprintf(w, "controlplane render: --allow-local-targets: %s %s\n", t, note)
			}
		}
	}
}

// localNote says which clients go around the Custodian to target, a
// bound host:port on this machine, with no error: every client when
// harness.env's NO_PROXY names its host, else Go's (net/http never
// proxies a loopback address, whatever NO_PROXY says); for another
// guarded address, that no pod may bind it. "" for a target the dial
// guard does not refuse.
func localNote(target string, noProxy []string) string {
	host, _, err := contract.SplitTarget(target)
	if err != nil {
		return ""
	}
	h := strings.ToLower(strings.Trim(host, "[]"))
	guard := dialguard.Judge(h)
	if !guard.Guarded {
		return ""
	}
	loopback := h == "localhost" || strings.HasSuffix(h, ".localhost")
	if a, err := netip.ParseAddr(h); err == nil {
		loopback = a.Unmap().IsLoopback()
	}
	switch {
	case !loopback:
		return "is " + guard.Why + ": the agent could serve it in a pod; never render a pod so"
	case slices.Contains(noProxy, h):
		return "is in harness.env's NO_PROXY: every client (curl, Python, Node, Go) goes to it directly, around the Custodian, with no error; bind another loopback address, such as 127.0.0.2"
	default:
		return "is loopback: curl, Python and Node go through the Custodian to it, but a Go client goes directly, around the Custodian, with no error (net/http never proxies a loopback address)"
	}
}

// noProxy is the NO_PROXY list of the harness.env render wrote into out,
// lowercased.
func noProxy(out string) []string {
	b, err := os.ReadFile(filepath.Join(out, render.HarnessFile))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NO_PROXY="); ok {
			return strings.Split(strings.ToLower(v), ",")
		}
	}
	return nil
}

// isSet reports whether the command line set the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func newKeyFlags() (fs *flag.FlagSet, file, placement *string) {
	fs = flag.NewFlagSet("key", flag.ContinueOnError)
	return fs, fs.String("signing-key", "", ""), fs.String("placement", "", "")
}

func key(args []string, stdout, stderr io.Writer) int {
	fs, file, placement := newKeyFlags()
	if ok, code := flags(fs, args, stdout, stderr, map[string]*string{"signing-key": file, "placement": placement}); !ok {
		return code
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

// readableFile is nil when path is a regular file this process can open
// for reading.
func readableFile(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
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
