package live

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// syncBuffer is a buffer the progress goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeLoad is a load whose progress the test controls: its elapsed time and operations advance with each
// call, as a running load's would.
func fakeLoad() (elapsed func() time.Duration, live func() (int64, int64)) {
	var calls atomic.Int64
	return func() time.Duration { return time.Duration(calls.Load()) * time.Second },
		func() (int64, int64) { n := calls.Add(1); return 100 * n, 0 }
}

// Where the output is not a terminal, auto prints plain labelled lines at the interval and never a
// terminal escape sequence (which would litter a log file).
func TestProgressLinesOffTerminal(t *testing.T) {
	var out syncBuffer
	elapsed, live := fakeLoad()
	stop := StartProgress(ProgressOptions{Out: &out, Mode: ProgressAuto, Label: "step small", Duration: time.Minute,
		Elapsed: elapsed, Live: live, LineInterval: 20 * time.Millisecond})
	time.Sleep(150 * time.Millisecond)
	stop()
	text := out.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "step small: elapsed ") || !strings.Contains(lines[0], "remaining ") {
		t.Fatalf("progress lines:\n%s", text)
	}
	if strings.Contains(text, "\x1b[") {
		t.Fatalf("escape sequences in a non-terminal's output: %q", text)
	}
}

// openPTY opens a pseudo-terminal pair: the program writes to tty, the test reads what a terminal would
// show from ptm.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here (/dev/ptmx): %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("cannot unlock a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("cannot name a pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("cannot open the pseudo-terminal's other end: %v", err)
	}
	// A new terminal has no size, and a bar renderer draws nothing into zero columns.
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 160}); err != nil {
		t.Logf("cannot size the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// On a terminal, auto draws a bar named by the label, redrawn in place (escape sequences), and ends it.
func TestProgressBarsOnTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	if !IsTerminal(tty) {
		t.Fatal("a pseudo-terminal is not seen as a terminal")
	}
	var seen syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			seen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	elapsed, live := fakeLoad()
	stop := StartProgress(ProgressOptions{Out: tty, Mode: ProgressAuto, Label: "step small", Duration: time.Minute,
		Elapsed: elapsed, Live: live, LineInterval: 20 * time.Millisecond})
	time.Sleep(700 * time.Millisecond)
	stop()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(seen.String(), "step small") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	tty.Close()
	ptm.Close()
	<-done
	text := seen.String()
	if !strings.Contains(text, "step small") || !strings.Contains(text, "\x1b[") || !strings.Contains(text, "ops ") {
		t.Fatalf("a terminal saw no bar named step small: %q", text)
	}
}
