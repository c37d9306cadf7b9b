package chaosbench

import (
	"context"
	"fmt"
	"io"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// CleanOptions configures Clean: what `chaosbench clean` removes besides the leftovers of dead runs.
type CleanOptions struct {
	// All also removes the objects of chaosbench runs that are still running (or run on another host
	// sharing the Docker engine).
	All bool
	// Images also removes chaosbench's images (rebuilt on demand, in seconds from cached binaries).
	Images bool
	// Cache also removes the cached etcd binaries (rebuilding one takes about a minute).
	Cache bool
	// Out receives what was removed and what was kept; nil discards it.
	Out io.Writer
}

// Clean removes the containers, networks and volumes that crashed or killed chaosbench runs left behind
// (their watchdog died with them, or the machine rebooted), and with opts.Images and opts.Cache the images
// and the binary cache, then says on opts.Out what it removed and which objects of live runs it kept. What
// it removed is reported even when removing something else failed.
func Clean(ctx context.Context, opts CleanOptions) error {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	report, err := clusters.Clean(ctx, clusters.CleanOptions{All: opts.All, Images: opts.Images, Cache: opts.Cache})
	if report.Empty() {
		fmt.Fprintln(out, "nothing to remove")
	} else {
		fmt.Fprintf(out, "removed %s\n", report)
	}
	for _, k := range report.Kept {
		fmt.Fprintf(out, "kept %s (--all removes it)\n", k)
	}
	return err
}
