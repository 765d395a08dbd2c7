package filter

import (
	"bytes"
	"encoding/binary"
	"strings"

	"jr2.dev/boundary/internal/contract"
)

// hinfo is what the request rules need of one header's name, read once:
// its lowercase spelling, whether it is a credential header (and which),
// and whether it is host, range or if-range, holds '_', or may hold a
// stand-in. scanHeaders fills one per header, on the caller's stack.
type hinfo struct {
	lo, hi int32 // the lowercase name is arena[lo:hi]; lo < 0: not there
	cred   int32 // index in credList, or -1
	flags  uint8
}

const (
	fHost       uint8 = 1 << iota // the name is host
	fRange                        // range
	fIfRange                      // if-range
	fUnderscore                   // the name holds '_' (rule 2)
	fFold                         // the name may hold a stand-in in some case
)

var standInPrefixBytes = []byte(contract.StandInPrefix)

// scanHeaders appends hs's hinfo to info. An ASCII name is lowered into
// arena while it has room; another name is judged as the rules always did
// (strings.EqualFold for host, range and if-range, strings.ToLower for the
// credential table) and is searched for a stand-in in full.
func (e *Engine) scanHeaders(hs []Header, info []hinfo, arena []byte) []hinfo {
	pos := 0
	for _, h := range hs {
		in := hinfo{lo: -1, cred: -1}
		if n, seen, ok := lowerASCII(arena[pos:], h.Name); ok {
			in.lo, in.hi = int32(pos), int32(pos+n)
			if seen&seenUnderscore != 0 {
				in.flags |= fUnderscore
			}
			name := arena[pos : pos+n]
			pos += n
			switch string(name) {
			case "host":
				in.flags |= fHost
			case "range":
				in.flags |= fRange
			case "if-range":
				in.flags |= fIfRange
			}
			if e.mayBeCred(name) {
				if c, found := e.credIdx[string(name)]; found {
					in.cred = int32(c)
				}
			}
			if seen&seenJ != 0 && (bytes.Contains(name, standInPrefixBytes) || e.shaped && bytes.Contains(name, shapedMarkLCBytes)) {
				in.flags |= fFold
			}
		} else {
			in.flags |= fFold
			if strings.IndexByte(h.Name, '_') >= 0 {
				in.flags |= fUnderscore
			}
			if c, found := e.credIdx[strings.ToLower(h.Name)]; found {
				in.cred = int32(c)
			}
			for _, k := range [...]struct {
				name string
				flag uint8
			}{{"host", fHost}, {"range", fRange}, {"if-range", fIfRange}} {
				if strings.EqualFold(h.Name, k.name) {
					in.flags |= k.flag
				}
			}
		}
		info = append(info, in)
	}
	return info
}

// lowerASCII writes name in ASCII lowercase into dst, and reports which
// of '_' (rule 2) and 'j' (a stand-in's first byte) it holds; ok is false
// when name is not ASCII or does not fit. Eight bytes at a time.
func lowerASCII(dst []byte, name string) (n int, seen uint8, ok bool) {
	if len(name) > len(dst) {
		return 0, 0, false
	}
	dst = dst[:len(name)]
	var under, jay uint64
	i := 0
	word := func(at int) bool {
		w := uint64(name[at]) | uint64(name[at+1])<<8 | uint64(name[at+2])<<16 | uint64(name[at+3])<<24 |
			uint64(name[at+4])<<32 | uint64(name[at+5])<<40 | uint64(name[at+6])<<48 | uint64(name[at+7])<<56
		if w&hi8 != 0 {
			return false
		}
		// Each byte is below 0x80, so no sum carries into the next one:
		// the high bit of b+(0x80-'A') says b >= 'A', of b+(0x80-'Z'-1)
		// says b > 'Z'.
		upper := (w + lo8*(0x80-'A')) &^ (w + lo8*(0x80-'Z'-1)) & hi8
		w |= upper >> 2
		under |= zeroByte(w ^ lo8*'_')
		jay |= zeroByte(w ^ lo8*'j')
		binary.LittleEndian.PutUint64(dst[at:], w)
		return true
	}
	for ; i+8 <= len(name); i += 8 {
		if !word(i) {
			return 0, 0, false
		}
	}
	if i > 0 && i < len(name) {
		// the last eight bytes again, overlapping: lowering is idempotent
		if !word(len(name) - 8) {
			return 0, 0, false
		}
		i = len(name)
	}
	for ; i < len(name); i++ {
		c := name[i]
		if c >= 0x80 {
			return 0, 0, false
		}
		c = lowerByte(c)
		if c == '_' {
			under = 1
		}
		if c == 'j' {
			jay = 1
		}
		dst[i] = c
	}
	if under != 0 {
		seen |= seenUnderscore
	}
	if jay != 0 {
		seen |= seenJ
	}
	return len(name), seen, true
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// zeroByte is non-zero exactly when a byte of w (each below 0x80) is 0.
func zeroByte(w uint64) uint64 { return (w - lo8) &^ w & hi8 }

const (
	seenUnderscore uint8 = 1 << iota
	seenJ
)

// mayBeCred is false when no credential header name has name's first byte
// and length (credFirst, built in New): most headers are judged without a
// map lookup.
func (e *Engine) mayBeCred(name []byte) bool {
	return len(name) > 0 && e.credFirst[name[0]]&(1<<min(len(name), 63)) != 0
}

// nameIs reports whether header h, of hinfo in, is named want (lowercase):
// by its lowercase spelling, else by strings.EqualFold.
func nameIs(arena []byte, in hinfo, h Header, want string) bool {
	if in.lo >= 0 {
		return string(arena[in.lo:in.hi]) == want
	}
	return strings.EqualFold(h.Name, want)
}
