package faults

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// scripted is a Fault whose Inject and Recover do what a test says; it exercises the lifecycle's rules,
// which do not depend on what a fault does.
type scripted struct {
	inject, recover   func(ctx context.Context) error
	injects, recovers int
	recoverCtxErr     error
}

func (f *scripted) Name() string                     { return "scripted" }
func (f *scripted) Available(clusters.Cluster) error { return nil }
func (f *scripted) Inject(ctx context.Context) error {
	f.injects++
	if f.inject != nil {
		return f.inject(ctx)
	}
	return nil
}
func (f *scripted) Recover(ctx context.Context) error {
	f.recovers++
	f.recoverCtxErr = ctx.Err()
	if f.recover != nil {
		return f.recover(ctx)
	}
	return nil
}

func TestLifecycleRefusesIllegalTransitions(t *testing.T) {
	ctx := context.Background()
	f := &scripted{}
	l := NewLifecycle(f)
	if err := l.Recover(ctx); !errors.Is(err, ErrIllegal) {
		t.Fatalf("Recover before Inject: %v, want ErrIllegal", err)
	}
	if err := l.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Inject(ctx); !errors.Is(err, ErrIllegal) {
		t.Fatalf("second Inject: %v, want ErrIllegal", err)
	}
	if l.State() != Injected {
		t.Fatalf("state %s", l.State())
	}
	if err := l.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Recover(ctx); !errors.Is(err, ErrIllegal) {
		t.Fatalf("second Recover: %v, want ErrIllegal", err)
	}
	if err := l.Inject(ctx); !errors.Is(err, ErrIllegal) {
		t.Fatalf("Inject after Recover: %v, want ErrIllegal", err)
	}
	if f.injects != 1 || f.recovers != 1 || l.State() != Recovered {
		t.Fatalf("injects %d recovers %d state %s", f.injects, f.recovers, l.State())
	}
}

// TestLifecycleRecoversAfterFailedOrPanickingInject: what Inject got done before failing is undone.
func TestLifecycleRecoversAfterFailedOrPanickingInject(t *testing.T) {
	for name, inject := range map[string]func(context.Context) error{
		"error": func(context.Context) error { return errors.New("half done") },
		"panic": func(context.Context) error { panic("boom") },
	} {
		t.Run(name, func(t *testing.T) {
			f := &scripted{inject: inject}
			l := NewLifecycle(f)
			err := l.Inject(context.Background())
			if err == nil {
				t.Fatal("Inject succeeded")
			}
			if name == "panic" && !strings.Contains(err.Error(), "panic: boom") {
				t.Fatalf("panic not reported: %v", err)
			}
			if err := l.Recover(context.Background()); err != nil || f.recovers != 1 {
				t.Fatalf("Recover after a failed Inject: %v (recovers %d)", err, f.recovers)
			}
		})
	}
}

// TestLifecycleRecoverGetsAFreshContext: an interrupted run still heals.
func TestLifecycleRecoverGetsAFreshContext(t *testing.T) {
	f := &scripted{recover: func(context.Context) error { panic("recover panics") }}
	l := NewLifecycle(f)
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := l.Recover(ctx)
	if f.recoverCtxErr != nil {
		t.Fatalf("Recover ran on a cancelled context: %v", f.recoverCtxErr)
	}
	if err == nil || !strings.Contains(err.Error(), "recover panics") {
		t.Fatalf("a panic in Recover was not turned into an error: %v", err)
	}
	if l.State() != Recovered {
		t.Fatalf("state %s after a panicking Recover", l.State())
	}
}
