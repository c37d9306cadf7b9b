package results

import (
	"bufio"
	"os"
	"strings"
	"time"
)

// CrashLogLines is how many of a crashed member's last log lines a summary keeps.
const CrashLogLines = 20

// Crash is a member process that exited or panicked when no fault asked it to (summary.json "crashes"): etcd
// failing, an outcome of its own (member-crashed, exit 4), never retried.
type Crash struct {
	Member string    `json:"member"`
	PID    int       `json:"pid,omitempty"`
	Time   time.Time `json:"time"`
	// Status is how the process ended ("exit status 2", "signal: killed").
	Status string `json:"status"`
	// Log is the member's log file; LogTail its last lines when the crash was noted (a panic's stack ends
	// there).
	Log     string   `json:"log,omitempty"`
	LogTail []string `json:"log_tail,omitempty"`
}

// Text is the crash in one line, with the last log line that says why (a panic's message when there is one).
func (c Crash) Text() string {
	s := "member " + c.Member + " crashed (" + c.Status + ")"
	if !c.Time.IsZero() {
		s += " at " + c.Time.UTC().Format(time.RFC3339)
	}
	if why := c.Why(); why != "" {
		s += ": " + why
	}
	return s
}

// Why is the line of the log tail that best says why the member ended: Go's own panic or fatal line if there
// is one (short: "panic: unexpected error during txn"), else a logged panic or fatal entry, else the last line.
func (c Crash) Why() string {
	for _, l := range c.LogTail {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			return oneLine(l)
		}
	}
	for _, l := range c.LogTail {
		if isPanicLine(l) {
			return oneLine(l)
		}
	}
	for i := len(c.LogTail) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(c.LogTail[i]); l != "" && !strings.HasPrefix(l, "=== chaosbench:") {
			return oneLine(l)
		}
	}
	return ""
}

// Excerpt returns at most n lines of the log tail: from the panic or fatal line when there is one (what a
// reader needs first), else the last n.
func (c Crash) Excerpt(n int) []string {
	for i, l := range c.LogTail {
		if isPanicLine(l) {
			return c.LogTail[i:min(i+n, len(c.LogTail))]
		}
	}
	return c.LogTail[max(len(c.LogTail)-n, 0):]
}

func isPanicLine(l string) bool {
	return strings.HasPrefix(l, "panic:") || strings.Contains(l, `"level":"panic"`) || strings.Contains(l, `"level":"fatal"`) || strings.HasPrefix(l, "fatal error:")
}

// panicLookback is how far back from a log's end LogTail looks for a panic: a Go panic's goroutine dump,
// printed after its message, runs to tens of lines and more.
const panicLookback = 400

// LogTail returns the last n lines of the file at path (nil when it cannot be read), each at most 1 KB; when
// the last panic or fatal line lies further back than that, within the last panicLookback lines (a goroutine
// dump after it), the n lines from that panic instead, so that the tail says why the process ended.
func LogTail(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const maxRead = 1 << 20
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		if _, err := f.Seek(st.Size()-maxRead, 0); err != nil {
			return nil
		}
	}
	keep := max(n, panicLookback)
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		if len(l) > 1024 {
			l = l[:1024] + " ..."
		}
		lines = append(lines, l)
		if len(lines) > keep {
			lines = lines[1:]
		}
	}
	from := max(len(lines)-n, 0)
	if last := lastPanic(lines); last >= 0 && last < from {
		// The panic's first line: zap's panic entry comes a line or two before Go's "panic:" line.
		first := last
		for i := last - 1; i >= max(last-3, 0); i-- {
			if isPanicLine(lines[i]) {
				first = i
			}
		}
		return lines[first:min(first+n, len(lines))]
	}
	return lines[from:]
}

// lastPanic is the index of the last panic or fatal line, -1 without one.
func lastPanic(lines []string) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if isPanicLine(lines[i]) {
			return i
		}
	}
	return -1
}
