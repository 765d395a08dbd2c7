// Package valuedir is the value directory every holder of values reads:
// the Custodian's (through the engine's Live) and the Effector's secrets.
// It reads a set of values under one set of rules (Check), follows the
// directory as the kubelet rotates it (WatchDir), and keeps the values a
// rotation replaced scrubbable for a grace window (Retired).
//
// Invariants:
//   - A set is taken only as it was on disk at one moment: a read is
//     repeated until the directory's stamp before and after it are equal.
//   - A value is refused, naming the secret and the rule's word, when it is
//     empty, shorter than scrub.MinLen, below the guess floor, or (a
//     header's value) not printable ASCII; no refusal carries a value, its
//     length or a path.
//   - It decides nothing about where a value may go: that is the engine's.
package valuedir
