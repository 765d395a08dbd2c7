//go:build jr2bench

package main

// Only a binary built with -tags jr2bench (make bench builds one) answers
// the harness's request for its allocation counters; the product's binary
// does not hold the package at all.
import _ "jr2.dev/boundary/internal/testkit/benchstats"
