package filter

import (
	"strconv"
	"strings"
	"testing"
)

// The held-budget answers name the bound they spent; they are constants,
// so the bound is spelled twice and held equal here.
func TestHeldBudgetTexts(t *testing.T) {
	if maxHeldBodiesText != strconv.Itoa(MaxHeldBodies) {
		t.Fatalf("maxHeldBodiesText %q, MaxHeldBodies %d: make them agree", maxHeldBodiesText, MaxHeldBodies)
	}
	for _, text := range []string{HeldBodyText, HeldChunkText} {
		if !strings.Contains(text, strconv.Itoa(MaxHeldBodies)+" bytes") {
			t.Errorf("%q does not name the bound", text)
		}
	}
	var e Engine
	d := e.HeldBudgetSpent("t")
	if d.Reply == nil || d.Reply.Status != 503 || d.Reply.Body != "jr2 custodian: "+HeldBodyText {
		t.Fatalf("HeldBudgetSpent: %+v", d.Reply)
	}
}
