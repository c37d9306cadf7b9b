package chaosbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/faults"
)

// FaultOptions are a scenario's fault settings (see package faults and docs/faults.md).
type FaultOptions struct {
	// Schedule holds fault specs (kill:leader@20s+5s, ...); "default" is the default schedule, "none" none.
	Schedule []string `json:"schedule"`
	// HealthTimeout bounds the health check before each fault; RecoveryTimeout the wait for the cluster to
	// be healthy again after each heal (exceeding it fails the run with exit code 3); Settle is how long a
	// window is still observed once the cluster is healthy (its recovery phase).
	HealthTimeout   time.Duration `json:"fault-health-timeout"`
	RecoveryTimeout time.Duration `json:"fault-recovery-timeout"`
	Settle          time.Duration `json:"fault-settle"`
	// SlowFS mounts slowfs under the members' data: auto (when the schedule has disk faults), on or off.
	SlowFS string `json:"slowfs"`
	// ClientProxies puts a proxy in front of every member's client port (on automatically when a
	// partition cuts clients off).
	ClientProxies bool `json:"client-proxies"`
	// SkipOK allows faults that did not happen: a fault skipped because the cluster was not healthy before
	// it, and a nemesis that found nothing to inject. Without it each fails the run (a harness error).
	SkipOK bool `json:"fault-skip-ok"`
}

// DefaultFaultOptions returns the fault settings of a plain run: the default schedule.
func DefaultFaultOptions() FaultOptions {
	return FaultOptions{
		Schedule:        []string{"default"},
		HealthTimeout:   20 * time.Second,
		RecoveryTimeout: 30 * time.Second,
		Settle:          5 * time.Second,
		SlowFS:          "auto",
	}
}

// bindFaultFlags defines the fault flags of `chaosbench run`.
func bindFaultFlags(fs *pflag.FlagSet, o *FaultOptions) {
	fs.Var(&faultsValue{specs: &o.Schedule}, "faults",
		`fault schedule, comma-separated: KIND[:TARGET][=VALUE]@AT[~JITTER][+FOR][/EVERY], e.g. kill:leader@20s+5s,partition:leader@40s+10s; "nemesis" picks faults at random (seeded); "none" runs none; "default" is a leader kill at 1/3 and a leader partition at 2/3 of the load. Kinds: `+strings.Join(faults.KindNames, ", "))
	fs.DurationVar(&o.HealthTimeout, "fault-health-timeout", o.HealthTimeout, "how long the cluster may take to be healthy before a fault (else the fault is skipped)")
	fs.DurationVar(&o.RecoveryTimeout, "fault-recovery-timeout", o.RecoveryTimeout, "how long the cluster may take to be healthy again after a fault is healed (else the run fails, exit code 3)")
	fs.DurationVar(&o.Settle, "fault-settle", o.Settle, "how long each fault window is still observed once the cluster is healthy again (its recovery phase)")
	fs.StringVar(&o.SlowFS, "slowfs", o.SlowFS, "serve members' data through the slowfs FUSE filesystem for disk faults: auto (when the schedule has disk faults), on or off (disk faults then use strace)")
	fs.BoolVar(&o.SkipOK, "fault-skip-ok", o.SkipOK, "a fault skipped on an unhealthy cluster, or a nemesis with nothing to inject, does not fail the run (it is reported as allowed)")
	fs.BoolVar(&o.ClientProxies, "client-proxies", o.ClientProxies, "put a proxy in front of every member's client port, so that partitions can cut clients off (=clients)")
}

// faultsValue is the --faults flag: a list of specs. The first value given replaces the default, later
// ones add to it. In a scenario file it takes a spec string, a list of spec strings, or a list of
// structured entries (fault, target, value, at, jitter, for, every).
type faultsValue struct {
	specs   *[]string
	changed bool
}

var (
	_ pflag.Value      = (*faultsValue)(nil)
	_ pflag.SliceValue = (*faultsValue)(nil)
)

func (v *faultsValue) String() string { return strings.Join(*v.specs, ",") }

func (v *faultsValue) Type() string { return "specs" }

func (v *faultsValue) Set(s string) error {
	if !v.changed {
		*v.specs = nil
		v.changed = true
	}
	*v.specs = append(*v.specs, s)
	return nil
}

func (v *faultsValue) Append(s string) error { return v.Set(s) }

func (v *faultsValue) Replace(ss []string) error {
	*v.specs = slices.Clone(ss)
	v.changed = true
	return nil
}

func (v *faultsValue) GetSlice() []string { return slices.Clone(*v.specs) }

// SetYAML applies a scenario file's value (see setFromYAML).
func (v *faultsValue) SetYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return v.Replace([]string{n.Value})
	case yaml.SequenceNode:
		var specs []string
		for _, item := range n.Content {
			switch item.Kind {
			case yaml.ScalarNode:
				specs = append(specs, item.Value)
			case yaml.MappingNode:
				spec, err := structuredSpec(item)
				if err != nil {
					return err
				}
				specs = append(specs, spec)
			default:
				return fmt.Errorf("line %d: a fault spec or a mapping (fault, target, value, at, for, ...)", item.Line)
			}
		}
		return v.Replace(specs)
	}
	return fmt.Errorf("line %d: a fault spec or a list of them", n.Line)
}

// structuredSpec turns a structured YAML entry, such as {fault: kill, target: leader, at: 20s, for: 5s},
// into a spec string (kill:leader@20s+5s).
func structuredSpec(n *yaml.Node) (string, error) {
	fields := map[string]string{}
	keys := []string{"fault", "target", "value", "at", "jitter", "for", "every"}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !slices.Contains(keys, k.Value) {
			return "", fmt.Errorf("line %d: unknown fault field %q (have %s)", k.Line, k.Value, strings.Join(keys, ", "))
		}
		if val.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("line %d: %s: expected a plain value", val.Line, k.Value)
		}
		if _, dup := fields[k.Value]; dup {
			return "", fmt.Errorf("line %d: %s is set twice", k.Line, k.Value)
		}
		fields[k.Value] = val.Value
	}
	if fields["fault"] == "" {
		return "", fmt.Errorf("line %d: a fault entry needs a fault: kind", n.Line)
	}
	spec := fields["fault"]
	if t := fields["target"]; t != "" {
		spec += ":" + t
	}
	if v := fields["value"]; v != "" {
		spec += "=" + v
	}
	if at := fields["at"]; at != "" {
		spec += "@" + at
		if j := fields["jitter"]; j != "" {
			spec += "~" + j
		}
		if d := fields["for"]; d != "" {
			spec += "+" + d
		}
		if e := fields["every"]; e != "" {
			spec += "/" + e
		}
	} else if fields["jitter"]+fields["for"]+fields["every"] != "" {
		return "", fmt.Errorf("line %d: jitter, for and every need at", n.Line)
	}
	return spec, nil
}
