// Package testkit holds no code of its own: its packages are the helpers
// of this repository's tests and benches — PKI made in code, the pinned
// Envoy, the API server and the node, the images, WebSocket and usage
// checks, the bench floors and goal rows.
//
// Invariant: no binary the project ships links a package of testkit, a
// test helper package (a name ending in "test") or client-go: the
// product's dependencies are what it runs. TestShippedBinariesLinkNoKit
// holds each shipped main package's `go list -deps` to that.
package testkit
