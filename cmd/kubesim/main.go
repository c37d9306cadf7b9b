// Command kubesim writes a kube-shaped history from a simulated linearizable etcd into a directory, for
// `make bench-checker` and for looking at what the checker checks: kubesim -out DIR [-duration 10m]
// [-rate 500] [-seed 1].
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

func main() {
	var o kubesim.Options
	out := flag.String("out", "", "directory to write history.bin, watch.bin and faults.jsonl into (created)")
	flag.DurationVar(&o.Duration, "duration", 10*time.Minute, "length of the simulated run")
	flag.Float64Var(&o.Rate, "rate", 500, "requests per second of the main load")
	flag.Int64Var(&o.Seed, "seed", 1, "seed of every random choice")
	flag.DurationVar(&o.FaultEvery, "fault-every", time.Minute, "interval between fault windows (negative: none)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: kubesim -out DIR [-duration 10m] [-rate 500] [-seed 1]")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "kubesim:", err)
		os.Exit(1)
	}
	start := time.Now()
	st, err := kubesim.Write(*out, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubesim:", err)
		os.Exit(1)
	}
	fmt.Printf("kubesim: %d operations (%d failed), %d watch events in %d records, %d revisions, %d fault windows, seed %d, written to %s in %.1fs\n",
		st.Operations, st.Failed, st.WatchEvents, st.WatchRecords, st.Revisions, st.Faults, o.Seed, *out, time.Since(start).Seconds())
	var size [2]int64
	for i, name := range []string{history.HistoryFile, history.WatchFile} {
		if fi, err := os.Stat(filepath.Join(*out, name)); err == nil {
			size[i] = fi.Size()
		}
	}
	if st.Operations > 0 {
		fmt.Printf("kubesim: %s %d bytes (%.0f per operation), %s %d bytes (%.0f per operation)\n", history.HistoryFile, size[0],
			float64(size[0])/float64(st.Operations), history.WatchFile, size[1], float64(size[1])/float64(st.Operations))
	}
}
