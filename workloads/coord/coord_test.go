package coord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestSyncMeasuresOffset: a reference whose clock runs 50 ms ahead is measured as 50 ms ahead, to within
// the uncertainty the client reports.
func TestSyncMeasuresOffset(t *testing.T) {
	srv, err := Serve("127.0.0.1:0", 42, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const skew = 50 * time.Millisecond
	srv.now = func() time.Time { return time.Now().Add(skew) }
	c := NewClient("http://" + srv.Addr().String())
	off, err := c.Sync(context.Background(), 16)
	if err != nil {
		t.Fatal(err)
	}
	if off.RoundTrips != 16 || off.Uncertainty <= 0 || off.Uncertainty > 50*time.Millisecond {
		t.Fatalf("offset %+v: want 16 round trips and a small, positive uncertainty", off)
	}
	if d := off.Offset - skew; d < -off.Uncertainty || d > off.Uncertainty {
		t.Fatalf("measured offset %s ± %s, the reference is %s ahead", off.Offset, off.Uncertainty, skew)
	}
	seed, workers, err := c.Seed(context.Background())
	if seed != 42 || workers != 2 || err != nil {
		t.Fatalf("seed %d, workers %d, %v", seed, workers, err)
	}
}

// TestStartWaitsForEveryWorker: no worker gets the start before the last one is ready, and all get the
// same start, after it.
func TestStartWaitsForEveryWorker(t *testing.T) {
	srv, err := Serve("127.0.0.1:0", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + srv.Addr().String()
	starts := make([]time.Time, 3)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			var err error
			if starts[i], err = NewClient(url).Ready(context.Background(), i); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if _, ok := srv.Start(); ok {
		t.Fatal("the start was decided with a worker missing")
	}
	last := time.Now()
	starts[2], err = NewClient(url).Ready(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, s := range starts {
		if !s.Equal(starts[2]) || s.Before(last) {
			t.Fatalf("worker %d starts at %s, worker 2 at %s, the last worker was ready at %s", i, s, starts[2], last)
		}
	}
	if _, err := NewClient(url).get(context.Background(), "POST", "/ready?worker=3", nil); err == nil {
		t.Fatal("worker 3 of 3 was accepted")
	}
}

// TestFailEndsTheWait: a worker that cannot start releases the others with its error instead of leaving
// them waiting.
func TestFailEndsTheWait(t *testing.T) {
	srv, err := Serve("127.0.0.1:0", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		srv.Fail(errors.New("worker 1 exited"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = NewClient("http://"+srv.Addr().String()).Ready(ctx, 0)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Ready returned %v (context %v): want worker 1's failure at once", err, ctx.Err())
	}
}
