// Package contract holds the words every part of jr2 boundary must read
// the same way: what a host name, a host and a target are (the one
// grammar), how a stand-in is spelled, the token's name, where a target's
// leaf is written, and the tables of header and variable names the
// manifest, a run's policy and the engine each refuse or treat apart.
//
// Invariant: each of these is defined here once, and every reader — the
// engine, the manifest, custodian serve, the contained run's policy, DNS,
// SNI and mediator, the Effector — calls it; a place may refuse more for a
// reason of its own (a contained run never dials an IP literal), never
// accept more. It decides nothing about a credential: that is the
// engine's (package filter).
package contract
