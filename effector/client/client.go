// Package client is the Orchestrator's side of the Effector's wire: derive
// a placement's key, sign a request, verify an answer, start an effect on
// one replica and find it again on every replica when the one that held it
// is gone.
//
// # Invariants
//
//   - An answer is an outcome only when its signature verifies under the
//     key, over this request's method, target and nonce. An unsigned or
//     wrongly signed answer is never decoded: to a start it is an answer
//     lost, to a poll a replica gone, and every replica is asked.
//   - A start is sent to the next replica only when the last one was never
//     reached (nothing of the request was written) or answered, signed, that
//     it is stopping. So a start is never sent twice where it may have run.
//   - The key is used for HMAC only; nothing here logs it, or a request.
//
// # Not covered
//
// Which replica addresses exist is the caller's (Addresses); so is what to
// do with ErrLost (the ADR: settle unknown, never send again).
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"jr2.dev/boundary/effector/internal/sendtrace"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/effectorkey"
)

// The wire's shapes, for callers of this package.
type (
	Start   = wire.Start
	HTTP    = wire.HTTP
	Command = wire.Command
	Part    = wire.Part
	Value   = wire.Value
	Auth    = wire.Auth
	Body    = wire.Body
	State   = wire.State
	Outcome = wire.Outcome
	Replica = wire.Replica
)

// Parts of a value.
var (
	Text       = wire.Text
	Secret     = wire.Secret
	SecretPath = wire.SecretPath
)

// DeriveKey is a placement's key: HMAC-SHA256(signingKey, "effector:" +
// placement). signingKey is the signing-key file's bytes with one trailing
// newline taken off (effectorkey.TrimNewline).
func DeriveKey(signingKey []byte, placement string) []byte {
	return effectorkey.Derive(signingKey, placement)
}

// NewNonce returns 22 random characters of [A-Za-z0-9_-].
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Sign sets X-Jr2-Time, X-Jr2-Nonce and X-Jr2-Signature on req, signed for
// the replica at address (POD_IP:port) over body, which must be what req
// sends. The target signed is req.URL.RequestURI().
func Sign(req *http.Request, key []byte, address string, body []byte, now time.Time, nonce string) {
	t := strconv.FormatInt(now.UnixMilli(), 10)
	req.Header.Set(wire.HeaderTime, t)
	req.Header.Set(wire.HeaderNonce, nonce)
	req.Header.Set(wire.HeaderSignature, wire.Sign(key, wire.RequestLines(req.Method, address, req.URL.RequestURI(), t, nonce, body)))
}

// ErrUnsigned is an answer whose signature is missing or does not verify.
var ErrUnsigned = errors.New("effector: the answer is not signed by the placement's key")

// VerifyAnswer checks an answer's signature against the request it
// answers.
func VerifyAnswer(key []byte, method, target, nonce string, status int, body []byte, sig string) error {
	if sig == "" || !wire.Verify(key, wire.ResponseLines(status, method, target, nonce, body), sig) {
		return ErrUnsigned
	}
	return nil
}

// Answer is one verified answer.
type Answer struct {
	Status int
	// State is set for 200, 202 and 404; Error for the other statuses.
	State *wire.State
	Error *wire.Error
	// Address is the replica that answered.
	Address string
}

// Errors of a request.
var (
	// ErrNotReached: nothing of the request was written; it started nothing.
	ErrNotReached = errors.New("effector: the replica was not reached")
	// ErrLost: the request may have arrived and no signed answer came.
	ErrLost = errors.New("effector: the request may have arrived and no signed answer came")
	// ErrDefect: a signed answer that is not the wire's shape (a jr2 defect).
	ErrDefect = errors.New("effector: a signed answer is not the wire's shape")
	// ErrNotStarted: no replica was reached, or every one was stopping.
	ErrNotStarted = errors.New("effector: no replica took the start; nothing started")
	// ErrTooLarge: the start is longer than a replica reads; it was not
	// sent (the ADR settles an http start refused).
	ErrTooLarge = errors.New("effector: the start is too large to send")
	// ErrUnknownEffect: asking every replica found no one that holds the
	// effect, or no signed answer. The ADR settles it unknown.
	ErrUnknownEffect = errors.New("effector: no replica answered for the effect")
)

// Client speaks to a placement's replicas. Its fields are read, never
// changed, by its methods, which may be called concurrently.
type Client struct {
	// Key is the placement's key.
	Key []byte
	// Addresses lists every replica's POD_IP:port (a headless Service's
	// addresses, a stopping replica among them).
	Addresses func(ctx context.Context) ([]string, error)
	// HTTP sends the requests; nil means a client that reads no proxy from
	// the environment.
	HTTP *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Do sends one signed request to the replica at address and verifies the
// answer. It returns ErrNotReached, ErrLost (wrapping ErrUnsigned when an
// answer came unsigned), ErrDefect, or the verified answer.
func (c *Client) Do(ctx context.Context, address, method, id string, body []byte) (*Answer, error) {
	target := "/effects/" + id
	req, err := http.NewRequestWithContext(ctx, method, "http://"+address+target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotReached, err)
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	nonce := NewNonce()
	Sign(req, c.Key, address, body, c.now(), nonce)
	req, sent := sendtrace.Trace(req)
	resp, err := c.http().Do(req)
	if err != nil {
		if !sent() {
			return nil, fmt.Errorf("%w: %s", ErrNotReached, sendtrace.Reason(err))
		}
		return nil, fmt.Errorf("%w: %s", ErrLost, sendtrace.Reason(err))
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrLost, sendtrace.Reason(err))
	}
	if err := VerifyAnswer(c.Key, method, target, nonce, resp.StatusCode, got, resp.Header.Get(wire.HeaderSignature)); err != nil {
		return nil, fmt.Errorf("%w: %w (status %d)", ErrLost, err, resp.StatusCode)
	}
	a := &Answer{Status: resp.StatusCode, Address: address}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNotFound:
		a.State, err = wire.DecodeState(got)
	default:
		a.Error, err = wire.DecodeError(got)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDefect, err)
	}
	return a, nil
}

// Start sends a start to one replica, and to the next only when one was
// never reached or answered that it is stopping. When the start may have
// arrived and no signed answer came, every replica is asked for the id.
// The answer is the replica's: 202 running, 200 attached, 400 malformed.
func (c *Client) Start(ctx context.Context, id string, s *wire.Start) (*Answer, error) {
	body, err := wire.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(body) > wire.MaxBody {
		return nil, fmt.Errorf("%w: the start is %d bytes, more than the %d a replica reads", ErrTooLarge, len(body), wire.MaxBody)
	}
	addrs, err := c.Addresses(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
	}
	for _, addr := range addrs {
		a, err := c.Do(ctx, addr, http.MethodPost, id, body)
		switch {
		case errors.Is(err, ErrNotReached):
			continue
		case err == nil && a.Status == http.StatusServiceUnavailable && a.Error != nil && a.Error.Error == "stopping":
			continue
		case err == nil || errors.Is(err, ErrDefect):
			return a, err
		}
		return c.locate(ctx, id, addrs)
	}
	return nil, ErrNotStarted
}

// Poll asks the replica at address for the effect (a long poll); when
// that replica is gone, does not hold it, or answers unsigned, it asks
// every replica.
func (c *Client) Poll(ctx context.Context, id, address string) (*Answer, error) {
	a, err := c.Do(ctx, address, http.MethodGet, id, nil)
	if err == nil && a.Status == http.StatusOK {
		return a, nil
	}
	if errors.Is(err, ErrDefect) {
		return nil, err
	}
	addrs, aerr := c.Addresses(ctx)
	if aerr != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnknownEffect, aerr)
	}
	return c.locate(ctx, id, addrs)
}

// Stop sends a DELETE to the replica at address.
func (c *Client) Stop(ctx context.Context, id, address string) (*Answer, error) {
	return c.Do(ctx, address, http.MethodDelete, id, nil)
}

// locate polls every replica at once and returns the first signed answer
// of one that holds the effect.
func (c *Client) locate(ctx context.Context, id string, addrs []string) (*Answer, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan *Answer, len(addrs))
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := c.Do(ctx, addr, http.MethodGet, id, nil)
			if err == nil && a.Status == http.StatusOK {
				found <- a
			}
		}()
	}
	go func() { wg.Wait(); close(found) }()
	if a, ok := <-found; ok {
		return a, nil
	}
	return nil, ErrUnknownEffect
}
