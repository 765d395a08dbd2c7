// Package classlock keeps the two classes of Effect that must never
// overlap apart: a credentialed command, whose child could reach a
// gpg-agent's socket, and a push that signs with GPG (ADR-0068, rule 2).
//
// Invariant: while any holder of one class is live, no holder of the
// other class is; a waiter whose context ends before it is admitted never
// holds the lock.
//
// # Mechanism
//
// Many holders of one class hold the lock together. Waiters queue in
// arrival order; the head is admitted when no holder is live or the live
// holders are of its class, and the waiters of the same class right behind
// it with it. A newcomer of the live class queues behind a waiter of the
// other class, so neither class starves the other. "Live" is the caller's
// to end: release only after the Effect's settle loop (package reap), so no
// descendant of a command exists when a gpg-agent starts.
//
// A Lock is safe for concurrent use. The zero value is an unlocked Lock.
package classlock

import (
	"context"
	"fmt"
	"sync"
)

// Class is a kind of Effect that holds the lock.
type Class int

// The two classes.
const (
	Command Class = iota + 1 // a credentialed command
	GPG                      // a push that signs with sign.gpgKey
)

func (c Class) String() string {
	switch c {
	case Command:
		return "command"
	case GPG:
		return "gpg"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

func (c Class) other() Class {
	if c == Command {
		return GPG
	}
	return Command
}

// Lock is one Sandbox Effector's class lock.
type Lock struct {
	mu      sync.Mutex
	live    Class // the class of the holders; 0 when there is none
	holders int
	queue   []*waiter
}

type waiter struct {
	class    Class
	admitted bool
	ready    chan struct{}
}

// Acquire waits until c may run, and returns the function that ends the
// hold (safe to call more than once). It fails, holding nothing, when ctx
// ends first, or has ended already: a waiter past its Effect's timeout
// never runs late.
func (l *Lock) Acquire(ctx context.Context, c Class) (release func(), err error) {
	if c != Command && c != GPG {
		return nil, fmt.Errorf("classlock: %v is not a class", c)
	}
	if err := ctx.Err(); err != nil {
		return nil, l.late(c, err)
	}
	l.mu.Lock()
	if len(l.queue) == 0 && (l.holders == 0 || l.live == c) {
		l.holders++
		l.live = c
		l.mu.Unlock()
		return l.releaser(), nil
	}
	w := &waiter{class: c, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	select {
	case <-w.ready:
		if err := ctx.Err(); err != nil {
			// Admitted as the deadline passed: it must not run.
			l.releaser()()
			return nil, l.late(c, err)
		}
		return l.releaser(), nil
	case <-ctx.Done():
		l.mu.Lock()
		if w.admitted {
			l.mu.Unlock()
			l.releaser()()
			return nil, l.late(c, ctx.Err())
		}
		for i, q := range l.queue {
			if q == w {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				break
			}
		}
		// It may have been the head that held back those behind it.
		l.admit()
		l.mu.Unlock()
		return nil, l.late(c, ctx.Err())
	}
}

func (l *Lock) late(c Class, err error) error {
	return fmt.Errorf("classlock: the %s effect waited past its deadline for %s effects to end: %w", c, c.other(), err)
}

func (l *Lock) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.holders--
			if l.holders == 0 {
				l.live = 0
			}
			l.admit()
		})
	}
}

// admit lets in the queue's head and the waiters of its class right
// behind it, while they may run. l.mu is held.
func (l *Lock) admit() {
	for len(l.queue) > 0 {
		w := l.queue[0]
		if l.holders > 0 && l.live != w.class {
			return
		}
		l.queue = l.queue[1:]
		l.holders++
		l.live = w.class
		w.admitted = true
		close(w.ready)
	}
}

// Live reports the class of the live holders and how many there are.
func (l *Lock) Live() (Class, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live, l.holders
}
