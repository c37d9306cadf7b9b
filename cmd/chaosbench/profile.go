package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// profileCommand reads a kube workload profile from a live cluster's metrics.
func profileCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	var opts chaosbench.ProfileOptions
	var apiservers, etcd []string
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Read a kube workload profile (objects, requests, lists, watches, sizes) from a live cluster's metrics",
		Long: `Reads what a live Kubernetes cluster already exports, two or more scrapes of each kube-apiserver's and
each etcd member's /metrics some minutes apart, and writes a kube workload profile: objects, etcd requests per
operation, lists, watchers, watch events and object sizes per resource; etcd's database size, keys, requests
per gRPC method, watches and leases. A profile holds counts, rates and sizes only, never a key, a value or an
object's name: it can be shared. Figures the metrics lack are listed with what was assumed instead.
Run it with 'chaosbench run --profile FILE [--scale X]' or qualify hardware for it with
'chaosbench qualify --profile FILE'. Format: docs/workloads.md.

Save scrapes with 'kubectl get --raw /metrics > apiserver-0.1.prom' and 'curl -s http://ETCD:2379/metrics >
etcd-0.1.prom', then again minutes later (.2.prom). The files' modification times time them, or --interval.`,
		Example: `  chaosbench profile --apiserver a0.1.prom,a0.2.prom --apiserver a1.1.prom,a1.2.prom --etcd e0.1.prom,e0.2.prom --out my.yaml
  chaosbench profile --run results/20261128-controlplane --out small.yaml
  chaosbench profile --prometheus http://prometheus:9090 --start 30m --out mine.yaml`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			for _, a := range apiservers {
				opts.Apiservers = append(opts.Apiservers, splitFiles(a))
			}
			for _, e := range etcd {
				opts.Etcd = append(opts.Etcd, splitFiles(e))
			}
			ctx, cancel := interruptible(stderr, "stopping")
			defer cancel()
			_, err := chaosbench.Profile(ctx, opts, stdout)
			*code = outcome.Code(err)
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&apiservers, "apiserver", nil, "one kube-apiserver's scrapes, comma-separated in time order (repeat per apiserver)")
	f.StringArrayVar(&etcd, "etcd", nil, "one etcd member's scrapes, comma-separated in time order (repeat per member)")
	f.StringVar(&opts.Preset, "preset", "", "write a kube preset's profile from its plan (small, medium, large, xlarge) instead of reading metrics")
	f.StringVar(&opts.Prometheus, "prometheus", "", "read every kube-apiserver and etcd member from a Prometheus server's HTTP API (URL) at --start and --end")
	f.StringVar(&opts.Start, "start", "15m", "--prometheus: the window's start, RFC 3339 or a duration before now")
	f.StringVar(&opts.End, "end", "", "--prometheus: the window's end, RFC 3339 or a duration before now (default now)")
	f.StringVar(&opts.Run, "run", "", "a controlplane run's directory: read the scrapes it saved in metrics/")
	f.DurationVar(&opts.Interval, "interval", 0, "time between consecutive scrapes (default: each file's header or modification time)")
	f.StringVar(&opts.Name, "name", "", "the profile's name")
	f.StringVar(&opts.Out, "out", "", "profile file to write (default stdout)")
	return cmd
}

func splitFiles(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
