package efftest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects output written from many goroutines (a server's log, a
// process's stdout).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times sub occurs in what was written.
func (l *Buffer) Count(sub string) int { return strings.Count(l.String(), sub) }
