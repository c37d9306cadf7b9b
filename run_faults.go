package chaosbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// faultRun is a run's fault schedule from validation to summary. Every method is safe on a nil or empty
// plan (no faults), so that the run pipeline calls them unconditionally.
type faultRun struct {
	opts   FaultOptions
	sched  faults.Schedule
	note   string // why the default schedule is empty, or what it is
	slowfs bool
	track  bool
	client bool
	// proxies: a docker cluster routes peer traffic through host proxies for the schedule's network faults.
	proxies bool

	phases *results.Phases
	runner *faults.Runner
}

// faultStopTimeout bounds healing the faults when the load ends; faultInterruptTimeout when the run was
// interrupted (nothing is waited for then but the heals themselves).
const (
	faultStopTimeout      = 45 * time.Second
	faultInterruptTimeout = 5 * time.Second
)

// planFaults parses and validates the scenario's fault schedule against the cluster it describes. Every
// problem is a usage error: nothing has started yet.
func planFaults(s *Scenario) (*faultRun, error) {
	o := s.Faults
	if !slices.Contains([]string{"auto", "on", "off"}, o.SlowFS) {
		return nil, outcome.Usagef("--slowfs %q: auto, on or off", o.SlowFS)
	}
	if o.HealthTimeout <= 0 || o.RecoveryTimeout <= 0 || o.Settle < 0 {
		return nil, outcome.Usagef("--fault-health-timeout and --fault-recovery-timeout must be positive, --fault-settle not negative")
	}
	if s.Cluster == "external" && o.SlowFS == "on" {
		return nil, outcome.Usagef("--slowfs is for clusters chaosbench starts")
	}
	if s.Cluster != "embed" && o.ClientProxies {
		return nil, outcome.Usagef("--client-proxies is for embedded clusters")
	}
	p := &faultRun{opts: o}
	var specs []string
	for _, spec := range o.Schedule {
		if strings.TrimSpace(spec) != "default" {
			specs = append(specs, spec)
			continue
		}
		if s.Cluster == "external" {
			p.note = "no default faults on an external cluster"
			continue
		}
		def, reason := faults.DefaultSpecs(s.Duration, s.Members)
		if reason != "" {
			p.note = "no default faults: " + reason
		} else {
			p.note = "default faults: " + strings.Join(def, ",")
		}
		specs = append(specs, def...)
	}
	sched, err := faults.Parse(specs)
	if err != nil {
		return nil, err
	}
	p.sched = sched

	caps := faults.Capabilities{Backend: s.Cluster}
	if s.Cluster == "embed" {
		caps.Members, caps.Process, caps.Proxies, caps.Replace = s.Members, true, true, true
		caps.Failpoints = s.Failpoints
		p.client = o.ClientProxies || sched.NeedsClientProxies()
		caps.ClientProxies = p.client
	}
	if s.Cluster == "docker" {
		// Members are containers whose processes chaosbench controls (kill, stop, pause through the Docker
		// engine), whose peer traffic goes through proxies on the host when the schedule has network
		// faults, and whose release can change (rolling upgrades).
		caps.Members, caps.Process, caps.Proxies, caps.Images = s.Members, true, true, true
		caps.Failpoints = s.Failpoints
		p.proxies = sched.NeedsProxies()
	}
	if s.Cluster != "external" {
		fuseErr := slowfs.Available()
		if fuseErr == nil && s.Cluster == "docker" && os.Getuid() != 0 {
			// dockerd (root) must reach the FUSE mount to bind it into the container, and a FUSE mount
			// admits only its owner unless mounted with allow_other, which needs user_allow_other in
			// /etc/fuse.conf: chaosbench does not depend on that, so containers get slowfs only as root.
			fuseErr = errors.New("slowfs under containers needs chaosbench to run as root (dockerd must reach the FUSE mount)")
		}
		switch {
		case o.SlowFS == "on" && fuseErr != nil:
			return nil, outcome.Usagef("--slowfs on: %v", fuseErr)
		case o.SlowFS == "on", o.SlowFS == "auto" && sched.NeedsDisk() && fuseErr == nil:
			p.slowfs = true
			caps.Disk = "slowfs"
		case faults.StraceAvailable() == nil:
			caps.Disk = "strace"
			caps.DiskReason = "slowfs is off"
			if fuseErr != nil {
				caps.DiskReason = fuseErr.Error()
			}
		default:
			caps.DiskReason = "no FUSE and no strace"
			if fuseErr != nil {
				caps.DiskReason = fuseErr.Error() + ", and no strace in PATH"
			}
		}
		p.track = p.slowfs && sched.NeedsUnsyncedTracking()
		caps.TrackUnsynced = p.track
	}
	if err := sched.Validate(caps, s.Duration); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *faultRun) active() bool { return p != nil && !p.sched.Empty() }

// versions lists the releases the schedule moves members to: their images are built before the run.
func (p *faultRun) versions() []string {
	if p == nil {
		return nil
	}
	return p.sched.Versions()
}

// describe prints the plan: the schedule, or why there is none.
func (p *faultRun) describe(w io.Writer) {
	if p == nil {
		return
	}
	switch {
	case p.active() && strings.HasPrefix(p.note, "default faults:"):
		fmt.Fprintf(w, "%s (--faults none turns them off)\n", p.note)
	case p.active():
		specs := make([]string, len(p.sched.Entries))
		for i, e := range p.sched.Entries {
			specs[i] = e.Spec
		}
		fmt.Fprintf(w, "faults: %s\n", strings.Join(specs, ","))
	case p.note != "":
		fmt.Fprintln(w, p.note)
	}
	if p.slowfs {
		fmt.Fprintln(w, "member data directories are served through slowfs (FUSE) for disk faults")
	}
}

// configure adds what the schedule needs to an embedded cluster: slowfs mounts, client proxies, seeds.
func (p *faultRun) configure(o *clusters.EmbedOptions, seed int64) {
	o.Seed = uint64(seed)
	if p == nil {
		return
	}
	if p.slowfs {
		o.SlowFS = &clusters.SlowFSOptions{TrackUnsynced: p.track}
	}
	o.ClientProxies = p.client
}

// configureDocker adds what the schedule needs to a docker cluster: peer proxies, the images members move
// to, seeds.
func (p *faultRun) configureDocker(o *clusters.DockerOptions, seed int64, moreImages []clusters.EtcdImage) {
	o.Seed = uint64(seed)
	o.MoreImages = moreImages
	if p == nil {
		return
	}
	o.PeerProxies = p.proxies
	if p.slowfs {
		o.SlowFS = &clusters.SlowFSOptions{TrackUnsynced: p.track}
	}
}

// start creates the phase split and the runner, which waits for the load to begin; it returns the sinks
// to add to the recorder.
func (p *faultRun) start(c clusters.Cluster, dir string, base time.Time, s Scenario, out io.Writer, onFault func(string, []string, bool)) ([]results.Sink, error) {
	if !p.active() {
		return nil, nil
	}
	var err error
	if p.phases, err = results.NewPhases(results.CollectorOptions{Start: base, Warmup: s.Warmup}); err != nil {
		return nil, err
	}
	p.runner, err = faults.Start(c, p.sched, faults.Options{
		Base: base, Seed: s.Seed, Dir: dir, Log: out, Phases: p.phases, Duration: s.Duration,
		HealthTimeout: p.opts.HealthTimeout, RecoveryTimeout: p.opts.RecoveryTimeout, Settle: p.opts.Settle,
		Grace: s.RequestTimeout, AfterRecovery: membersAfterWindow(c), OnFault: onFault,
		SnapshotCatchUpEntries: catchUpEntries(s.EtcdFlags),
	})
	if err != nil {
		return nil, err
	}
	return []results.Sink{faultSink{p.phases, p.runner}}, nil
}

// faultSink files records by phase and starts the schedule when the load begins.
type faultSink struct {
	*results.Phases
	runner *faults.Runner
}

func (s faultSink) Begin(at time.Duration) {
	s.Phases.Begin(at)
	s.runner.Begin(at)
}

// stop heals every fault; it runs before the cluster stops, on every path (it is idempotent).
func (p *faultRun) stop(ctx context.Context) {
	if p == nil || p.runner == nil {
		return
	}
	reason, timeout := faults.LoadEnded, faultStopTimeout
	if ctx.Err() != nil {
		reason, timeout = faults.Interrupted, faultInterruptTimeout
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	// Stop's error sums up the windows that did not recover or inject; summarize reports each window.
	_ = p.runner.Stop(sctx, reason)
}

// summarize puts the windows, the phases (when the load was measured) and the schedule's problems into the
// summary. A window after which the cluster did not recover is an availability finding about etcd (like a
// failed threshold); every other problem is an error of the run, a reason of its outcome, unless the
// scenario allowed it: with --fault-skip-ok, skipped faults and faults that injected nothing are reported
// as allowed.
func (p *faultRun) summarize(s *results.Summary, from, end time.Duration, measured bool) {
	if p == nil || p.runner == nil {
		return
	}
	s.Faults = p.runner.Windows()
	if err := p.phases.Close(end); err == nil && measured && from < end {
		s.Phases = p.phases.Summary(from, end)
	}
	for _, pr := range p.runner.Problems() {
		switch {
		case pr.Kind == faults.ProblemNotRecovered:
			s.NotRecovered = append(s.NotRecovered, pr.String())
		case p.opts.SkipOK && (pr.Kind == faults.ProblemSkipped || pr.Kind == faults.ProblemNothingInjected):
			s.Allowed = append(s.Allowed, pr.String())
		default:
			s.Errors = append(s.Errors, pr.String())
		}
	}
}

// catchUpEntries returns the members' --snapshot-catchup-entries from the scenario's etcd flags (0: not
// set, etcd's default).
func catchUpEntries(etcdFlags []string) int {
	n := 0
	for _, f := range etcdFlags {
		name, value, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if name == "snapshot-catchup-entries" || name == "experimental-snapshot-catchup-entries" {
			n, _ = strconv.Atoi(value)
		}
	}
	return n
}
