package chaosbench

import (
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// workloadFlags names the workloads each workload-specific flag applies to; a flag not listed applies to
// every workload. A flag the chosen workload would ignore is bad input (CheckApplicable): a user who sets
// --val-size on the kube workload expects it to matter, and it would not.
var workloadFlags = func() map[string][]string {
	micro := workloads.MicroNames
	writers := []string{"put", "range", "txn-put", "txn-mixed", "watch-latency"}
	m := map[string][]string{
		"rate": micro, "clients": micro, "conns": micro,
		"key-size": micro, "key-space-size": micro, "key-prefix": micro,
		"val-size": writers, "sequential-keys": {"put", "range"},
		"consistency": {"range", "txn-mixed"}, "limit": {"range", "txn-mixed"},
		"keys-only": {"range"}, "count-only": {"range"}, "range-keys": {"range"},
		"txn-ops": {"txn-put"}, "rw-ratio": {"txn-mixed"},
		"watch-streams": {"watch-latency"}, "watchers-per-stream": {"watch-latency"}, "prev-kv": {"watch-latency"},
	}
	for _, f := range []string{"preset", "nodes", "pods-per-node", "namespaces", "churn", "list-rate", "apiservers",
		"event-ttl", "compaction-interval", "object-sizes"} {
		m[f] = []string{"kube", "controlplane"}
	}
	m["actors"], m["skip-actors"] = []string{"kube"}, []string{"kube"}
	m["kube-version"] = []string{"controlplane"}
	return m
}()

// CheckApplicable returns a usage error when a flag that was set on the command line (fs) or in the
// scenario file config (may be empty) does not apply to the workload, naming the workload-specific flags
// that do.
func CheckApplicable(workload string, fs *pflag.FlagSet, config string) error {
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	if config != "" {
		keys, err := scenarioFileKeys(config)
		if err != nil {
			return err
		}
		for _, k := range keys {
			set[k] = true
		}
	}
	var wrong []string
	fs.VisitAll(func(f *pflag.Flag) {
		if ws, ok := workloadFlags[f.Name]; ok && set[f.Name] && !slices.Contains(ws, workload) {
			wrong = append(wrong, "--"+f.Name)
		}
	})
	if len(wrong) == 0 {
		return nil
	}
	var apply []string
	for name, ws := range workloadFlags {
		if slices.Contains(ws, workload) {
			apply = append(apply, "--"+name)
		}
	}
	sort.Strings(apply)
	verb := "does"
	if len(wrong) > 1 {
		verb = "do"
	}
	if len(apply) == 0 {
		return outcome.Usagef("%s %s not apply to the %s workload, which takes no workload-specific flags", strings.Join(wrong, ", "), verb, workload)
	}
	return outcome.Usagef("%s %s not apply to the %s workload; its own flags are %s", strings.Join(wrong, ", "), verb, workload, strings.Join(apply, " "))
}

// scenarioFileKeys returns the settings a scenario file sets (its top-level keys).
func scenarioFileKeys(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.Usagef("--config: %v", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, outcome.Usagef("%s: %v", path, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys, nil
}
