package main

import (
	"io"
	"net/http"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
)

// roundTrip sends req and returns the status, the body and the signature.
func roundTrip(t testing.TB, req *http.Request) (int, []byte, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get(wire.HeaderSignature)
}
