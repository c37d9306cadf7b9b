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

// Why is the line of the log tail that best says why the member ended: a panic or fatal line if there is one,
// else the last line.
func (c Crash) Why() string {
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

// LogTail returns the last n lines of the file at path (nil when it cannot be read), each at most 1 KB.
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
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		if len(l) > 1024 {
			l = l[:1024] + " ..."
		}
		lines = append(lines, l)
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}
