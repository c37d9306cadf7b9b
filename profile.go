package chaosbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube/profile"
)

// ProfileOptions configures Profile: where the scrapes are.
type ProfileOptions struct {
	// Apiservers and Etcd hold, per process, its scrape files in time order.
	Apiservers [][]string
	Etcd       [][]string
	// Run is a controlplane run's directory: its MetricsDir holds every process's scrapes.
	Run string
	// Preset writes the profile of a kube preset from its plan instead (no metrics).
	Preset string
	// Prometheus is a Prometheus server's URL to read every scraped apiserver and etcd member from, at
	// Start and End (RFC 3339, or a duration before now: "15m").
	Prometheus string
	Start, End string
	// Interval, when set, is the time between consecutive scrapes (else each file's own).
	Interval time.Duration
	// Name names the profile.
	Name string
	// Out is the profile file ("" or "-": Env.Out).
	Out string
}

// Profile reads a kube workload profile from a live cluster's metrics and writes it to opts.Out, or to out
// when that is "" or "-" (the profile's own assumptions and notes are in it; written to a file, they are
// printed on out too). Bad input is a usage error (exit 2) and writes nothing.
func Profile(ctx context.Context, opts ProfileOptions, out io.Writer) (*profile.Profile, error) {
	if opts.Preset != "" {
		if opts.Run != "" || len(opts.Apiservers) > 0 || len(opts.Etcd) > 0 {
			return nil, outcome.Usagef("--preset writes a preset's profile from its plan: not with --run, --apiserver or --etcd")
		}
		cfg, err := kube.Options{Preset: opts.Preset}.Resolve(0)
		if err != nil {
			return nil, err
		}
		name := opts.Name
		if name == "" {
			name = opts.Preset
		}
		return writeProfile(profile.FromConfig(name, cfg, 1), opts.Out, out)
	}
	if opts.Prometheus != "" {
		if opts.Run != "" || len(opts.Apiservers) > 0 || len(opts.Etcd) > 0 {
			return nil, outcome.Usagef("--prometheus reads every process from the server: not with --run, --apiserver or --etcd")
		}
		now := time.Now()
		start, err := parseWhen("--start", opts.Start, now)
		if err != nil {
			return nil, err
		}
		end, err := parseWhen("--end", opts.End, now)
		if err != nil {
			return nil, err
		}
		as, es, err := profile.FromPrometheus(ctx, opts.Prometheus, []time.Time{start, end})
		if err != nil {
			return nil, err
		}
		p, err := profile.Build(as, es, profile.Options{Name: opts.Name})
		if err != nil {
			return nil, err
		}
		return writeProfile(p, opts.Out, out)
	}
	if opts.Run != "" {
		if len(opts.Apiservers) > 0 || len(opts.Etcd) > 0 {
			return nil, outcome.Usagef("--run takes a controlplane run's scrapes: not with --apiserver or --etcd")
		}
		var err error
		if opts.Apiservers, opts.Etcd, err = runScrapes(opts.Run); err != nil {
			return nil, err
		}
		if opts.Name == "" {
			opts.Name = filepath.Base(filepath.Clean(opts.Run))
		}
	}
	read := func(kind string, groups [][]string) ([]profile.Series, error) {
		var out []profile.Series
		for i, files := range groups {
			s := profile.Series{Process: fmt.Sprintf("%s-%d", kind, i)}
			for _, f := range files {
				sc, err := profile.ReadScrape(f)
				if err != nil {
					return nil, err
				}
				s.Scrapes = append(s.Scrapes, sc)
			}
			out = append(out, s)
		}
		return out, nil
	}
	as, err := read("kube-apiserver", opts.Apiservers)
	if err != nil {
		return nil, err
	}
	es, err := read("etcd", opts.Etcd)
	if err != nil {
		return nil, err
	}
	p, err := profile.Build(as, es, profile.Options{Name: opts.Name, Interval: opts.Interval})
	if err != nil {
		return nil, err
	}
	return writeProfile(p, opts.Out, out)
}

// writeProfile writes p to the file path, or to out when path is "" or "-".
func writeProfile(p *profile.Profile, path string, out io.Writer) (*profile.Profile, error) {
	data, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	if path == "" || path == "-" {
		_, err = out.Write(data)
		return p, err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, outcome.Usagef("--out: %v", err)
	}
	fmt.Fprintf(out, "profile %s written to %s\n", p.Describe(), path)
	for _, a := range p.Assumptions {
		fmt.Fprintf(out, "  assumed %s = %g: %s\n", a.Figure, a.Assumed, a.Why)
	}
	for _, n := range p.Source.Notes {
		fmt.Fprintf(out, "  note: %s\n", n)
	}
	return p, nil
}

var scrapeName = regexp.MustCompile(`^(kube-apiserver|etcd)-(\d+)\.(\d+)\.prom$`)

// runScrapes finds a controlplane run's scrapes: NAME.N.prom in its MetricsDir, per process in order.
func runScrapes(dir string) (apiservers, etcd [][]string, err error) {
	entries, err := os.ReadDir(filepath.Join(dir, MetricsDir))
	if err != nil {
		return nil, nil, outcome.Usagef("--run %s: no scrapes (a controlplane run saves them in %s/): %v", dir, MetricsDir, err)
	}
	type file struct {
		n    int
		path string
	}
	byProc := map[string][]file{}
	for _, e := range entries {
		m := scrapeName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[3])
		proc := m[1] + "-" + m[2]
		byProc[proc] = append(byProc[proc], file{n, filepath.Join(dir, MetricsDir, e.Name())})
	}
	procs := make([]string, 0, len(byProc))
	for p := range byProc {
		procs = append(procs, p)
	}
	sort.Slice(procs, func(i, j int) bool {
		ki, ni, _ := strings.Cut(procs[i], "-")
		kj, nj, _ := strings.Cut(procs[j], "-")
		if ki != kj {
			return ki < kj
		}
		a, _ := strconv.Atoi(ni[strings.LastIndexByte(ni, '-')+1:])
		b, _ := strconv.Atoi(nj[strings.LastIndexByte(nj, '-')+1:])
		return a < b
	})
	for _, p := range procs {
		files := byProc[p]
		sort.Slice(files, func(i, j int) bool { return files[i].n < files[j].n })
		var paths []string
		for _, f := range files {
			paths = append(paths, f.path)
		}
		if strings.HasPrefix(p, "etcd-") {
			etcd = append(etcd, paths)
		} else {
			apiservers = append(apiservers, paths)
		}
	}
	if len(apiservers) == 0 {
		return nil, nil, outcome.Usagef("--run %s: no kube-apiserver scrapes in %s/", dir, MetricsDir)
	}
	return apiservers, etcd, nil
}

// parseWhen reads a time: RFC 3339, or a duration before now ("15m"); "" is now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return now, nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(v, "-")); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, outcome.Usagef("%s %q: an RFC 3339 time or a duration before now (15m)", flag, v)
	}
	return t, nil
}
