package broker

import (
	"encoding/hex"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/policy"
)

// TestChildEnvWithholdsAValueInAName: a runner variable whose name (not
// its value) holds a form of a held value is withheld from the child, as
// one whose value does; the others pass.
func TestChildEnvWithholdsAValueInAName(t *testing.T) {
	const value = "Qm7Xw2Lp9Rt4Vz8Kc3Nb6Hs1Jd5Fg0"
	pol, err := policy.Parse([]byte(`allow_hosts = ["api.example.com"]
[secrets]
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }
`))
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"EXAMPLE_TOKEN=" + value, "KEEP=1"}
	b, err := New(pol, environ)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X_" + value, "X_" + hex.EncodeToString([]byte(value)), value + "_Y"} {
		env, _ := b.ChildEnv(append(environ, name+"=1"), "http://10.0.0.1:8080", "/ca.pem")
		joined := strings.Join(env, "\n")
		if strings.Contains(joined, name) || !strings.Contains(joined, "KEEP=1") {
			t.Errorf("%q: the child's environment %q", name, env)
		}
	}
}
