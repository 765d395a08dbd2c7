//go:build linux && !race

package e2e

const raceEnabled = false
