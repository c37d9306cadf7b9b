// Command kubesim writes a kube-shaped history from a simulated linearizable etcd into a directory, for
// `make bench-checker` and for looking at what the checker checks: kubesim -out DIR [-duration 10m]
// [-rate 500] [-seed 1] [-bug NAME].
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command with its arguments and output streams; it returns the exit code: 2 for bad input
// (nothing written), 1 when the history could not be written.
func run(args []string, stdout, stderr io.Writer) int {
	var o kubesim.Options
	fs := flag.NewFlagSet("kubesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write history.bin, watch.bin and faults.jsonl into (created)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "length of the simulated run")
	fs.Float64Var(&o.Rate, "rate", 500, "requests per second of the main load")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of every random choice")
	fs.IntVar(&o.Names, "names", 0, "name pods and events from this many names each, so that the keyspace stops growing (more than the 900 pods; 0: a name of its own each)")
	fs.DurationVar(&o.FaultEvery, "fault-every", time.Minute, "interval between fault windows (negative: none)")
	fs.StringVar(&o.Bug, "bug", "", "make the simulated etcd break one guarantee up to three times (a misbehaviour that changes nothing seen, such as a stale read of a key that did not change, goes unseen): "+strings.Join(kubesim.Bugs, ", "))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kubesim -out DIR [-duration 10m] [-rate 500] [-seed 1] [-names N] [-bug NAME]")
		return 2
	}
	if o.Bug != "" && !slices.Contains(kubesim.Bugs, o.Bug) {
		fmt.Fprintf(stderr, "kubesim: -bug %q: not one of %s\n", o.Bug, strings.Join(kubesim.Bugs, ", "))
		return 2
	}
	if o.Names < 0 || (o.Names > 0 && o.Names <= 900) {
		fmt.Fprintf(stderr, "kubesim: -names %d: must be more than the 900 pods (or 0)\n", o.Names)
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "kubesim:", err)
		return 1
	}
	start := time.Now()
	st, err := kubesim.Write(*out, o)
	if err != nil {
		fmt.Fprintln(stderr, "kubesim:", err)
		return 1
	}
	fmt.Fprintf(stdout, "kubesim: %d operations (%d failed), %d watch events in %d records, %d revisions, %d fault windows, seed %d, written to %s in %.1fs\n",
		st.Operations, st.Failed, st.WatchEvents, st.WatchRecords, st.Revisions, st.Faults, o.Seed, *out, time.Since(start).Seconds())
	var size [2]int64
	for i, name := range []string{history.HistoryFile, history.WatchFile} {
		if fi, err := os.Stat(filepath.Join(*out, name)); err == nil {
			size[i] = fi.Size()
		}
	}
	if st.Operations > 0 {
		fmt.Fprintf(stdout, "kubesim: %s %d bytes (%.0f per operation), %s %d bytes (%.0f per operation)\n", history.HistoryFile, size[0],
			float64(size[0])/float64(st.Operations), history.WatchFile, size[1], float64(size[1])/float64(st.Operations))
	}
	return 0
}
