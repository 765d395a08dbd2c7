// Package render turns one pod's held manifest into the directory both
// Custodian hosts run from (custodian.md, "controlplane"): envoy.json
// (package bootstrap), custodian.json (filter.Config: names, stand-ins,
// bindings, listeners, the value directory — no value), harness.env, the
// leaves under tls/, the trust files under ca/, and the pod's Kubernetes
// objects (package kube) built from these same bytes. Render lists every
// file.
//
// Invariant: nothing is written into DIR unless everything was built — a
// refused manifest, a bad CA or bad roots write nothing — and the changed
// files are written into a temporary directory beside DIR, removed on any
// refusal, and renamed into place (a new DIR is that directory, renamed
// once), so a failure midway never leaves a half-written file. The steps
// run side by side (the leaves, the two envoy.json, the writes into the
// temporary directory), and a refusal is still the one the steps in order
// would have met first. Render never reads a value (it has no way to: the
// manifest holds none and the value directory is only named), and the
// CA's key never enters DIR. The same inputs render the same bytes, except
// a leaf issued fresh; a leaf already in the directory is reused while pki
// accepts it, and only a file whose bytes or mode differ from DIR's is
// written (Result.Written), so a re-render of the same inputs touches
// nothing: every inode and mtime stay as they were. Each file has exactly
// its mode, whatever the umask.
package render

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/gitcred"
	"jr2.dev/boundary/internal/hostlimits"
)

// Defaults of the render CLI's flags (custodian.md, and the two extensions
// the spec is silent on: the mount directory and the Harness's CA
// directory).
const (
	DefaultValuesDir    = "/etc/jr2/custodian/values"
	DefaultPlugin       = "/opt/jr2/lib/custodian.so"
	DefaultModule       = kube.ModulePath // where the Custodian image holds it
	DefaultHarnessCADir = "/etc/jr2/ca"
)

// Files of a rendered directory.
const (
	EnvoyFile     = "envoy.json"
	CustodianFile = bootstrap.EngineConfigFile
	HarnessFile   = "harness.env"
	ExtraCAFile   = "ca/extra.crt"
	BundleCAFile  = "ca/bundle.crt"
	WgetrcFile    = "ca/wgetrc"
	UpstreamFile  = bootstrap.UpstreamCAFile
	tlsDir        = "tls"
)

// Options are one render's inputs.
type Options struct {
	Manifest []byte // the held manifest's bytes
	CADir    string // the CA directory (ca.crt, ca.key)
	OutDir   string // DIR
	// CABundle is --ca-bundle's bytes (extra roots, PEM); nil when none.
	CABundle []byte
	// SystemRoots is this machine's PEM bundle (pki.SystemRoots).
	SystemRoots []byte
	ValuesDir   string // custodian.json's valuesDir
	Plugin      string // the Go filter's .so in the Custodian container
	// DataPlane is the Envoy filter that hosts the engine (--data-plane);
	// empty is module, the plane the pod's objects run. Module is the
	// dynamic module's .so in the Custodian container, loaded by that
	// absolute path (DataPlaneModule).
	DataPlane bootstrap.DataPlane
	Module    string
	// MountDir is where DIR is mounted for Envoy; empty means DIR's
	// absolute path.
	MountDir string
	// HarnessCADir is where the Harness sees DIR/ca: an absolute path,
	// written into harness.env.
	HarnessCADir string
	// Health is the health listener's address (IP:port) in custodian.json
	// and envoy.json; empty is filter.DefaultHealth, every interface, for
	// the kubelet.
	Health string
	// AllowLocalTargets accepts bound targets on guarded addresses (tests
	// and demos on one machine) and marks custodian.json so; never in a pod.
	AllowLocalTargets bool
	// Kube is the pod's side of its Kubernetes objects (package kube):
	// the namespace, the images, the sidecar, the config directory. Its
	// ValuesDir and HarnessCADir are this render's.
	Kube kube.Options
	Now  time.Time
	// Rand draws the admin socket's id when DIR has none yet (adminSocket);
	// nil is crypto/rand. Tests give a fixed one for byte-exact goldens.
	Rand io.Reader
}

// Result is what a render did.
type Result struct {
	// Summary is the one line per pod custodian.md pins.
	Summary string
	// Files are the paths of every file this render produced, relative
	// to DIR, sorted.
	Files []string
	// Written are those of Files whose bytes or mode differed from DIR's
	// and were written, sorted; a render of unchanged inputs writes none.
	Written []string
	// Issued and Reused count the leaves.
	Issued, Reused int
	// Kube is the pod's Kubernetes objects, as written under
	// DIR/kubernetes/, and the pod-template patch.
	Kube *kube.Set
	// Manifest is the held manifest as render read it, for what the
	// caller says of it after (the value files to put in place): read
	// once, not parsed again.
	Manifest *manifest.Manifest
}

type file struct {
	data []byte
	mode os.FileMode
	// same: data is known to be the bytes already in DIR (a reused leaf,
	// read from there); only the mode is checked.
	same bool
}

// Render builds every file of DIR and then writes them. A refused manifest
// returns a *manifest.Refused and writes nothing. The files:
//
//	envoy.json      the Envoy bootstrap (package bootstrap)
//	custodian.json  the engine config, filter.Config: names, stand-ins,
//	                bindings, listeners, the value directory — no value
//	harness.env     the Harness container's env (ADR-0059's list)
//	tls/…           one leaf and key per bound host:port (contract.LeafBase)
//	ca/extra.crt    --ca-bundle + the jr2 CA          (NODE_EXTRA_CA_CERTS, DENO_CERT)
//	ca/bundle.crt   system roots + --ca-bundle + CA  (SSL_CERT_FILE, CURL_CA_BUNDLE, …)
//	ca/upstream.crt system roots + --ca-bundle       (the Custodian, upstream)
//	ca/wgetrc       ca_certificate = bundle.crt      (WGETRC: wget reads no trust variable)
//	kubernetes/…    the pod's Kubernetes objects, one per file (package kube),
//	                built from these same bytes; kubernetes-patch/… the
//	                same boundary as a patch of a pod template
//
// Files are written into the temporary directory (dirWriter) while the
// rest is built — the leaves' as soon as they are made and the trust
// files, the admin socket and the leaves' file names have passed — and
// moved into DIR only once every file is built.
func Render(o Options) (*Result, error) {
	m, err := manifest.ParseWith(o.Manifest, manifest.Options{AllowLocalTargets: o.AllowLocalTargets})
	if err != nil {
		return nil, err
	}
	if o.OutDir == "" {
		return nil, errors.New("--out is empty; name the directory to render into")
	}
	if !filepath.IsAbs(o.ValuesDir) {
		return nil, fmt.Errorf("--values-dir %q is relative; write an absolute path, where the Custodian container mounts the values: custodian.json names it for both hosts, wherever they run from", o.ValuesDir)
	}
	if !filepath.IsAbs(o.HarnessCADir) {
		return nil, fmt.Errorf("--harness-ca-dir %q is relative; write an absolute path, where the Harness container sees DIR/ca (on one machine: DIR/ca's absolute path, \"$PWD/pod/ca\"): harness.env names it, wherever the Harness runs from", o.HarnessCADir)
	}
	if o.Health != "" {
		if _, err := netip.ParseAddrPort(o.Health); err != nil {
			return nil, fmt.Errorf("--health %q: want IP:port, such as 127.0.0.1:15021 (one machine) or 0.0.0.0:15021 (a pod's kubelet)", o.Health)
		}
	}
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	if o.MountDir == "" {
		o.MountDir = out
	}
	cfg := Config(m, o.ValuesDir)
	cfg.LocalTargets = o.AllowLocalTargets
	if o.Health != "" {
		cfg.Listeners.Health = o.Health
	}
	cfgJSON, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgJSON = append(cfgJSON, '\n')
	targets := bootstrap.BoundTargets(cfg)
	// The leaves and the two envoy.json (DIR's, and the pod's: its own
	// mount directory and module) are independent: built at once, they
	// take the machine's cores where one after the other left most of
	// them idle. When the two envoy.json differ in their mount directory
	// alone (the module plane, the pod's module, as by default), they are
	// one build (bootstrap.MarshalMounted). The build reads custodian.json
	// back with the engine's parser first (bootstrap.CheckConfig), the
	// check render makes too, so it is made there, off the path of
	// everything else, and render's own is the same check, answered from
	// the build's; a check made before anything started was a tenth of a
	// render on one core. Every refusal is the one the steps in this order
	// would have met first: the check, the CA, the trust files, the admin
	// socket, the leaves' files, the builds.
	ca, caErr := pki.LoadCA(o.CADir, o.Now)
	admin, adminErr := adminSocket(out, o.Rand)
	// The leaves' files (all but a dozen of DIR's) are written into the
	// temporary directory as soon as the leaves are made and the trust
	// files are known to build, while the builds go on: written after
	// them, they kept one core waiting.
	w := beginWrite(out)
	var leaves []pki.Leaf
	var leafErr error
	var leafFiles map[string]file
	early := make(chan bool, 1) // the refusals before the builds' found nothing
	var wg sync.WaitGroup
	if caErr == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leaves, leafErr = leavesOf(ca, out, targets, o.Now)
			if ok := <-early; ok && leafErr == nil {
				leafFiles = filesOfLeaves(targets, leaves)
				leafErr = w.add(leafFiles)
			}
		}()
	}
	dirIn := bootstrap.Input{Config: cfg, ConfigJSON: cfgJSON, DataPlane: o.DataPlane, Plugin: o.Plugin, Module: o.Module, MountDir: o.MountDir, AdminSocket: admin}
	podIn := podEnvoyInput(o, cfg, cfgJSON, admin)
	var envoyJSON, podEnvoyJSON []byte
	var dirErr, podErr error
	switch {
	case adminErr != nil:
	case dirIn.DataPlane != bootstrap.DataPlaneGolang && podIn.Module == dirIn.Module:
		wg.Add(1)
		go func() {
			defer wg.Done()
			var both [][]byte
			if both, dirErr = bootstrap.MarshalMounted(dirIn, []string{dirIn.MountDir, podIn.MountDir}); dirErr == nil {
				envoyJSON, podEnvoyJSON = both[0], both[1]
			}
		}()
	default:
		wg.Add(2)
		go func() {
			defer wg.Done()
			envoyJSON, dirErr = buildEnvoy(dirIn)
		}()
		go func() {
			defer wg.Done()
			podEnvoyJSON, podErr = buildEnvoy(podIn)
		}()
	}
	var trust pki.Trust
	trustErr := caErr
	if caErr == nil {
		trust, trustErr = pki.Bundles(ca, o.SystemRoots, o.CABundle)
	}
	distinctErr := distinctLeaves(targets)
	early <- trustErr == nil && adminErr == nil && distinctErr == nil
	wg.Wait()
	// Both builds refuse the same input with the same words, said once.
	for _, err := range []error{checkConfig(cfgJSON), trustErr, adminErr, distinctErr, dirErr, podErr, leafErr} {
		if err != nil {
			w.abort()
			return nil, err
		}
	}
	harness := HarnessEnv(cfg, len(m.Secrets) > 0, o.HarnessCADir)
	files := map[string]file{
		EnvoyFile:     {data: envoyJSON, mode: 0o644},
		CustodianFile: {data: cfgJSON, mode: 0o644},
		HarnessFile:   {data: harness, mode: 0o644},
		ExtraCAFile:   {data: trust.Extra, mode: 0o644},
		BundleCAFile:  {data: trust.Bundle, mode: 0o644},
		UpstreamFile:  {data: trust.Upstream, mode: 0o644},
		WgetrcFile:    {data: Wgetrc(o.HarnessCADir), mode: 0o644},
	}
	res := &Result{Summary: Summary(m, cfg), Manifest: m}
	kubeLeaves := make([]kube.Leaf, len(targets))
	for i, t := range targets {
		l := leaves[i]
		if l.Reused {
			res.Reused++
		} else {
			res.Issued++
		}
		kubeLeaves[i] = kube.Leaf{Target: t, Cert: l.CertPEM, Key: l.KeyPEM}
	}
	// DIR's other files are written (into the temporary directory) while
	// the pod's objects are built from them, then the objects' files.
	wrote := make(chan error, 1)
	go func() { wrote <- w.add(files) }()
	objects := map[string]file{}
	res.Kube, err = kubeObjects(o, m, cfg, cfgJSON, podEnvoyJSON, harness, trust, kubeLeaves, objects)
	if werr := <-wrote; err == nil {
		err = werr
	}
	if err == nil {
		err = w.add(objects)
	}
	if err != nil {
		w.abort()
		return nil, err
	}
	maps.Copy(files, objects)
	maps.Copy(files, leafFiles)
	written, err := w.finish(files)
	if err != nil {
		return nil, err
	}
	for p := range files {
		res.Files = append(res.Files, p)
	}
	sort.Strings(res.Files)
	res.Written = written
	return res, nil
}

// filesOfLeaves are the leaves' files of DIR: each target's certificate
// and its key (mode 0600); a reused leaf's are the bytes DIR holds.
func filesOfLeaves(targets []string, leaves []pki.Leaf) map[string]file {
	files := make(map[string]file, 2*len(targets))
	for i, t := range targets {
		l := leaves[i]
		certPath, keyPath := bootstrap.LeafFiles(t)
		files[certPath] = file{data: l.CertPEM, mode: 0o644, same: l.Reused}
		files[keyPath] = file{data: l.KeyPEM, mode: 0o600, same: l.Reused}
	}
	return files
}

// buildEnvoy is the envoy.json of in: Marshal(Build(in)), as
// MarshalMounted writes it for in's own mount directory.
func buildEnvoy(in bootstrap.Input) ([]byte, error) {
	out, err := bootstrap.MarshalMounted(in, []string{in.MountDir})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// leavesOf is the leaf of each target: the one in DIR when pki accepts it,
// else a fresh one. The targets are independent (a signature check or a
// key and a signature each), so they are spread over the machine's cores;
// the result is in target order whatever the schedule. A DIR without a
// tls directory (a fresh render) has no leaf to reuse, so none is looked
// for: 800 opens that each fail.
func leavesOf(ca *pki.CA, out string, targets []string, now time.Time) ([]pki.Leaf, error) {
	_, err := os.Lstat(filepath.Join(out, tlsDir))
	reuse := err == nil
	leaves := make([]pki.Leaf, len(targets))
	errs := make([]error, len(targets))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(targets); i = int(next.Add(1) - 1) {
				var oldCert, oldKey []byte
				if reuse {
					certPath, keyPath := bootstrap.LeafFiles(targets[i])
					oldCert, _ = os.ReadFile(filepath.Join(out, filepath.FromSlash(certPath)))
					oldKey, _ = os.ReadFile(filepath.Join(out, filepath.FromSlash(keyPath)))
				}
				leaves[i], errs[i] = ca.Leaf(targets[i], oldCert, oldKey, now)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return leaves, nil
}

// distinctLeaves refuses two targets whose leaves contract.LeafBase would
// put in one file (a DNS name that spells an IPv6 address with '_' for
// ':'), which would serve one target the other's certificate.
func distinctLeaves(targets []string) error {
	seen := map[string]string{}
	for _, t := range targets {
		base := contract.LeafBase(t)
		if other, dup := seen[base]; dup {
			return fmt.Errorf("targets %s and %s would share the leaf %s; bind only one of them", other, t, filepath.ToSlash(base))
		}
		seen[base] = t
	}
	return nil
}

// Config is the engine config of a manifest: pod, sandbox and orchestrator
// copied; the default listeners; each held secret with its stand-in,
// targets, headers and paths, in manifest order; the Sandbox token last,
// with no target and the authorization header.
func Config(m *manifest.Manifest, valuesDir string) *filter.Config {
	c := &filter.Config{
		Pod:          m.Pod,
		Sandbox:      m.Sandbox,
		Orchestrator: m.Orchestrator,
		ValuesDir:    valuesDir,
		Listeners:    filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
	}
	for _, s := range m.Secrets {
		sc := filter.SecretConfig{
			Name:    s.Name,
			StandIn: s.StandIn,
			Shape:   s.Shape,
			OAuth:   s.OAuth,
			Targets: s.Targets,
			Headers: s.Headers,
			Paths:   s.Paths,
		}
		if s.AWS != nil {
			sc.AWS = &filter.AWSConfig{SessionToken: s.AWS.SessionToken}
		}
		c.Secrets = append(c.Secrets, sc)
	}
	c.Secrets = append(c.Secrets, filter.SecretConfig{
		Name:    contract.TokenName,
		StandIn: contract.StandIn(contract.TokenName),
		Targets: []string{},
		Headers: []string{"authorization"},
	})
	return c
}

// checkConfig reads custodian.json (Render writes it with a two-space
// indent and a trailing newline) back with the engine's own parser, so
// render never writes a file the hosts would refuse.
func checkConfig(b []byte) error {
	if err := bootstrap.CheckConfig(b); err != nil {
		return fmt.Errorf("render built a custodian.json the engine refuses (a bug in render): %w", err)
	}
	return nil
}

// HarnessEnv is harness.env: each stand-in (the token's included; an AWS
// secret's three, one per part, in the variables the AWS SDKs read: the
// session token's too, so that a client signs as it would with a
// temporary key, whether the real key has one or not); and, when
// the pod holds a secret of the manifest, the proxy and trust variables of
// ADR-0059. A pod that holds only the token gets no proxy: its HTTPS goes
// direct (ADR-0059, "Two Harness env shapes").
//
// harness.env sets, beside the stand-ins, every proxy and trust variable
// of docs/harness-env.md that applies (that table lists which tool reads
// which), and for each bound target of a secret that rides authorization
// a git credential helper in GIT_CONFIG_COUNT/KEY_n/VALUE_n that answers
// the Custodian's 401 challenge (filter.Challenge) with the stand-in as
// the Basic password: stock git then clones and pushes with no flag. Each
// variable render sets is one a manifest may not hold (R2,
// contract.ProxyOrTrustVar), so no held name collides with one.
func HarnessEnv(c *filter.Config, holds bool, harnessCADir string) []byte {
	var b bytes.Buffer
	line := func(k, v string) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	for _, s := range c.Secrets {
		if s.AWS == nil {
			line(s.Name, s.StandIn)
			continue
		}
		for _, p := range contract.AWSParts {
			line(p.Env, contract.StandIn(p.Of(s.Name)))
		}
	}
	if !holds {
		return b.Bytes()
	}
	proxy := "http://" + c.Listeners.Egress
	line("HTTPS_PROXY", proxy)
	line("https_proxy", proxy)
	line("NO_PROXY", "localhost,127.0.0.1,::1")
	line("no_proxy", "localhost,127.0.0.1,::1")
	line("NODE_USE_ENV_PROXY", "1")
	extra, bundle := joinSlash(harnessCADir, "extra.crt"), joinSlash(harnessCADir, "bundle.crt")
	line("NODE_EXTRA_CA_CERTS", extra)
	line("SSL_CERT_FILE", bundle)
	line("REQUESTS_CA_BUNDLE", bundle)
	line("GIT_SSL_CAINFO", bundle)
	// Read before SSL_CERT_FILE by the tool that reads it (curl, awscli,
	// pip), or instead of it (wget, Deno, gRPC, Cargo, gcloud): a machine
	// that sets one of them elsewhere would otherwise win.
	line("CURL_CA_BUNDLE", bundle)
	line("AWS_CA_BUNDLE", bundle)
	line("PIP_CERT", bundle)
	line("CARGO_HTTP_CAINFO", bundle)
	line("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", bundle)
	line("CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", bundle)
	line("DENO_CERT", extra)
	line("WGETRC", joinSlash(harnessCADir, "wgetrc"))
	gitHelpers(c, line)
	return b.Bytes()
}

// GitUser is the Basic user of the credential helper harness.env sets
// (gitcred.User).
const GitUser = gitcred.User

// gitHelpers writes the git credential helper of every bound target of a
// secret that rides authorization, in config order (gitcred.Env: the one
// rendering custodian run's child gets too). The stand-in is public; no
// value is here.
func gitHelpers(c *filter.Config, line func(k, v string)) {
	var bs []gitcred.Binding
	for _, s := range c.Secrets {
		if s.AWS != nil || !contains(s.Headers, "authorization") {
			continue
		}
		for _, t := range s.Targets {
			bs = append(bs, gitcred.Binding{Target: t, StandIn: s.StandIn})
		}
	}
	for _, kv := range gitcred.Env(bs) {
		line(kv[0], kv[1])
	}
}

// Wgetrc is ca/wgetrc, which WGETRC names: wget built with GnuTLS reads
// no trust variable, only its ca_certificate setting.
func Wgetrc(harnessCADir string) []byte {
	return []byte("# controlplane render: wget trusts the Custodian's CA through this file (WGETRC)\n" +
		"ca_certificate = " + joinSlash(harnessCADir, "bundle.crt") + "\n")
}

func joinSlash(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Summary is the line render prints per pod. It lists the manifest's held
// secrets, not the Sandbox token every pod holds, as the spec's example does.
func Summary(m *manifest.Manifest, c *filter.Config) string {
	n := len(bootstrap.BoundTargets(c))
	unit := "bound targets"
	if n == 1 {
		unit = "bound target"
	}
	if len(m.Secrets) == 0 {
		return fmt.Sprintf("pod %s: Custodian holds only %s; %d %s", m.Pod, contract.TokenName, n, unit)
	}
	names := make([]string, len(m.Secrets))
	for i, s := range m.Secrets {
		names[i] = s.Name
	}
	return fmt.Sprintf("pod %s: Custodian holds %s; %d %s", m.Pod, strings.Join(names, ", "), n, unit)
}

// write puts into DIR the files whose bytes or mode differ from what DIR
// holds, and returns their paths, sorted. The changed files are written
// into a temporary directory beside DIR first, then each renamed into
// place; a DIR that does not exist yet is that temporary directory,
// renamed once. A file already in DIR with the same bytes and mode is not
// touched (same inode, same mtime), and nothing is created beside DIR
// when nothing changed. Leaves in DIR/tls that this render did not
// produce (targets no longer bound) are removed.
func write(out string, files map[string]file) ([]string, error) {
	w := beginWrite(out)
	if err := w.add(files); err != nil {
		w.abort()
		return nil, err
	}
	return w.finish(files)
}

// dirWriter is write in stages, so that the files built first are
// written while the rest are built: add each batch, then finish with
// every file; or abort, and nothing was written to DIR. One goroutine at
// a time uses it.
type dirWriter struct {
	out     string
	fresh   bool
	tmp     string          // the temporary directory, once a file changed
	made    map[string]bool // directories made: one MkdirAll each, not one per file
	umask   uint32          // the process's, read when the first file is written
	written []string
}

func beginWrite(out string) *dirWriter {
	_, statErr := os.Lstat(out)
	return &dirWriter{out: out, fresh: errors.Is(statErr, fs.ErrNotExist)}
}

// add writes into the temporary directory each of files that differs
// from DIR's.
func (w *dirWriter) add(files map[string]file) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		if !w.fresh && !changed(filepath.Join(w.out, filepath.FromSlash(p)), f) {
			continue
		}
		if w.tmp == "" {
			parent := filepath.Dir(w.out)
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return err
			}
			tmp, err := os.MkdirTemp(parent, "."+filepath.Base(w.out)+".render-")
			if err != nil {
				return err
			}
			w.tmp, w.made, w.umask = tmp, map[string]bool{tmp: true}, currentUmask()
		}
		if err := w.writeFile(filepath.Join(w.tmp, filepath.FromSlash(p)), f); err != nil {
			return err
		}
		w.written = append(w.written, p)
	}
	return nil
}

// abort removes what add wrote; DIR is as it was.
func (w *dirWriter) abort() {
	if w.tmp != "" {
		os.RemoveAll(w.tmp)
	}
}

// finish moves what add wrote into DIR and removes DIR's stale files:
// those not in all, every file of this render.
func (w *dirWriter) finish(all map[string]file) ([]string, error) {
	defer w.abort()
	sort.Strings(w.written)
	if len(w.written) == 0 {
		return nil, removeStale(w.out, all)
	}
	if w.fresh {
		if err := os.Chmod(w.tmp, 0o755); err != nil {
			return nil, err
		}
		return w.written, os.Rename(w.tmp, w.out)
	}
	for _, p := range w.written {
		dst := filepath.Join(w.out, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(w.tmp, filepath.FromSlash(p)), dst); err != nil {
			return nil, err
		}
	}
	return w.written, removeStale(w.out, all)
}

// changed reports whether the file at path is not f: missing, not a
// regular file, another mode, or other bytes.
func changed(path string, f file) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != f.mode || st.Size() != int64(len(f.data)) {
		return true
	}
	if f.same {
		return false
	}
	old, err := os.ReadFile(path)
	return err != nil || !bytes.Equal(old, f.data)
}

func (w *dirWriter) writeFile(path string, f file) error {
	if dir := filepath.Dir(path); !w.made[dir] {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		w.made[dir] = true
	}
	return createFile(path, f.data, f.mode, w.umask)
}

// removeStale removes the files of DIR/tls, DIR/kubernetes and
// DIR/kubernetes-patch that files does not hold: leaves of targets no
// longer bound, objects this render no longer makes.
func removeStale(out string, files map[string]file) error {
	for _, dir := range []string{tlsDir, kube.Dir, kube.PatchDir} {
		entries, err := os.ReadDir(filepath.Join(out, dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			rel := dir + "/" + e.Name()
			if _, keep := files[rel]; keep || e.IsDir() {
				continue
			}
			if err := os.Remove(filepath.Join(out, dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// adminIn finds the admin socket an envoy.json names, even in a file
// altered since (render puts its bytes back).
var adminIn = regexp.MustCompile(regexp.QuoteMeta(hostlimits.AdminSocketDir+"/"+hostlimits.AdminSocketPrefix) +
	fmt.Sprintf("[0-9a-f]{%d}", hostlimits.AdminSocketIDLen) + regexp.QuoteMeta(hostlimits.AdminSocketSuffix))

// adminSocket is DIR's own admin socket: the one DIR's envoy.json names,
// so a render of unchanged inputs writes nothing and a running Envoy's
// socket stays the file's, else a fresh one drawn from r (nil is
// crypto/rand). Each directory's differs, so the Envoys of two pods on
// one machine never bind over each other's socket, and custodian envoy
// drains only the Envoy it started.
func adminSocket(out string, r io.Reader) (string, error) {
	if b, err := os.ReadFile(filepath.Join(out, EnvoyFile)); err == nil {
		if p := adminIn.Find(b); p != nil {
			return string(p), nil
		}
	}
	if r == nil {
		r = rand.Reader
	}
	id := make([]byte, hostlimits.AdminSocketIDLen/2)
	if _, err := io.ReadFull(r, id); err != nil {
		return "", fmt.Errorf("the admin socket's id: %w", err)
	}
	return hostlimits.AdminSocketPath(hex.EncodeToString(id)), nil
}
