package live

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress display modes.
const (
	ProgressAuto  = "auto"  // bars on a terminal, lines otherwise
	ProgressBars  = "bars"  // mpb progress bars
	ProgressLines = "lines" // one plain status line every LineInterval
	ProgressNone  = "none"
)

// ProgressOptions configures a progress display.
type ProgressOptions struct {
	Out  io.Writer
	Mode string
	// Label names the load in bars and lines ("load" when empty).
	Label string
	// Duration or Total is the length of the load, for the remaining time or count.
	Duration time.Duration
	Total    int64
	// Elapsed returns the time since the load started.
	Elapsed func() time.Duration
	// Live returns operations and errors so far.
	Live func() (ops, errs int64)
	// LineInterval is the period of plain status lines (default 5 s).
	LineInterval time.Duration
	// Console, when its output is Out, carries what else is printed while the bars are drawn: its lines go
	// above the bars instead of being drawn over.
	Console *Console
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// StartProgress shows progress until the returned stop function is called. Bars are only drawn on a
// terminal: mpb renders nothing useful into a log file, so "auto" falls back to plain lines there.
func StartProgress(opts ProgressOptions) (stop func()) {
	if opts.LineInterval <= 0 {
		opts.LineInterval = 5 * time.Second
	}
	mode := opts.Mode
	if mode == "" || mode == ProgressAuto {
		mode = ProgressLines
		if IsTerminal(opts.Out) {
			mode = ProgressBars
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	switch mode {
	case ProgressBars:
		wg.Go(func() { bars(ctx, opts) })
	case ProgressLines:
		wg.Go(func() { lines(ctx, opts) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// rateMeter turns the live operation count into a rate over the last sampling period.
type rateMeter struct {
	lastOps int64
	lastAt  time.Duration
	rate    float64
}

func (m *rateMeter) sample(ops int64, at time.Duration) float64 {
	if dt := at - m.lastAt; dt >= 500*time.Millisecond {
		m.rate = float64(ops-m.lastOps) / dt.Seconds()
		m.lastOps, m.lastAt = ops, at
	}
	return m.rate
}

func (o ProgressOptions) status(elapsed time.Duration, ops, errs int64, rate float64) string {
	var remaining string
	switch {
	case o.Duration > 0:
		remaining = fmt.Sprintf("remaining %s", max(o.Duration-elapsed, 0).Truncate(time.Second))
	case o.Total > 0:
		remaining = fmt.Sprintf("remaining %d ops", max(o.Total-ops, 0))
	}
	prefix := ""
	if o.Label != "" {
		prefix = o.Label + ": "
	}
	return fmt.Sprintf("%selapsed %s  %s  ops %d  rate %.0f/s  errors %d",
		prefix, elapsed.Truncate(time.Second), remaining, ops, rate, errs)
}

func lines(ctx context.Context, o ProgressOptions) {
	var m rateMeter
	t := time.NewTicker(o.LineInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ops, errs := o.Live()
			el := o.Elapsed()
			fmt.Fprintln(o.Out, o.status(el, ops, errs, m.sample(ops, el)))
		}
	}
}

func bars(ctx context.Context, o ProgressOptions) {
	p := mpb.New(mpb.WithOutput(o.Out), mpb.WithWidth(40), mpb.WithRefreshRate(200*time.Millisecond))
	if o.Console != nil && o.Console.Out() == o.Out {
		o.Console.drawing(p)
		defer o.Console.drawing(nil)
	}
	total := int64(o.Duration / time.Millisecond)
	if total <= 0 {
		total = o.Total
	}
	label := o.Label
	if label == "" {
		label = "load"
	}
	o.Label = "" // the bar shows it; the status text beside it need not
	var (
		mu   sync.Mutex
		text string
	)
	bar := p.AddBar(total,
		mpb.PrependDecorators(decor.Name(label+" ", decor.WC{W: len(label) + 1})),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			mu.Lock()
			defer mu.Unlock()
			return text
		})),
	)
	var m rateMeter
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ops, errs := o.Live()
		el := o.Elapsed()
		mu.Lock()
		text = o.status(el, ops, errs, m.sample(ops, el))
		mu.Unlock()
		if o.Duration > 0 {
			bar.SetCurrent(min(int64(el/time.Millisecond), total))
		} else {
			bar.SetCurrent(min(ops, total))
		}
		select {
		case <-ctx.Done():
			bar.SetCurrent(total)
			if o.Console != nil {
				o.Console.drawing(nil) // before the bars shut down: nothing waits on them then
			}
			p.Wait()
			return
		case <-t.C:
		}
	}
}
