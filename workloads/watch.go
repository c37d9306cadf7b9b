package workloads

import (
	"time"

	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Watch is a recorded watch: every response etcd sends is timed on arrival, written to the history's watch
// file when one is kept, and passed on C. C is closed when the watch ends (cancellation, compaction, or
// the context). Ready is closed once etcd has confirmed the watch.
type Watch struct {
	ID     int
	Client int
	C      <-chan history.WatchResponse
	Ready  <-chan struct{}
}

// WatchStream is a gRPC watch stream of its own: watches opened on it share it, and no other watch does.
type WatchStream struct {
	c *Client
	w clientv3.Watcher
}

// NewWatchStream opens a separate watch stream on the client's connection.
func (c *Client) NewWatchStream() *WatchStream {
	return &WatchStream{c: c, w: clientv3.NewWatcher(c.etcd)}
}

// Watch opens a watch on the stream.
func (s *WatchStream) Watch(ctx context.Context, req history.WatchRequest) *Watch {
	return s.c.watch(ctx, s.w, req)
}

// Close closes the stream and every watch on it.
func (s *WatchStream) Close() error { return s.w.Close() }

// RequestProgress asks etcd for a progress notification on the stream of the watches opened with ctx's
// metadata (clientv3 keys streams by it): a kube-apiserver's watch cache asks on its own watch's stream.
func (s *WatchStream) RequestProgress(ctx context.Context) error { return s.w.RequestProgress(ctx) }

// Watch opens a watch on the client's shared watch stream.
func (c *Client) Watch(ctx context.Context, req history.WatchRequest) *Watch {
	return c.watch(ctx, c.etcd.Watcher, req)
}

func (c *Client) watch(ctx context.Context, w clientv3.Watcher, req history.WatchRequest) *Watch {
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	if req.End != "" {
		opts = append(opts, clientv3.WithRange(req.End))
	}
	if req.Revision != 0 {
		opts = append(opts, clientv3.WithRev(req.Revision))
	}
	if req.PrevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	if req.ProgressNotify {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	if req.RequireLeader {
		ctx = clientv3.WithRequireLeader(ctx)
	}
	out := make(chan history.WatchResponse, 16)
	ready := make(chan struct{})
	watch := &Watch{ID: int(c.rec.watchIDs.Add(1)), Client: c.id, C: out, Ready: ready}
	if c.rec.history != nil {
		// The request record comes first and is timed before the request is sent: the checker needs to
		// know what a watcher asked for and when (a compaction acknowledged before it must cancel it).
		c.rec.history.Watch(&history.WatchResponse{Watcher: watch.ID, Client: c.id, Time: int64(c.rec.Now()), Request: &req})
	}
	wch := w.Watch(ctx, req.Key, opts...)
	go func() {
		defer close(out)
		readyClosed := false
		for resp := range wch {
			t := c.rec.Now()
			if resp.Created && !readyClosed {
				close(ready)
				readyClosed = true
			}
			r := fromWatchResponse(resp, t)
			r.Watcher, r.Client = watch.ID, c.id
			if c.rec.history != nil {
				c.rec.history.Watch(&r)
			}
			if resp.Created && len(resp.Events) == 0 && resp.Err() == nil {
				// The confirmation is history (it says from which revision the watch runs), not news
				// for the workload.
				continue
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return watch
}

func fromWatchResponse(resp clientv3.WatchResponse, t time.Duration) history.WatchResponse {
	r := history.WatchResponse{
		Time:            int64(t),
		Revision:        resp.Header.Revision,
		Created:         resp.Created,
		Progress:        resp.IsProgressNotify(),
		CompactRevision: resp.CompactRevision,
		Canceled:        resp.Canceled,
	}
	if err := resp.Err(); err != nil {
		r.Error = ErrorClass(err) + ": " + err.Error()
	}
	for _, ev := range resp.Events {
		e := history.Event{Type: history.EventPut, KV: *fromKV(ev.Kv), PrevKV: fromKV(ev.PrevKv), IsCreate: ev.IsCreate()}
		if ev.Type == clientv3.EventTypeDelete {
			e.Type = history.EventDelete
		}
		r.Events = append(r.Events, e)
	}
	return r
}

// waitWatchesReady waits until etcd has confirmed every watch.
func waitWatchesReady(ctx context.Context, watches []*Watch) error {
	for _, w := range watches {
		select {
		case <-w.Ready:
		case <-ctx.Done():
			return fmt.Errorf("wait for watch %d: %w", w.ID, ctx.Err())
		}
	}
	return nil
}
