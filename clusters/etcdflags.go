package clusters

import (
	"flag"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"go.etcd.io/etcd/server/v3/embed"
)

// isManagedFlag reports whether chaosbench sets the etcd flag itself for the members it starts.
func isManagedFlag(name string) bool {
	switch name {
	case "name", "data-dir", "config-file",
		"listen-client-urls", "advertise-client-urls", "listen-client-http-urls",
		"listen-peer-urls", "initial-advertise-peer-urls", "listen-metrics-urls",
		"initial-cluster", "initial-cluster-state", "initial-cluster-token",
		"log-outputs", "discovery", "discovery-srv",
		"cert-file", "key-file", "trusted-ca-file", "client-cert-auth":
		return true
	}
	return false
}

// etcdFlagSet returns a flag set with every flag the linked etcd server accepts on its command line: the
// embed configuration's flags plus the few etcdmain adds, bound to the returned throwaway Config.
func etcdFlagSet() (*flag.FlagSet, *embed.Config) {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := embed.NewConfig()
	cfg.AddFlags(fs)
	for _, name := range []string{"config-file", "discovery-fallback", "initial-cluster-state", "v2-deprecation"} {
		if fs.Lookup(name) == nil {
			fs.String(name, "", "")
		}
	}
	return fs, cfg
}

// EtcdFlag is one etcd setting passed through to the members, as --name=value.
type EtcdFlag struct {
	Name  string
	Value string
}

// Arg returns the flag as a command-line argument.
func (f EtcdFlag) Arg() string { return "--" + f.Name + "=" + f.Value }

// ParseEtcdFlags parses "name=value" settings (a bare "name" means "name=true") and checks each against
// the flags the etcd server accepts: unknown names, unparsable values and flags chaosbench manages itself
// are usage errors. The settings together then go through etcd's own configuration check, so that
// conflicts between them (an election timeout shorter than five heartbeats, ...) are usage errors too,
// found before anything starts.
func ParseEtcdFlags(specs []string) ([]EtcdFlag, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	fs, cfg := etcdFlagSet()
	var out []EtcdFlag
	for _, spec := range specs {
		name, value, hasValue := strings.Cut(strings.TrimSpace(spec), "=")
		name = strings.TrimLeft(name, "-")
		if name == "" {
			return nil, outcome.Usagef("--etcd-flag %q: expected name=value", spec)
		}
		if isManagedFlag(name) {
			return nil, outcome.Usagef("--etcd-flag %s: chaosbench sets this flag itself for the members it starts", name)
		}
		f := fs.Lookup(name)
		if f == nil {
			if s := outcome.Suggest(name, flagNames(fs)); s != "" {
				return nil, outcome.Usagef("--etcd-flag %s: etcd has no such flag (did you mean %s?)", name, s)
			}
			return nil, outcome.Usagef("--etcd-flag %s: etcd has no such flag", name)
		}
		if !hasValue {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
				return nil, outcome.Usagef("--etcd-flag %s: expected %s=value", name, name)
			}
			value = "true"
		}
		if err := fs.Set(name, value); err != nil {
			return nil, outcome.Usagef("--etcd-flag %s=%s: %v", name, value, err)
		}
		out = append(out, EtcdFlag{Name: name, Value: value})
	}
	fs.Visit(func(f *flag.Flag) { cfg.FlagsExplicitlySet[f.Name] = true })
	cfg.LogOutputs = []string{os.DevNull} // Validate sets up logging and warns about the defaults
	if err := cfg.Validate(); err != nil {
		return nil, outcome.Usagef("--etcd-flag: etcd rejects these settings: %v", err)
	}
	return out, nil
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	return names
}
