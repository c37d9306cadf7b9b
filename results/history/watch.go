package history

// WatchRequest is what a watcher asked for: changes to [Key, End) (or Key alone) from Revision on.
// Revision 0 means "from the revision after the current one".
type WatchRequest struct {
	Key            string `json:"key"`
	End            string `json:"end,omitempty"`
	Revision       int64  `json:"rev,omitempty"`
	PrevKV         bool   `json:"prev_kv,omitempty"`
	ProgressNotify bool   `json:"progress_notify,omitempty"`
	RequireLeader  bool   `json:"require_leader,omitempty"`
}

// EventType is "put" or "delete".
type EventType string

// Watch event types.
const (
	EventPut    EventType = "put"
	EventDelete EventType = "delete"
)

// Event is one change delivered on a watch. A delete carries the key and the deletion's revision in KV.
type Event struct {
	Type     EventType `json:"type"`
	KV       KV        `json:"kv"`
	PrevKV   *KV       `json:"prev_kv,omitempty"`
	IsCreate bool      `json:"is_create,omitempty"`
}

// WatchResponse is one record of a watch: the request, etcd's confirmation (Created), events, a progress
// notification (no events, Progress set), a compaction (CompactRevision set) or a cancellation. Time is
// nanoseconds since the run's base time: when the response arrived, or for the request record when the
// watch was asked for. Watcher numbers each watch of a run.
//
// The first record of a watcher is its request: Request set, Revision 0, nothing else. It is written
// before the request is sent, so that the checker knows what the watcher asked for and when, even if no
// response ever comes. A Created record carries the store revision at which etcd created the watch: a
// watch from revision 0 delivers every change after it.
type WatchResponse struct {
	Watcher         int           `json:"watcher"`
	Client          int           `json:"client"`
	Time            int64         `json:"time"`
	Request         *WatchRequest `json:"req,omitempty"`
	Revision        int64         `json:"rev"`
	Created         bool          `json:"created,omitempty"`
	Events          []Event       `json:"events,omitempty"`
	Progress        bool          `json:"progress,omitempty"`
	CompactRevision int64         `json:"compact_rev,omitempty"`
	Canceled        bool          `json:"canceled,omitempty"`
	Error           string        `json:"error,omitempty"`
}
