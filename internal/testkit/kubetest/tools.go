// Package kubetest runs a real Kubernetes API server for tests: etcd and
// kube-apiserver as processes of their own on loopback, and the real
// kubectl against them. What a test applies is validated, defaulted,
// admitted and stored by the same code a cluster runs; nothing is faked.
// Shared shows the use; FindTools says which binaries and where.
//
// Invariant: every process a server starts is killed, and every file it
// wrote (all of them under one temporary directory) removed, when its test
// (Start) or its test binary (Main) ends; a child also dies with the test
// binary (Pdeathsig, on Linux). The servers listen on 127.0.0.1 only. A
// missing binary fails the test, naming `make kube-tools`; only
// JR2_KUBE_TESTS=skip turns that into a loud skip, and never under
// JR2_REQUIRE_ALL=1.
//
// Not covered: no controller-manager, scheduler, kubelet or container
// runtime runs: an object is validated, admitted and stored, never acted
// on. A Pod is never scheduled or started, a Deployment makes no
// ReplicaSet, a namespace is never finalized, and no controller creates a
// namespace's `default` ServiceAccount (Namespace creates it, as the
// ServiceAccount admission plugin needs it for every Pod).
package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Pinned releases: what scripts/kube-tools.sh builds (tools/kube,
// tools/etcd) and what the binaries found must report.
const (
	Kubernetes = "v1.37.2"
	Etcd       = "3.7.3"
)

// Environment variables a run reads.
const (
	// EnvAPIServer, EnvEtcd and EnvKubectl name a binary to use instead of
	// the one in the cache directory.
	EnvAPIServer = "JR2_KUBE_APISERVER"
	EnvEtcd      = "JR2_ETCD"
	EnvKubectl   = "JR2_KUBECTL"
	// EnvSkip set to "skip" skips, loudly, the tests that need a real API
	// server when its binaries are absent (a run without them fails
	// otherwise).
	EnvSkip = "JR2_KUBE_TESTS"
	// EnvRequireAll set to "1" (CI) makes every skip a failure.
	EnvRequireAll = "JR2_REQUIRE_ALL"
)

// Build is the command that builds the binaries into the cache directory.
const Build = "make kube-tools"

// Tools are the paths of the three binaries.
type Tools struct {
	APIServer, Etcd, Kubectl string
}

// ErrMissing is what the error of FindTools is (errors.Is) when a binary
// does not exist at all, as opposed to one that exists but is the wrong
// release: only the first may be skipped (JR2_KUBE_TESTS=skip).
var ErrMissing = errors.New("a binary the tests against a real API server need is missing")

type missingError string

func (e missingError) Error() string        { return string(e) }
func (e missingError) Is(target error) bool { return target == ErrMissing }

// CacheDir is where scripts/kube-tools.sh puts the binaries: .cache/kube/bin
// under the repository root, found from the working directory up.
func CacheDir() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "kube", "bin"), nil
}

// FindTools finds the three binaries and checks that each reports its
// pinned release. Its error names the binary, where it looked, and the fix.
//
// kube-apiserver and kubectl v1.37.2 and etcd v3.7.3, from JR2_KUBE_APISERVER,
// JR2_KUBECTL and JR2_ETCD, else from .cache/kube/bin/ in the repository,
// where `make kube-tools` (scripts/kube-tools.sh; make test runs it) builds
// them from the Go module proxy.
func FindTools() (Tools, error) {
	var tt Tools
	dir, dirErr := CacheDir()
	for _, b := range []struct {
		name, env string
		dst       *string
		version   []string
		want      *regexp.Regexp
	}{
		{"etcd", EnvEtcd, &tt.Etcd, []string{"--version"}, regexp.MustCompile(`(?m)^etcd Version: ` + regexp.QuoteMeta(Etcd) + `$`)},
		{"kube-apiserver", EnvAPIServer, &tt.APIServer, []string{"--version"}, regexp.MustCompile(`(?m)^Kubernetes ` + regexp.QuoteMeta(Kubernetes) + `$`)},
		{"kubectl", EnvKubectl, &tt.Kubectl, []string{"version", "--client"}, regexp.MustCompile(`(?m)^Client Version: ` + regexp.QuoteMeta(Kubernetes) + `$`)},
	} {
		build := fmt.Sprintf("`%s` (it builds kube-apiserver and kubectl %s and etcd %s from Go modules into .cache/kube/bin/; several minutes, once)", Build, Kubernetes, Etcd)
		path := os.Getenv(b.env)
		if path != "" {
			if _, err := os.Stat(path); err != nil {
				return Tools{}, missingError(fmt.Sprintf("no %s at %s ($%s): set %s to the %s binary, or unset it and run %s", b.name, path, b.env, b.env, b.name, build))
			}
		} else {
			if dirErr != nil {
				return Tools{}, missingError(fmt.Sprintf("no %s: $%s is unset and %v", b.name, b.env, dirErr))
			}
			path = filepath.Join(dir, b.name)
			if _, err := os.Stat(path); err != nil {
				return Tools{}, missingError(fmt.Sprintf("no %s at %s: run %s, or set %s to one", b.name, path, build, b.env))
			}
		}
		out, err := exec.Command(path, b.version...).CombinedOutput()
		if err != nil {
			return Tools{}, fmt.Errorf("%s %s: %v (%s); rebuild it with `%s`", path, strings.Join(b.version, " "), err, clip(string(out)), Build)
		}
		if !b.want.Match(out) {
			return Tools{}, fmt.Errorf("%s is not the pinned release (%s printed %q; want %s): rebuild it with `%s`, or set %s to one that is",
				path, strings.Join(b.version, " "), clip(string(out)), b.want, Build, b.env)
		}
		*b.dst = path
	}
	return tt, nil
}

// repoRoot is the nearest directory upward from the working directory
// whose go.mod declares this repository's module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && regexp.MustCompile(`(?m)^module jr2\.dev/boundary\s*$`).Match(b) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no repository root (a go.mod of module jr2.dev/boundary) above %s", wd)
		}
	}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
