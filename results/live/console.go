package live

import (
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/vbauerster/mpb/v8"
)

// Console is where a run's human output goes while progress bars may share the terminal with it. mpb
// redraws its bars in place, so a line written to the terminal behind its back is drawn over at the next
// refresh (a fault's injection and heal were lost so); while bars are drawn, a line written to the console
// goes above them instead, and straight to the output otherwise.
type Console struct {
	out io.Writer

	mu    sync.Mutex
	above io.Writer // the bars' container while they are drawn
	last  string    // the last line written, for a spinner to say what the job is doing
}

// NewConsole returns a console writing to out.
func NewConsole(out io.Writer) *Console { return &Console{out: out} }

// Out is the writer under the console: a terminal, a log file.
func (c *Console) Out() io.Writer { return c.out }

// Write writes p above the bars while they are drawn, else to the output.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	above := c.above
	if line := strings.TrimSpace(lastLine(p)); line != "" {
		c.last = line
	}
	c.mu.Unlock()
	if above != nil {
		// A write that meets the bars shutting down is written below them, where they leave the cursor.
		if n, err := above.Write(p); !errors.Is(err, mpb.ErrDone) {
			return n, err
		}
	}
	return c.out.Write(p)
}

// Last is the last line written to the console.
func (c *Console) Last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// lastLine is the last non-empty line of p.
func lastLine(p []byte) string {
	lines := strings.Split(strings.TrimRight(string(p), "\n"), "\n")
	return lines[len(lines)-1]
}

// drawing routes writes above the bars of p, or to the output again when p is nil.
func (c *Console) drawing(p *mpb.Progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == nil {
		c.above = nil
		return
	}
	c.above = p
}
