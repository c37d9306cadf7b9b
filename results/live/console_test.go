package live

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// screen is what a terminal shows of out: the lines left after the cursor movements and erasures progress
// bars redraw themselves with (cursor up, erase to the end of the screen).
func screen(out string) []string {
	lines := []string{""}
	row := 0
	esc := regexp.MustCompile(`^\x1b\[(\d*)([A-Za-z])`)
	for i := 0; i < len(out); i++ {
		switch c := out[i]; c {
		case '\x1b':
			m := esc.FindStringSubmatch(out[i:])
			if m == nil {
				continue
			}
			i += len(m[0]) - 1
			n, _ := strconv.Atoi(m[1])
			switch m[2] {
			case "A":
				row = max(row-max(n, 1), 0)
			case "J":
				lines = append(lines[:row], "")
			}
		case '\n':
			row++
			if row == len(lines) {
				lines = append(lines, "")
			}
		case '\r':
			lines[row] = ""
		default:
			lines[row] += string(c)
		}
	}
	return lines
}

// TestConsoleAboveBars: what a run prints while its bar is drawn (a fault's injection, a member's exit) stays
// on the terminal above the bar, where written straight to the terminal it was drawn over by the bar's next
// refresh.
func TestConsoleAboveBars(t *testing.T) {
	ptm, tty := openPTY(t)
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
	console := NewConsole(tty)
	elapsed, live := fakeLoad()
	stop := StartProgress(ProgressOptions{Out: tty, Console: console, Mode: ProgressAuto, Label: "load", Duration: time.Minute,
		Elapsed: elapsed, Live: live})
	time.Sleep(500 * time.Millisecond)
	console.Write([]byte("fault kill:leader@20s+5s: injected at 20.00s on m1 (leader m1)\n"))
	time.Sleep(500 * time.Millisecond)
	console.Write([]byte("fault kill:leader@20s+5s: healed at 25.00s: recovered\n"))
	time.Sleep(500 * time.Millisecond)
	stop()
	console.Write([]byte("checking the history\n"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(seen.String(), "checking the history") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	tty.Close()
	ptm.Close()
	<-done
	lines := screen(strings.ReplaceAll(seen.String(), "\r\n", "\n"))
	text := strings.Join(lines, "\n")
	injected := strings.Index(text, "injected at 20.00s")
	healed := strings.Index(text, "healed at 25.00s")
	bar := strings.LastIndex(text, "load ")
	after := strings.Index(text, "checking the history")
	if injected < 0 || healed < injected || bar < healed || after < bar {
		t.Fatalf("the terminal shows, in this order, the injection, the heal, the bar and what came after it; it shows:\n%s", text)
	}
	if strings.Count(text, "load ") != 1 {
		t.Errorf("the bar is drawn once on the final screen:\n%s", text)
	}
}

// TestActivitySpinner: on a terminal, a job of unknown length (a build) shows a spinner named by its label,
// saying what the job last logged and how long it has run; its log lines stay above it. Off a terminal it
// adds nothing: the log lines are the progress.
func TestActivitySpinner(t *testing.T) {
	ptm, tty := openPTY(t)
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
	console := NewConsole(tty)
	stop := StartActivity(ActivityOptions{Out: tty, Console: console, Label: "image build"})
	console.Write([]byte("building etcd v3.6.16 from the Go module proxy (about a minute, once)\n"))
	time.Sleep(700 * time.Millisecond)
	stop()
	console.Write([]byte("built etcd v3.6.16 in 61s\n"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(seen.String(), "built etcd") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	tty.Close()
	ptm.Close()
	<-done
	raw := seen.String()
	text := strings.Join(screen(strings.ReplaceAll(raw, "\r\n", "\n")), "\n")
	building := strings.Index(text, "building etcd v3.6.16")
	spin := strings.Index(text, "image build")
	built := strings.Index(text, "built etcd v3.6.16")
	if building < 0 || spin < building || built < spin || !strings.Contains(raw, "elapsed ") ||
		!strings.Contains(raw, "elapsed 0s  building etcd v3.6.16") {
		t.Fatalf("the terminal shows the log line, the spinner with what it is doing, then what came after; it shows:\n%s\nraw: %q", text, raw)
	}

	var log syncBuffer
	c := NewConsole(&log)
	stop = StartActivity(ActivityOptions{Out: &log, Console: c, Label: "image build"})
	c.Write([]byte("building etcd v3.6.16\n"))
	stop()
	if log.String() != "building etcd v3.6.16\n" {
		t.Errorf("off a terminal, the activity added to the log: %q", log.String())
	}
}
