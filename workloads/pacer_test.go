package workloads

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestConstantPacer(t *testing.T) {
	tests := []struct {
		rate float64
		n    uint64
		want time.Duration
	}{
		{rate: 1000, n: 0, want: 0},
		{rate: 1000, n: 1, want: time.Millisecond},
		{rate: 1000, n: 1500, want: 1500 * time.Millisecond},
		{rate: 3, n: 1, want: 333333333},
		{rate: 0.5, n: 3, want: 6 * time.Second},
		{rate: 20000, n: 72_000_000, want: time.Hour},
	}
	for _, tt := range tests {
		if got := (Constant{Rate: tt.rate}).At(tt.n); got != tt.want {
			t.Errorf("Constant{%v}.At(%d) = %v, want %v", tt.rate, tt.n, got, tt.want)
		}
	}
}

func TestSlots(t *testing.T) {
	tests := []struct {
		rate float64
		d    time.Duration
		want uint64
	}{
		{1000, time.Second, 1000},
		{1000, time.Second + time.Nanosecond, 1001},
		{1, 0, 0},
		{7, 10 * time.Second, 70},
	}
	for _, tt := range tests {
		if got := Slots(Constant{Rate: tt.rate}, tt.d); got != tt.want {
			t.Errorf("Slots(%v/s, %v) = %d, want %d", tt.rate, tt.d, got, tt.want)
		}
	}
}

func TestKeySpace(t *testing.T) {
	tests := []struct {
		prefix  string
		keySize int
		size, i int
		want    string
	}{
		{"", 8, 10000, 9999, "0000270f"},
		{"", 8, 10000, 0, "00000000"},
		{"/bench/", 8, 10000, 255, "/bench/00ff"},
		{"/bench/", 16, 10, 1, "/bench/000000001"},
		{"k", 2, 1 << 20, 1<<20 - 1, "kfffff"},
	}
	for _, tt := range tests {
		ks := newKeySpace(tt.prefix, tt.keySize, tt.size)
		if got := ks.key(tt.i); got != tt.want {
			t.Errorf("key(%q, size %d, %d keys)(%d) = %q, want %q", tt.prefix, tt.keySize, tt.size, tt.i, got, tt.want)
		}
	}
	// Keys sort in index order, so a range [key(i), key(j)) holds exactly j-i keys.
	ks := newKeySpace("/p/", 4, 5000)
	for i := 1; i < 5000; i++ {
		if ks.key(i-1) >= ks.key(i) {
			t.Fatalf("key(%d)=%q does not sort before key(%d)=%q", i-1, ks.key(i-1), i, ks.key(i))
		}
	}
	if end := ks.end(); ks.key(4999) >= end {
		t.Fatalf("end %q is not past the last key", end)
	}
}

func TestDelivery(t *testing.T) {
	d := NewDelivery(2)
	// Acknowledged first, then both watchers receive it.
	if early := d.Acked(1, 10*time.Millisecond); early != 0 {
		t.Fatalf("early = %d", early)
	}
	if ack, ok := d.Received(1, 12*time.Millisecond); !ok || ack != 10*time.Millisecond {
		t.Fatalf("Received = %v, %v", ack, ok)
	}
	if _, ok := d.Received(1, 13*time.Millisecond); !ok {
		t.Fatal("second receiver not matched")
	}
	if d.Pending() != 0 {
		t.Fatalf("write seen by every receiver is still pending")
	}
	// One event overtakes the acknowledgement.
	if _, ok := d.Received(2, 5*time.Millisecond); ok {
		t.Fatal("event before the ack was matched")
	}
	if early := d.Acked(2, 6*time.Millisecond); early != 1 {
		t.Fatalf("early = %d, want 1", early)
	}
	if ack, ok := d.Received(2, 8*time.Millisecond); !ok || ack != 6*time.Millisecond {
		t.Fatalf("late receiver: %v %v", ack, ok)
	}
	// Unknown writes (id 0, not ours) are ignored; failed writes are forgotten.
	if _, ok := d.Received(0, time.Second); ok {
		t.Fatal("id 0 matched")
	}
	d.Acked(3, time.Second)
	d.Forget(3)
	if d.Pending() != 0 {
		t.Fatal("forgotten write still pending")
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{context.Canceled, ErrCanceled},
		{context.DeadlineExceeded, ErrDeadline},
		{status.Error(codes.DeadlineExceeded, "x"), ErrDeadline},
		{rpctypes.ErrNoLeader, ErrNoLeader},
		{rpctypes.ErrGRPCNoLeader, ErrNoLeader},
		{rpctypes.ErrLeaderChanged, ErrLeaderChanged},
		{rpctypes.ErrTimeoutDueToLeaderFail, ErrTimeout},
		{rpctypes.ErrCompacted, ErrCompacted},
		{rpctypes.ErrGRPCFutureRev, ErrFutureRev},
		{rpctypes.ErrTooManyRequests, ErrTooManyRequests},
		{rpctypes.ErrRequestTooLarge, ErrTooLarge},
		{rpctypes.ErrNoSpace, ErrNoSpace},
		{rpctypes.ErrLeaseNotFound, ErrLeaseNotFound},
		{status.Error(codes.Unavailable, "connection refused"), ErrUnavailable},
		{errors.New("boom"), ErrOther},
	}
	for _, tt := range tests {
		if got := ErrorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestSharedDeadlines(t *testing.T) {
	var d deadlines
	parent := context.Background()
	now := time.Now()
	a := d.context(parent, time.Second, true, now)
	b := d.context(parent, time.Second, true, now.Add(10*time.Millisecond))
	if a != b {
		t.Fatal("requests in one bucket got different contexts")
	}
	dl, ok := a.Deadline()
	if !ok || dl.Before(now.Add(time.Second)) || dl.After(now.Add(time.Second+deadlineBucket)) {
		t.Fatalf("deadline %v not within [timeout, timeout+bucket] of %v", dl, now)
	}
	if c := d.context(parent, time.Second, true, now.Add(deadlineBucket)); c == a {
		t.Fatal("a new bucket reused the old context")
	}
	// Client-side only: no deadline on the wire, cancelled with errRequestTimeout.
	cs := d.context(parent, 20*time.Millisecond, false, time.Now())
	if _, ok := cs.Deadline(); ok {
		t.Fatal("client-side timeout context carries a deadline")
	}
	<-cs.Done()
	if !timedOut(cs) || errorClass(cs, context.Canceled) != ErrDeadline {
		t.Fatalf("expired client-side context: cause %v", context.Cause(cs))
	}
}
