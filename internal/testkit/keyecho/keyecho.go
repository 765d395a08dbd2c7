// Package keyecho is a test upstream that answers every request with the
// x-api-key it got, as is and in base64 and hex (a careless API's error
// message), and keeps each key it got. The tests that put the Custodian
// between a client and an upstream use it to see both sides: the value
// the upstream got, and whether any form of it came back to the client.
package keyecho

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
)

// Echo is the upstream's handler. Its zero value is ready; it is safe for
// concurrent requests and Take.
type Echo struct {
	mu  sync.Mutex
	got []string
}

// ServeHTTP keeps the request's x-api-key and echoes it in three forms.
func (e *Echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := r.Header.Get("X-Api-Key")
	e.mu.Lock()
	e.got = append(e.got, k)
	e.mu.Unlock()
	fmt.Fprintf(w, "invalid key %s (base64 %s, hex %s)\n", k, base64.StdEncoding.EncodeToString([]byte(k)), hex.EncodeToString([]byte(k)))
}

// Take returns the keys got since the last Take, in order, and forgets
// them.
func (e *Echo) Take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got
}
