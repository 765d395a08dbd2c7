// Package manifesttest generates held manifests for benchmarks: a given
// number of bound targets, two per secret, each secret with a path.
//
// Invariant: output depends on its argument alone, and holds names and
// bindings only, like every manifest.
package manifesttest

import (
	"encoding/json"
	"fmt"
)

// Generate returns a manifest with targets/2 secrets, each bound to two
// hosts of its own (one on 443, one on 8443), so Generate(400) is 200
// secrets over 400 targets.
func Generate(targets int) []byte {
	type secret struct {
		Name  string   `json:"name"`
		Hosts []string `json:"hosts"`
		Paths []string `json:"paths"`
	}
	m := struct {
		Pod          string   `json:"pod"`
		Orchestrator string   `json:"orchestrator"`
		Sandbox      string   `json:"sandbox"`
		Secrets      []secret `json:"secrets"`
	}{Pod: "ws-bench", Orchestrator: "jr2-orchestrator.jr2.svc:4000", Sandbox: "ws-bench"}
	for i := 0; i < targets/2; i++ {
		m.Secrets = append(m.Secrets, secret{
			Name:  fmt.Sprintf("SECRET_%03d", i),
			Hosts: []string{fmt.Sprintf("svc-%03d.example.com", 2*i), fmt.Sprintf("svc-%03d.example.com:8443", 2*i+1)},
			Paths: []string{"/v1/"},
		})
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // a fixed struct of strings always marshals
	}
	return b
}
