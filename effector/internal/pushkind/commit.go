package pushkind

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"jr2.dev/boundary/effector/internal/wire"
)

// commit is a commit object's text, split as git writes it: header lines
// (a continuation line begins with a space and belongs to the header
// before it), a blank line, the message. Signing rewrites the parents and
// adds one gpgsig header; everything else — the tree, the author, the
// committer, their dates, the encoding, a mergetag, the message — is kept
// byte for byte.
type commit struct {
	tree    string
	parents []string
	// headers are every other header, in order, each with its
	// continuation lines ("key value\n cont\n"), without an old signature.
	headers [][]byte
	message []byte
}

// signatureHeaders are dropped from a commit that is signed again.
var signatureHeaders = []string{"gpgsig", "gpgsig-sha256"}

// parseCommit reads `git cat-file commit` output. It refuses a commit
// whose tree or parent lines are not git's (they come first, in order).
func parseCommit(b []byte) (*commit, error) {
	head, msg, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		if !bytes.HasSuffix(b, []byte("\n")) {
			return nil, errors.New("a commit with no end to its header")
		}
		head, msg = b[:len(b)-1], nil
	}
	c := &commit{message: msg}
	lines := strings.Split(string(head), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		j := i
		for j+1 < len(lines) && strings.HasPrefix(lines[j+1], " ") {
			j++
		}
		full := strings.Join(lines[i:j+1], "\n") + "\n"
		cont := j > i
		i = j
		key, val, _ := strings.Cut(line, " ")
		switch {
		case key == "tree":
			if c.tree != "" || len(c.parents) > 0 || len(c.headers) > 0 || !wire.ValidSHA(val) || cont {
				return nil, errors.New("a commit whose tree line is not git's")
			}
			c.tree = val
		case key == "parent":
			if c.tree == "" || len(c.headers) > 0 || !wire.ValidSHA(val) || cont {
				return nil, errors.New("a commit whose parent lines are not git's")
			}
			c.parents = append(c.parents, val)
		case key == "":
			return nil, errors.New("a commit with an empty header line")
		default:
			if c.tree == "" {
				return nil, errors.New("a commit with no tree line first")
			}
			drop := false
			for _, s := range signatureHeaders {
				drop = drop || key == s
			}
			if !drop {
				c.headers = append(c.headers, []byte(full))
			}
		}
	}
	if c.tree == "" {
		return nil, errors.New("a commit with no tree")
	}
	return c, nil
}

// payload is the commit's text with the parents given: what is signed.
func (c *commit) payload(parents []string) []byte {
	var b bytes.Buffer
	b.WriteString("tree " + c.tree + "\n")
	for _, p := range parents {
		b.WriteString("parent " + p + "\n")
	}
	for _, h := range c.headers {
		b.Write(h)
	}
	b.WriteByte('\n')
	b.Write(c.message)
	return b.Bytes()
}

// withSignature is payload with sig as its gpgsig header, as git writes
// one: after the other headers, each line of sig after the first begun
// with a space.
func withSignature(payload, sig []byte) []byte {
	i := bytes.Index(payload, []byte("\n\n"))
	var b bytes.Buffer
	b.Write(payload[:i+1])
	b.WriteString("gpgsig")
	for _, line := range strings.Split(strings.TrimRight(string(sig), "\n"), "\n") {
		b.WriteString(" " + strings.TrimRight(line, "\r") + "\n")
	}
	b.Write(payload[i+1:])
	return b.Bytes()
}

// nextWorktreeCommit reads one answer of `git cat-file --batch` from b: a
// commit whose bytes hash to its name gives that name; anything else
// (missing, another type, a short or altered body) gives ok false.
func nextWorktreeCommit(b []byte) (name string, rest []byte, ok bool) {
	head, body, found := bytes.Cut(b, []byte("\n"))
	if !found {
		return "", nil, false
	}
	f := strings.Fields(string(head))
	if len(f) != 3 || f[1] != "commit" || !wire.ValidSHA(f[0]) {
		return "", nil, false
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 || n+1 > len(body) || body[n] != '\n' {
		return "", nil, false
	}
	h := sha1.New()
	fmt.Fprintf(h, "commit %d\x00", n)
	h.Write(body[:n])
	if hex.EncodeToString(h.Sum(nil)) != f[0] {
		return "", nil, false
	}
	return f[0], body[n+1:], true
}
