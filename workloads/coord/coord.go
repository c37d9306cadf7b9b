// Package coord starts the generators of a split load together. A Server (the coordinator, or worker 0 of
// a Kubernetes Indexed Job) is the reference clock: it hands out the run's seed, collects the workers'
// readiness and, once every worker is ready, one start time on its clock. A worker's Client measures the
// offset of its own clock against the reference over a few round trips, keeping the one with the shortest
// round trip: the offset is known to within half that round trip, the uncertainty the merged check widens
// the worker's operations by, so that skew between the workers' clocks can never fake a violation.
//
// The protocol is plain HTTP and JSON: GET /clock, GET /seed, POST /ready?worker=I, GET /start.
package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Lead is how long after the last worker is ready the load starts: time for every worker to hear of it.
const Lead = 2 * time.Second

// Server is the reference clock and the start line of a split load.
type Server struct {
	seed    int64
	workers int
	lead    time.Duration
	now     func() time.Time

	mu    sync.Mutex
	ready map[int]bool
	start time.Time
	fail  error
	done  chan struct{} // closed once the start is decided or the run failed

	srv *http.Server
	ln  net.Listener
}

// Serve starts a reference on addr (host:port; port 0 picks one) for workers of a run with the given
// seed. It serves until Close.
func Serve(addr string, seed int64, workers int) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	s := &Server{seed: seed, workers: workers, lead: Lead, now: time.Now, ready: map[int]bool{}, done: make(chan struct{}), ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /clock", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, clockReply{Now: s.now().UnixNano()})
	})
	mux.HandleFunc("GET /seed", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, seedReply{Seed: s.seed, Workers: s.workers})
	})
	mux.HandleFunc("POST /ready", s.handleReady)
	mux.HandleFunc("GET /start", s.handleStart)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Fail ends the wait for the start: a worker could not start (its process exited), and the others
// must not wait for it. Workers asking for the start get the error.
func (s *Server) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail == nil && s.start.IsZero() {
		s.fail = err
		close(s.done)
	}
}

// Start returns the start time once it is decided.
func (s *Server) Start() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start, !s.start.IsZero()
}

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.URL.Query().Get("worker"))
	if err != nil || i < 0 || i >= s.workers {
		http.Error(w, fmt.Sprintf("worker %q: not one of 0 to %d", r.URL.Query().Get("worker"), s.workers-1), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready[i] = true
	if len(s.ready) == s.workers && s.start.IsZero() && s.fail == nil {
		s.start = s.now().Add(s.lead)
		close(s.done)
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleStart answers once the start is decided, or after a while with 202 (ask again).
func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		w.WriteHeader(http.StatusAccepted)
		return
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		http.Error(w, s.fail.Error(), http.StatusConflict)
		return
	}
	writeJSON(w, startReply{Start: s.start.UnixNano()})
}

type clockReply struct {
	Now int64 `json:"now"`
}

type seedReply struct {
	Seed    int64 `json:"seed"`
	Workers int   `json:"workers"`
}

type startReply struct {
	Start int64 `json:"start"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Offset is a worker's clock against the reference: reference time = local time + Offset, to within
// Uncertainty either way.
type Offset struct {
	Offset      time.Duration
	Uncertainty time.Duration
	RoundTrips  int
}

// Client is a worker's side of the protocol.
type Client struct {
	url  string
	http *http.Client
	now  func() time.Time
}

// NewClient returns a client of the reference at url (http://host:port).
func NewClient(url string) *Client {
	return &Client{url: url, http: &http.Client{Timeout: 15 * time.Second}, now: time.Now}
}

// retry calls fn until it succeeds or ctx ends: the reference may not be up yet (worker 0's pod starts
// after the others).
func retry[T any](ctx context.Context, what string, fn func() (T, error)) (T, error) {
	var last error
	for {
		v, err := fn()
		if err == nil {
			return v, nil
		}
		var permanent *permanentError
		if errors.As(err, &permanent) {
			return v, err
		}
		last = err
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func (c *Client) get(ctx context.Context, method, path string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, nil)
	if err != nil {
		return 0, &permanentError{err}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && into != nil:
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(into)
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		var msg [512]byte
		n, _ := resp.Body.Read(msg[:])
		return resp.StatusCode, &permanentError{fmt.Errorf("coordinator %s %s: %s: %s", method, path, resp.Status, trim(msg[:n]))}
	case resp.StatusCode >= 500:
		return resp.StatusCode, fmt.Errorf("coordinator %s %s: %s", method, path, resp.Status)
	}
	return resp.StatusCode, nil
}

func trim(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Seed asks the reference for the run's seed and number of workers.
func (c *Client) Seed(ctx context.Context) (seed int64, workers int, err error) {
	r, err := retry(ctx, "coordinator "+c.url, func() (seedReply, error) {
		var r seedReply
		_, err := c.get(ctx, http.MethodGet, "/seed", &r)
		return r, err
	})
	return r.Seed, r.Workers, err
}

// Sync measures the local clock's offset against the reference over n round trips.
func (c *Client) Sync(ctx context.Context, n int) (Offset, error) {
	best := Offset{Uncertainty: -1}
	for range n {
		t0 := c.now()
		var r clockReply
		if _, err := c.get(ctx, http.MethodGet, "/clock", &r); err != nil {
			return Offset{}, fmt.Errorf("clock offset: %w", err)
		}
		t1 := c.now()
		rtt := t1.Sub(t0)
		if best.Uncertainty < 0 || rtt/2 < best.Uncertainty {
			mid := t0.Add(rtt / 2)
			best.Offset, best.Uncertainty = time.Unix(0, r.Now).Sub(mid), rtt/2
		}
		best.RoundTrips++
	}
	// A clock read has a resolution too: never claim to know the offset better than a microsecond.
	best.Uncertainty = max(best.Uncertainty, time.Microsecond)
	return best, nil
}

// Ready tells the reference that worker i is ready, and waits for the start time (on the reference
// clock) that it hands out once every worker is.
func (c *Client) Ready(ctx context.Context, i int) (time.Time, error) {
	if _, err := retry(ctx, "coordinator "+c.url, func() (int, error) {
		return c.get(ctx, http.MethodPost, "/ready?worker="+strconv.Itoa(i), nil)
	}); err != nil {
		return time.Time{}, err
	}
	return c.Start(ctx)
}

// Start waits for the start time without being a worker (an observer that only needs to start with them).
func (c *Client) Start(ctx context.Context) (time.Time, error) {
	r, err := retry(ctx, "waiting for every worker to be ready", func() (startReply, error) {
		var r startReply
		code, err := c.get(ctx, http.MethodGet, "/start", &r)
		if err == nil && code != http.StatusOK {
			err = errors.New("not every worker is ready yet")
		}
		return r, err
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, r.Start), nil
}
