// Package chaosbench runs scenarios: an etcd cluster, a workload, and what to measure, as one library
// call. The command in cmd/chaosbench only parses flags into a Scenario and calls Run.
//
// A scenario is data. Every field is a flag of `chaosbench run`, and a scenario file (YAML) uses the flag
// names as keys, so the two cannot drift apart: values from the file apply first and flags given on the
// command line override them.
package chaosbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// Scenario is everything a run needs. JSON names match the flags.
type Scenario struct {
	Name string `json:"name"`
	Out  string `json:"out"`
	Seed int64  `json:"seed"`

	Cluster   string   `json:"cluster"`
	Members   int      `json:"members"`
	EtcdFlags []string `json:"etcd-flag,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
	CACert    string   `json:"cacert,omitempty"`
	Cert      string   `json:"cert,omitempty"`
	Key       string   `json:"key,omitempty"`
	TLS       bool     `json:"tls"`
	KeepData  bool     `json:"keep-data"`
	// Auth turns authentication on in a cluster chaosbench starts (clusters.EnableAuth): the load runs as
	// a user without the root role, the faults and checks as root.
	Auth bool `json:"auth,omitempty"`
	// User is who every client of an external cluster logs in as, etcdctl's --user name[:password]; the
	// password, from it or from PasswordFile, is kept out of the scenario as written down (validate
	// moves it to credentials, leaving the name).
	User         string `json:"user,omitempty"`
	PasswordFile string `json:"password-file,omitempty"`
	credentials  *clusters.Credentials

	// Versions and containers (scenario_docker.go).
	EtcdVersion string `json:"etcd-version,omitempty"`
	// Failpoints runs failpoint builds of the releases, for failpoint faults (scenario_docker.go).
	Failpoints   bool    `json:"failpoints,omitempty"`
	MemberCPUs   float64 `json:"member-cpus,omitempty"`
	MemberMemory string  `json:"member-memory,omitempty"`

	Workload       string        `json:"workload"`
	Rate           float64       `json:"rate"`
	Clients        int           `json:"clients"`
	Conns          int           `json:"conns"`
	Duration       time.Duration `json:"duration"`
	Total          int64         `json:"total"`
	Warmup         time.Duration `json:"warmup"`
	RequestTimeout time.Duration `json:"request-timeout"`
	ScheduleSlack  time.Duration `json:"schedule-slack"`

	Micro workloads.MicroOptions `json:"micro"`
	Kube  kube.Options           `json:"kube"`
	// Profile drives the kube workload (and the controlplane workload) from a kube workload profile
	// (chaosbench profile) instead of a preset, grown by Scale: objects, rates and watchers together, or
	// with ScaleRates the request rates alone. Explicit kube settings override the profile's.
	Profile    string  `json:"profile,omitempty"`
	Scale      float64 `json:"scale,omitempty"`
	ScaleRates bool    `json:"scale-rates,omitempty"`
	// KubeVersion is the Kubernetes release of the controlplane workload's real control plane.
	KubeVersion string `json:"kube-version,omitempty"`
	// DryRun prints the plan and starts nothing.
	DryRun bool `json:"-"`

	History  bool   `json:"history"`
	Progress string `json:"progress"`
	// LiveOptions export the run as Prometheus metrics while it runs (scenario_live.go).
	LiveOptions
	// WorkerOptions split the load over several generators (scenario_workers.go).
	WorkerOptions

	// Reports (see bindReportFlags).
	Thresholds     []string      `json:"threshold,omitempty"`
	ScrapeInterval time.Duration `json:"scrape-interval"`
	Faults         FaultOptions  `json:"faults"`
	// Consistency checks of the recorded history (see bindCheckFlags).
	Check        bool          `json:"check"`
	CheckTimeout time.Duration `json:"check-timeout"`
	// CheckDuringLoad checks the history recorded so far while the load runs (on up to one CPU), so that
	// the check after the load searches only the per-key segments the load's last stretch changed. Off by
	// default: the other passes still run after the load and are nearly all of its time, so it saves
	// nothing measurable of the wait yet, for the cost of a CPU during the load (docs/checks.md).
	CheckDuringLoad bool `json:"check-during-load"`
	// ReadDuringLoad reads the history for the check while the run writes it (linearizability.Follower):
	// the operations into the checker's store, the watch records through its first pass over them, so that
	// the check after the load does not: what it takes is what it would have built, so the verdict is the
	// same. On by default: it is work the check does anyway, done earlier.
	ReadDuringLoad bool `json:"read-during-load"`
	// KnownIssues is what a finding attributed by its evidence to a known upstream issue does to the
	// outcome: report (name it and pass) or fail (a violation).
	KnownIssues string `json:"known-issues,omitempty"`
}

// DefaultScenario returns the scenario of a plain `chaosbench run`.
func DefaultScenario() Scenario {
	return Scenario{
		Cluster:        "embed",
		Members:        3,
		Workload:       "kube",
		Rate:           1000,
		Clients:        64,
		Conns:          8,
		Duration:       60 * time.Second,
		RequestTimeout: 10 * time.Second,
		ScheduleSlack:  10 * time.Millisecond,
		Micro: workloads.MicroOptions{
			KeySize: 8, ValSize: 256, KeySpaceSize: 10000, KeyPrefix: "/bench/",
			Consistency: "l", RangeKeys: 1, TxnOps: 1, RWRatio: 1,
			WatchStreams: 10, WatchersPerStream: 10, WatchFrom: workloads.WatchFromNext,
		},
		History:        true,
		Progress:       live.ProgressAuto,
		ScrapeInterval: time.Second,
		Faults:         DefaultFaultOptions(),
		Check:          true,
		CheckTimeout:   5 * time.Minute,
		ReadDuringLoad: true,
		KnownIssues:    string(outcome.KnownIssuesReport),
		WorkerOptions:  WorkerOptions{Workers: 1, Worker: -1},
	}
}

// BindFlags defines every scenario field as a flag of fs, bound to s. The flag set is also the schema of
// scenario files (see LoadScenarioFile).
func BindFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringVar(&s.Name, "name", s.Name, "scenario name, used in the default output directory (default: the workload)")
	fs.StringVar(&s.Out, "out", s.Out, "run directory for results (default results/<time>-<name>)")
	fs.Int64Var(&s.Seed, "seed", s.Seed, "seed for every random choice; 0 picks one (printed and stored)")

	fs.StringVar(&s.Cluster, "cluster", s.Cluster, "cluster backend: embed (member processes started here), docker (member containers) or external")
	fs.IntVar(&s.Members, "members", s.Members, "members of an embedded or docker cluster: 1, 3 or 5")
	fs.StringArrayVar(&s.EtcdFlags, "etcd-flag", s.EtcdFlags, "etcd setting for every member, name=value (repeatable), e.g. heartbeat-interval=100")
	fs.StringSliceVar(&s.Endpoints, "endpoints", s.Endpoints, "an external cluster's endpoints, as etcdctl takes them: host:port (https with TLS files), http(s)://host:port or unix://path, comma-separated (default $ETCDCTL_ENDPOINTS)")
	fs.StringVar(&s.CACert, "cacert", s.CACert, "CA bundle to verify an external cluster's TLS certificates (default $ETCDCTL_CACERT)")
	fs.StringVar(&s.Cert, "cert", s.Cert, "client certificate for mutual TLS (default $ETCDCTL_CERT)")
	fs.StringVar(&s.Key, "key", s.Key, "client key for mutual TLS (default $ETCDCTL_KEY)")
	fs.BoolVar(&s.TLS, "tls", s.TLS, "embedded members serve clients over mutual TLS, as kube-apiserver's etcd does (certificates generated in the run directory)")
	fs.BoolVar(&s.KeepData, "keep-data", s.KeepData, "keep member data directories after a successful run")
	fs.BoolVar(&s.Auth, "auth", s.Auth, "enable authentication in the cluster chaosbench starts: a root user for the faults and checks, the load as a user whose role may read and write every key")
	fs.StringVar(&s.User, "user", s.User, "an external cluster with authentication on: log in as name[:password], as etcdctl (without a password: --password-file; default $ETCDCTL_USER)")
	fs.StringVar(&s.PasswordFile, "password-file", s.PasswordFile, "file whose first line is the password of --user")
	bindVersionFlags(fs, s)

	fs.StringVar(&s.Workload, "workload", s.Workload, "workload: "+strings.Join(WorkloadNames(), ", ")+" (kube: kube-apiserver's traffic, see the kube flags)")
	fs.Float64Var(&s.Rate, "rate", s.Rate, "target operations per second (open loop); 0 runs closed loop, every client flat out")
	fs.IntVar(&s.Clients, "clients", s.Clients, "concurrent clients (workers)")
	fs.IntVar(&s.Conns, "conns", s.Conns, "gRPC connections shared by the clients round robin")
	fs.DurationVar(&s.Duration, "duration", s.Duration, "length of the load, warm-up included (0 with --total: until the total is sent)")
	fs.Int64Var(&s.Total, "total", s.Total, "stop after this many operations (0: no limit)")
	fs.DurationVar(&s.Warmup, "warmup", s.Warmup, "initial period excluded from results")
	fs.DurationVar(&s.RequestTimeout, "request-timeout", s.RequestTimeout, "timeout of each request")
	fs.DurationVar(&s.ScheduleSlack, "schedule-slack", s.ScheduleSlack, "how late an operation may start before it counts as a missed slot")

	m := &s.Micro
	fs.IntVar(&m.KeySize, "key-size", m.KeySize, "minimum key size in bytes")
	fs.IntVar(&m.ValSize, "val-size", m.ValSize, "value size in bytes (at least 8)")
	fs.IntVar(&m.KeySpaceSize, "key-space-size", m.KeySpaceSize, "number of distinct keys")
	fs.BoolVar(&m.SequentialKeys, "sequential-keys", m.SequentialKeys, "use keys in order instead of at random")
	fs.StringVar(&m.KeyPrefix, "key-prefix", m.KeyPrefix, "prefix of every key the micro workloads write")
	fs.StringVar(&m.Consistency, "consistency", m.Consistency, "reads: l (linearizable) or s (serializable)")
	fs.Int64Var(&m.Limit, "limit", m.Limit, "maximum keys per range (0: no limit; txn-mixed reads default to 1000)")
	fs.BoolVar(&m.KeysOnly, "keys-only", m.KeysOnly, "ranges return keys only")
	fs.BoolVar(&m.CountOnly, "count-only", m.CountOnly, "ranges return the count only")
	fs.IntVar(&m.RangeKeys, "range-keys", m.RangeKeys, "consecutive keys per range: 1 reads one key, 0 the whole key space")
	fs.IntVar(&m.TxnOps, "txn-ops", m.TxnOps, "puts per txn-put transaction")
	fs.Float64Var(&m.RWRatio, "rw-ratio", m.RWRatio, "txn-mixed reads per write")
	fs.IntVar(&m.WatchStreams, "watch-streams", m.WatchStreams, "watch-latency: gRPC watch streams")
	fs.IntVar(&m.WatchersPerStream, "watchers-per-stream", m.WatchersPerStream, "watch-latency: watchers per stream")
	fs.BoolVar(&m.PrevKV, "prev-kv", m.PrevKV, "watch-latency: ask for previous key-values")
	fs.Float64Var(&m.DeleteRatio, "delete-ratio", m.DeleteRatio, "share of the writes of put, txn-put, txn-mixed and watch-latency that delete their key instead (0 to 1)")
	fs.DurationVar(&m.WatchReopen, "watch-reopen", m.WatchReopen, "watch-latency: every watcher closes its watch and opens a new one at this interval, at --watch-from (0: never; a watcher told its revision was compacted always watches again from the compaction revision)")
	fs.Float64Var(&m.TxnPastRead, "txn-past-read", m.TxnPastRead, "txn-mixed: share of the writes that also read their key at a past revision in the same transaction (up to 64 revisions back, compacted or not: a compacted one must fail the whole transaction, etcd-io/etcd#18667)")
	fs.DurationVar(&m.WatchProgress, "watch-progress", m.WatchProgress, "watch-latency: every watch stream asks etcd for a progress notification at this interval (0: never); the watch check holds etcd to it: no event at or below a notification's revision may come after it (etcd-io/etcd#15220)")
	fs.BoolVar(&m.WatchPin, "watch-pin", m.WatchPin, "watch-latency: watch stream i keeps to the i-th member (round robin over the endpoints), so that a member that crashed or was cut off keeps its watchers when it comes back")
	fs.StringVar(&m.WatchFrom, "watch-from", m.WatchFrom, "watch-latency: where a re-opened watch starts: "+strings.Join(workloads.WatchFromNames, ", ")+" (next: after the last event seen; past: up to 64 revisions before it, compacted or not; future: a revision not written yet)")

	fs.BoolVar(&s.History, "history", s.History, "record every request and watch event (history.bin, watch.bin) for consistency checks")
	fs.StringVar(&s.Progress, "progress", s.Progress, "progress display: auto, bars, lines or none")
	bindLiveFlags(fs, &s.LiveOptions)
	bindWorkerFlags(fs, &s.WorkerOptions)

	bindKubeFlags(fs, s)
	bindControlPlaneFlags(fs, s)
	bindReportFlags(fs, s)
	bindFaultFlags(fs, &s.Faults)
	bindCheckFlags(fs, s)
}

// bindCheckFlags defines the flags of the consistency checks a run makes of its own history.
func bindCheckFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.BoolVar(&s.Check, "check", s.Check, "check the recorded history at the end of the run: linearizability, watch guarantees, serializable reads (needs --history)")
	fs.DurationVar(&s.CheckTimeout, "check-timeout", s.CheckTimeout, "time limit of the checks; what is not decided in time is unknown, which is not a pass")
	fs.BoolVar(&s.CheckDuringLoad, "check-during-load", s.CheckDuringLoad, "check the history recorded so far while the load runs (up to one CPU, taken from the load), so that the check after it searches only the per-key segments the load's last stretch changed; the verdict is the same")
	fs.BoolVar(&s.ReadDuringLoad, "read-during-load", s.ReadDuringLoad, "read the history for the check while the load writes it (the operations into the check's store, the watch records through its first pass), so that the check after the load does not; the verdict is the same (--read-during-load=false: read it after the load)")
	fs.StringVar(&s.KnownIssues, "known-issues", s.KnownIssues, "a finding the recorded evidence attributes to a known upstream issue (linearizability/knownissues.yaml): report names it and passes, fail makes it a violation (exit 4)")
}

// LoadScenarioFile applies a YAML scenario file through fs, the flag set BindFlags filled: every key is a
// flag name, and keys whose flag was given on the command line are skipped, so flags override the file.
// Unknown keys, misspellings and bad values are usage errors that name the file and line.
func LoadScenarioFile(path string, fs *pflag.FlagSet) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return outcome.Usagef("--config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return outcome.Usagef("%s: %v", path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return outcome.Usagef("%s:%d: expected a mapping of settings (flag names as keys)", path, root.Line)
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		if k.Value == SuiteKey {
			// The suite's metadata (tags, seed policy): not a setting of the run (see LoadSuite).
			continue
		}
		f := fs.Lookup(k.Value)
		if f == nil || k.Value == "config" {
			if s := outcome.Suggest(k.Value, names); s != "" {
				return outcome.Usagef("%s: unknown setting %q (did you mean %q?)", where, k.Value, s)
			}
			return outcome.Usagef("%s: unknown setting %q", where, k.Value)
		}
		if seen[k.Value] {
			return outcome.Usagef("%s: %q is set twice", where, k.Value)
		}
		seen[k.Value] = true
		if f.Changed {
			continue
		}
		if err := setFromYAML(f, v); err != nil {
			return outcome.Usagef("%s: %s: %v", where, k.Value, err)
		}
	}
	return nil
}

func setFromYAML(f *pflag.Flag, v *yaml.Node) error {
	// Flags with structured values in scenario files (fault schedules) parse the node themselves.
	if y, ok := f.Value.(interface{ SetYAML(*yaml.Node) error }); ok {
		return y.SetYAML(v)
	}
	var values []string
	switch v.Kind {
	case yaml.ScalarNode:
		values = []string{v.Value}
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: expected a plain value", item.Line)
			}
			values = append(values, item.Value)
		}
	case yaml.MappingNode:
		// name: value pairs, as for etcd-flag.
		for i := 0; i+1 < len(v.Content); i += 2 {
			values = append(values, v.Content[i].Value+"="+v.Content[i+1].Value)
		}
	default:
		return errors.New("unsupported value")
	}
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.Replace(values)
	}
	if len(values) != 1 {
		return errors.New("expected a single value")
	}
	return f.Value.Set(values[0])
}

// OutDir returns the run directory: --out, or results/<time>-<name>.
func (s *Scenario) OutDir(now time.Time) string {
	if s.Out != "" {
		return s.Out
	}
	return filepath.Join("results", now.Format("20060102-150405")+"-"+s.DisplayName())
}

// DisplayName is the scenario's name, or its workload when it has none.
func (s *Scenario) DisplayName() string {
	if s.Name != "" {
		return s.Name
	}
	return s.Workload
}

// UseEnvironment gives an external cluster's settings that neither a flag nor the scenario file gave from
// etcdctl's environment variables, read with lookup (os.LookupEnv in the command, a map in tests):
// ETCDCTL_ENDPOINTS stands in for --endpoints, ETCDCTL_CACERT, ETCDCTL_CERT and ETCDCTL_KEY for --cacert,
// --cert and --key. As with etcdctl, each variable stands in for its own flag only, and a flag wins over its
// variable. Call it after the scenario file and the flags are applied.
//
// For clusters chaosbench starts (embed, docker) the variables are ignored: a shell set up for etcdctl must
// neither change which cluster a run measures nor make it fail. An ETCDCTL_ENDPOINTS that cannot be read is
// a usage error that names the variable.
func (s *Scenario) UseEnvironment(lookup func(key string) (string, bool)) error {
	if s.Cluster != "external" || lookup == nil {
		return nil
	}
	get := func(key string) string {
		v, _ := lookup(key)
		return strings.TrimSpace(v)
	}
	for _, f := range []struct {
		key   string
		field *string
	}{{"ETCDCTL_CACERT", &s.CACert}, {"ETCDCTL_CERT", &s.Cert}, {"ETCDCTL_KEY", &s.Key}} {
		if *f.field == "" {
			*f.field = get(f.key)
		}
	}
	if s.User == "" {
		s.User = get("ETCDCTL_USER")
		if v := get("ETCDCTL_PASSWORD"); v != "" && s.User != "" && !strings.Contains(s.User, ":") && s.PasswordFile == "" {
			s.credentials = &clusters.Credentials{User: s.User, Password: v}
		}
	}
	if len(s.Endpoints) == 0 {
		if v := get("ETCDCTL_ENDPOINTS"); v != "" {
			if _, err := clusters.ParseEndpoints([]string{v}, s.externalTLS()); err != nil {
				return outcome.Usagef("ETCDCTL_ENDPOINTS %w", err)
			}
			s.Endpoints = []string{v}
		}
	}
	return nil
}

// externalTLS reports whether TLS files were given for an external cluster: bare host:port endpoints are
// then https, as with etcdctl.
func (s *Scenario) externalTLS() bool {
	return s.CACert != "" || s.Cert != "" || s.Key != ""
}

// validateAuth reads --user and --password-file (etcdctl's semantics, see clusters.ParseUser) into
// credentials, leaving the name alone in User so that no password is written with the scenario.
func (s *Scenario) validateAuth() error {
	switch {
	case s.Auth && s.Cluster == "external":
		return outcome.Usagef("--auth is for clusters chaosbench starts; log in to an external cluster with --user")
	case s.User == "" && s.PasswordFile != "":
		return outcome.Usagef("--password-file is the password of --user; give --user")
	case s.User != "" && s.Cluster != "external":
		return outcome.Usagef("--user is for --cluster external; a cluster chaosbench starts gets its users from --auth")
	case (s.Auth || s.User != "") && s.Workload == "controlplane":
		return outcome.Usagef("--auth, --user: the controlplane workload's kube-apiserver does not log in to etcd yet")
	case (s.Auth || s.User != "") && s.Workers > 1 && !s.IsWorker():
		return outcome.Usagef("--auth, --user: a load split over --workers does not log in yet; run one generator")
	case s.User == "" || s.credentials != nil:
		return nil
	case s.PasswordFile != "" && !strings.Contains(s.User, ":"):
		// Read when the cluster is contacted, as the TLS files are: a dry run names files it does not open.
		if strings.TrimSpace(s.User) == "" {
			return outcome.Usagef("--user: no user name")
		}
		return nil
	}
	cr, err := clusters.ParseUser(s.User, s.PasswordFile)
	if err != nil {
		return err
	}
	s.credentials, s.User = &cr, cr.User
	return nil
}

// externalUser returns the credentials of --user, reading --password-file now when that is where the
// password is; nil without --user.
func (s *Scenario) externalUser() (*clusters.Credentials, error) {
	if s.credentials != nil || s.User == "" {
		return s.credentials, nil
	}
	cr, err := clusters.ParseUser(s.User, s.PasswordFile)
	if err != nil {
		return nil, err
	}
	return &cr, nil
}

// validate checks what does not need a cluster to check, and writes an external cluster's endpoints as
// the URLs the client will dial.
func (s *Scenario) validate() error {
	if err := s.LiveOptions.validate(); err != nil {
		return err
	}
	if !slices.Contains([]string{"embed", "docker", "external"}, s.Cluster) {
		return outcome.Usagef("--cluster %q: embed, docker or external", s.Cluster)
	}
	if s.Cluster != "external" && s.Members != 1 && s.Members != 3 && s.Members != 5 {
		kind := map[string]string{"embed": "an embedded", "docker": "a docker"}[s.Cluster]
		return outcome.Usagef("--members %d: %s cluster has 1, 3 or 5 members", s.Members, kind)
	}
	if err := s.validateVersions(); err != nil {
		return err
	}
	if s.Cluster == "external" {
		if len(s.Endpoints) == 0 {
			return outcome.Usagef("--cluster external needs --endpoints (or ETCDCTL_ENDPOINTS)")
		}
		eps, err := clusters.ParseEndpoints(s.Endpoints, s.externalTLS())
		if err != nil {
			return outcome.Usagef("--endpoints %w", err)
		}
		s.Endpoints = eps
	}
	if s.Cluster != "external" && (len(s.Endpoints) > 0 || s.CACert != "" || s.Cert != "" || s.Key != "") {
		return outcome.Usagef("--endpoints, --cacert, --cert and --key are for --cluster external")
	}
	if err := s.validateAuth(); err != nil {
		return err
	}
	if s.Cluster == "external" && s.TLS {
		return outcome.Usagef("--tls is for clusters chaosbench starts; give an external cluster's TLS files with --cacert, --cert and --key")
	}
	if !slices.Contains([]string{live.ProgressAuto, live.ProgressBars, live.ProgressLines, live.ProgressNone}, s.Progress) {
		return outcome.Usagef("--progress %q: auto, bars, lines or none", s.Progress)
	}
	if s.CheckTimeout < 0 {
		return outcome.Usagef("--check-timeout %s: must not be negative", s.CheckTimeout)
	}
	if _, err := outcome.ParseKnownIssuePolicy(s.KnownIssues); err != nil {
		return err
	}
	if s.Warmup < 0 || (s.Duration > 0 && s.Warmup >= s.Duration) {
		return outcome.Usagef("--warmup %s: must be shorter than --duration %s", s.Warmup, s.Duration)
	}
	if strings.ContainsAny(s.DisplayName(), `/\`) {
		return outcome.Usagef("--name %q: no slashes, it becomes part of a directory name", s.DisplayName())
	}
	if s.Out != "" {
		if _, err := os.Stat(filepath.Join(s.Out, results.SummaryFile)); err == nil {
			return outcome.Usagef("--out %s: already holds a run; choose another directory", s.Out)
		}
	}
	if err := s.validateReport(); err != nil {
		return err
	}
	return s.validateWorkers()
}
