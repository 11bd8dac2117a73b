package syncer

import (
	"context"
	"errors"
	"testing"
)

// The guard is closed until a check accepts management, and again after every new connection
// made since that check started; a write then waits for one check.
func TestConnGuard(t *testing.T) {
	g := newConnVerifier()
	if !errors.Is(g.err(), ErrIdentityUnverified) {
		t.Fatal("open before any check")
	}
	checks := 0
	accept := true
	g.verify = func(context.Context) {
		checks++
		snap := g.snapshot()
		if accept {
			g.accepted(snap)
		} else {
			g.refused()
		}
	}
	if err := g.ensure(context.Background()); err != nil || checks != 1 {
		t.Fatalf("ensure: %v after %d checks, want open after 1", err, checks)
	}
	if err := g.ensure(context.Background()); err != nil || checks != 1 {
		t.Fatalf("an open guard checked again: %v, %d checks", err, checks)
	}
	// A connection made after the check closes it; the next write checks once.
	g.dials.Add(1)
	if !errors.Is(g.err(), ErrIdentityUnverified) {
		t.Fatal("open after a new connection")
	}
	if err := g.ensure(context.Background()); err != nil || checks != 2 {
		t.Fatalf("after a dial: %v, %d checks", err, checks)
	}
	// A connection made while a check runs keeps it closed: the check may have raced it.
	snap := g.snapshot()
	g.dials.Add(1)
	g.accepted(snap)
	if !errors.Is(g.err(), ErrIdentityUnverified) {
		t.Fatal("a check that started before a connection opened the guard for it")
	}
	// A refusal keeps it closed.
	accept = false
	if err := g.ensure(context.Background()); !errors.Is(err, ErrIdentityUnverified) {
		t.Fatalf("refused identity: %v", err)
	}
}
