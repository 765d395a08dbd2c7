package filter_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
)

// scriptedEndpoint is a token endpoint that answers each fetch with the
// next of its answers (the last again once they run out): the test
// chooses every expires_in and every token's length, as a misbehaving
// endpoint would.
type scriptedEndpoint struct {
	mu      sync.Mutex
	answers []map[string]any
	hits    int
}

func (se *scriptedEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	se.mu.Lock()
	a := se.answers[min(se.hits, len(se.answers)-1)]
	se.hits++
	se.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

func (se *scriptedEndpoint) fetches() int {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.hits
}

// scriptedLive is a Live whose OAuth secret API (client-credentials)
// mints from answers, on clk.
func scriptedLive(t *testing.T, clk *mintClock, answers ...map[string]any) (*oauthLive, *scriptedEndpoint) {
	t.Helper()
	se := &scriptedEndpoint{answers: answers}
	srv := httptest.NewTLSServer(http.HandlerFunc(se.serve))
	t.Cleanup(srv.Close)
	o := newOAuthLiveBeside(t, &tokenEndpoint{srv: srv}, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret}, false, clk)
	return o, se
}

// randomToken is a token of n bytes an endpoint could issue: base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

func answer(tok string, expiresIn int) map[string]any {
	return map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": expiresIn}
}

// TestOAuthMintFloor: whatever expires_in the endpoint answers, the next
// mint is scheduled no sooner than nextMint of MinLife (50 s): a token of
// a 1-second life does not make the minter fetch every second (each fetch
// builds a whole new engine). The schedule is read from the waits the
// minter asks of its timer, and the fetches are counted: one per wait
// granted, never more.
func TestOAuthMintFloor(t *testing.T) {
	floor := filter.MinLife - 10*time.Second
	for _, tc := range []struct {
		expiresIn int
		lo, hi    time.Duration // the wait asked
	}{
		{1, floor, floor},
		{10, floor, floor},
		{59, floor, floor},
		{60, floor, floor},
		{61, floor, 51 * time.Second},
		{3600, 3295 * time.Second, 3300 * time.Second},
	} {
		t.Run(fmt.Sprint(tc.expiresIn), func(t *testing.T) {
			clk := newMintClock()
			o, se := scriptedLive(t, clk, answer(randomToken(40), tc.expiresIn))
			for i := 1; i <= 3; i++ {
				if line := <-o.minted; line != "action mint result ok secret API" {
					t.Fatalf("mint %d: %s", i, line)
				}
				if w := clk.next(t); w < tc.lo || w > tc.hi {
					t.Fatalf("expires_in %d: the next mint is asked after %v, want %v to %v", tc.expiresIn, w, tc.lo, tc.hi)
				}
				if n := se.fetches(); n != i {
					t.Fatalf("%d fetches after %d waits", n, i-1)
				}
				if i < 3 {
					clk.tick()
				}
			}
		})
	}
}

// TestOAuthExpiredToken: a token the endpoint says is already expired
// (expires_in not above 0) is refused as token-refused, naming why; the
// minter backs off (1 s, then 2 s …), and the refusals after the first
// build no engine.
func TestOAuthExpiredToken(t *testing.T) {
	clk := newMintClock()
	tok := randomToken(40)
	o, _ := scriptedLive(t, clk, answer(tok, -5))
	var first *filter.Engine
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if line := <-o.minted; line != "action mint result refused secret API reason token-refused" {
			t.Fatalf("mint: %s", line)
		}
		if w := clk.next(t); w != want {
			t.Fatalf("refusal %d: the next try after %v, want %v", i, w, want)
		}
		if i == 0 {
			first = o.live.Engine()
		} else if o.live.Engine() != first {
			t.Fatalf("refusal %d built a new engine", i)
		}
		if i < 2 {
			clk.tick()
		}
	}
	d := o.live.Engine().DecideRequest(boundT, bearerReq())
	want := "jr2 custodian: the token endpoint of API answered an access token already expired"
	if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Reason != filter.ReasonTokenRefused || d.Reply.Body != want || d.Set != nil {
		t.Fatalf("%+v, want 502 %q", d.Reply, want)
	}
}

// TestOAuthTokenTooLong: an access token, or a refresh token the endpoint
// rotates to, longer than MaxTokenLen is refused as token-refused naming
// the cap (never the token, nor its length), no engine scrubs it, and the
// minter backs off; a token of MaxTokenLen is taken.
func TestOAuthTokenTooLong(t *testing.T) {
	long := randomToken(filter.MaxTokenLen + 1)
	rotatedLong := answer(randomToken(40), 3600)
	rotatedLong["refresh_token"] = long
	for _, tc := range []struct {
		name string
		a    map[string]any
	}{
		{"access", answer(long, 3600)},
		{"refresh", rotatedLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newMintClock()
			o, _ := scriptedLive(t, clk, tc.a)
			if line := <-o.minted; line != "action mint result refused secret API reason token-refused" {
				t.Fatalf("mint: %s", line)
			}
			if w := clk.next(t); w != time.Second {
				t.Errorf("the next try after %v, want the first backoff", w)
			}
			d := o.live.Engine().DecideRequest(boundT, bearerReq())
			want := fmt.Sprintf("jr2 custodian: the token endpoint of API answered a token longer than %d bytes", filter.MaxTokenLen)
			if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Reason != filter.ReasonTokenRefused || d.Reply.Body != want || d.Set != nil {
				t.Fatalf("%+v, want 502 %q", d.Reply, want)
			}
			if s := o.live.Engine().Scrubber().String(long); s != long {
				t.Errorf("the engine holds the refused token")
			}
			if strings.Contains(o.log(), long[:32]) {
				t.Errorf("the log holds the token")
			}
		})
	}
	t.Run("at the cap", func(t *testing.T) {
		tok := randomToken(filter.MaxTokenLen)
		o, _ := scriptedLive(t, newMintClock(), answer(tok, 3600))
		if line := <-o.minted; line != "action mint result ok secret API" {
			t.Fatalf("mint: %s", line)
		}
		if d := o.live.Engine().DecideRequest(boundT, bearerReq()); d.Reply != nil || d.Set[0].Value != "Bearer "+tok {
			t.Fatalf("a token of %d bytes is not swapped in: %+v", filter.MaxTokenLen, d.Reply)
		}
	})
}

// TestOAuthRetiredCap: each new token retires the one it replaces, and
// every engine scrubs the retired ones; however many the endpoint hands
// out, an engine scrubs at most the newest four beside the current one.
// Here each token lives an hour, so each one retired is still live: the
// newest four are scrubbed, the older are not.
func TestOAuthRetiredCap(t *testing.T) {
	clk := newMintClock()
	var answers []map[string]any
	for range 9 {
		answers = append(answers, answer(randomToken(1200), 3600))
	}
	o, _ := scriptedLive(t, clk, answers...)
	for i := range answers {
		if line := <-o.minted; line != "action mint result ok secret API" {
			t.Fatalf("mint %d: %s", i, line)
		}
		clk.next(t)
		if n, want := filter.SpentOf(o.live, "API"), min(i, 4); n != want {
			t.Fatalf("after mint %d: %d retired tokens, want %d", i, n, want)
		}
		if i < len(answers)-1 {
			clk.tick()
		}
	}
	sc := o.live.Engine().Scrubber()
	for i, a := range answers {
		tok := a["access_token"].(string)
		if scrubbed := sc.String(tok) == "[secret:API]"; scrubbed != (i >= len(answers)-5) {
			t.Errorf("token %d of %d: scrubbed %v", i, len(answers), scrubbed)
		}
	}
}

// TestOAuthRetiredLife: a token replaced within its life is scrubbed
// until its life ends, not for the whole grace window: past its expiry
// every bound host refuses it, and the engine drops it (Expire), so a
// short-lived token endpoint never piles up retired tokens.
func TestOAuthRetiredLife(t *testing.T) {
	clk := newMintClock()
	first, second := randomToken(40), randomToken(40)
	o, _ := scriptedLive(t, clk, answer(first, 120), answer(second, 3600))
	<-o.minted
	clk.next(t)
	clk.tick()
	if line := <-o.minted; line != "action mint result ok secret API" {
		t.Fatalf("mint: %s", line)
	}
	clk.next(t)
	scrubbed := func(v string) bool { return o.live.Engine().Scrubber().String(v) == "[secret:API]" }
	if !scrubbed(first) || filter.SpentOf(o.live, "API") != 1 {
		t.Fatalf("the replaced token is not retired")
	}
	if next := o.live.Expire(); next.Sub(clk.now()) > 2*time.Minute {
		t.Errorf("Expire is next called in %v, want within the first token's life", next.Sub(clk.now()))
	}
	clk.skip.Store(int64(121 * time.Second)) // past the first token's life, well within the grace
	o.live.Expire()
	if scrubbed(first) || filter.SpentOf(o.live, "API") != 0 {
		t.Errorf("the first token is still scrubbed past its life")
	}
	if !scrubbed(second) {
		t.Errorf("the current token is not scrubbed")
	}
}
