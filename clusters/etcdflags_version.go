package clusters

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// ParseEtcdFlagsFor parses --etcd-flag settings for members that run the given images. Flags change between
// etcd releases (3.6 dropped --enable-v2, 3.7 the --experimental- names), so each release judges its own:
// the etcd linked into chaosbench through ParseEtcdFlags (with suggestions for misspellings), a release
// built from the module proxy by running its binary with the flags and --version, which makes etcd parse
// every flag exactly as at start-up and exit. A flag a release rejects is a usage error naming the release.
func ParseEtcdFlagsFor(ctx context.Context, specs []string, images []EtcdImage) ([]EtcdFlag, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	checked := map[string]bool{}
	var out []EtcdFlag
	for _, img := range images {
		if checked[img.Ref] {
			continue
		}
		checked[img.Ref] = true
		if img.Builtin {
			flags, err := ParseEtcdFlags(specs)
			if err != nil {
				return nil, err
			}
			out = flags
			continue
		}
		flags, err := splitEtcdFlags(specs)
		if err != nil {
			return nil, err
		}
		if err := checkFlagsWith(ctx, img, flags); err != nil {
			return nil, err
		}
		out = flags
	}
	if out == nil {
		return ParseEtcdFlags(specs)
	}
	return out, nil
}

// splitEtcdFlags parses name=value settings without knowing the release's flags; only the flags chaosbench
// manages itself are refused here.
func splitEtcdFlags(specs []string) ([]EtcdFlag, error) {
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
		if !hasValue {
			value = "true"
		}
		out = append(out, EtcdFlag{Name: name, Value: value})
	}
	return out, nil
}

// checkFlagsWith runs img's binary with the flags and --version.
func checkFlagsWith(ctx context.Context, img EtcdImage, flags []EtcdFlag) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{"--version"}
	for _, f := range flags {
		args = append(args, f.Arg())
	}
	cmd := exec.CommandContext(ctx, img.Binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("check --etcd-flag with etcd %s: %w", img.Version, err)
	}
	return outcome.Usagef("--etcd-flag: etcd %s rejects it: %s", img.Version, firstLine(out.String()))
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return "(no output)"
}
