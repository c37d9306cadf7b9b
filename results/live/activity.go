package live

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// ActivityOptions configures the display of a job whose length is not known ahead: a build from the module
// proxy, an image build.
type ActivityOptions struct {
	// Out is where the display goes; bars are drawn only on a terminal.
	Out  io.Writer
	Mode string
	// Label names the job in its spinner ("image build").
	Label string
	// Console carries the job's own log lines, written above the spinner; the latest is what the spinner
	// says the job is doing.
	Console *Console
}

// StartActivity shows, on a terminal, a spinner named by the label with the job's latest log line and the
// time since the job began, until the returned function is called. Elsewhere it shows nothing: the job's
// log lines are its progress, as before.
func StartActivity(o ActivityOptions) (stop func()) {
	mode := o.Mode
	if mode == "" || mode == ProgressAuto {
		mode = ProgressLines
		if IsTerminal(o.Out) {
			mode = ProgressBars
		}
	}
	if mode != ProgressBars {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { spinner(ctx, o) })
	return func() {
		cancel()
		wg.Wait()
	}
}

func spinner(ctx context.Context, o ActivityOptions) {
	p := mpb.New(mpb.WithOutput(o.Out), mpb.WithWidth(3), mpb.WithRefreshRate(200*time.Millisecond))
	if o.Console != nil && o.Console.Out() == o.Out {
		o.Console.drawing(p)
		defer o.Console.drawing(nil)
	}
	began := time.Now()
	bar := p.AddSpinner(0,
		mpb.PrependDecorators(decor.Name(o.Label+" ", decor.WC{W: len(o.Label) + 1})),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			status := fmt.Sprintf("elapsed %s", time.Since(began).Truncate(time.Second))
			if o.Console != nil {
				if last := o.Console.Last(); last != "" {
					status += "  " + last
				}
			}
			return status
		})),
	)
	<-ctx.Done()
	if o.Console != nil {
		o.Console.drawing(nil)
	}
	bar.SetTotal(-1, true)
	p.Wait()
}
