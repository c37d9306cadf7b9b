package chaosbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	units "github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// bindVersionFlags defines the flags of etcd versions and of the docker backend.
func bindVersionFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringVar(&s.EtcdVersion, "etcd-version", s.EtcdVersion,
		"etcd release of the members: builtin (the etcd linked into chaosbench), a release such as v3.5.35 (built from the Go "+
			"module proxy once, then cached), or one per member separated by commas, e.g. v3.5.35,v3.5.35,v3.6.16 (default builtin)")
	fs.BoolVar(&s.Failpoints, "failpoints", s.Failpoints, "run failpoint builds of the --etcd-version releases (gofail enabled, built and cached apart), for failpoint:TARGET=NAME:ACTION faults; embed and docker clusters")
	fs.Float64Var(&s.MemberCPUs, "member-cpus", s.MemberCPUs, "docker: CPU limit of each member container in cores, e.g. 1.5 (0: no limit)")
	fs.StringVar(&s.MemberMemory, "member-memory", s.MemberMemory, "docker: memory limit of each member container, e.g. 2GiB (swap included; empty: no limit)")
}

// SplitVersions splits an --etcd-version value into one version per member (or a single version for all):
// members are separated by commas or "+".
func SplitVersions(spec string) []string {
	if strings.TrimSpace(spec) == "" {
		return nil
	}
	var out []string
	for _, v := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '+' }) {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

// validateVersions checks the version and docker settings that need nothing built to check.
func (s *Scenario) validateVersions() error {
	versions := SplitVersions(s.EtcdVersion)
	if s.Cluster == "external" && len(versions) > 0 {
		return outcome.Usagef("--etcd-version is for clusters chaosbench starts")
	}
	if len(versions) > 1 && len(versions) != s.Members {
		return outcome.Usagef("--etcd-version %s: %d versions for %d members; give one, or one per member", s.EtcdVersion, len(versions), s.Members)
	}
	for _, v := range versions {
		if v == etcdbuild.Builtin {
			continue
		}
		if _, err := etcdbuild.Parse(v); err != nil {
			return err
		}
	}
	if s.Failpoints {
		switch {
		case s.Cluster == "external":
			return outcome.Usagef("--failpoints: failpoint builds run on clusters chaosbench starts (embed or docker), not on an external one")
		case allBuiltin(versions):
			return outcome.Usagef("--failpoints: the builtin etcd has no failpoints; give a release, e.g. --etcd-version v3.6.16 --failpoints")
		}
	}
	if s.Cluster != "docker" && (s.MemberCPUs != 0 || s.MemberMemory != "") {
		return outcome.Usagef("--member-cpus and --member-memory are for --cluster docker")
	}
	if s.MemberCPUs < 0 || (s.MemberCPUs > 0 && s.MemberCPUs < 0.01) {
		return outcome.Usagef("--member-cpus %g: at least 0.01 cores (0: no limit)", s.MemberCPUs)
	}
	if _, err := s.memberMemory(); err != nil {
		return err
	}
	return nil
}

func (s *Scenario) memberMemory() (int64, error) {
	if s.MemberMemory == "" || s.MemberMemory == "0" {
		return 0, nil
	}
	n, err := units.RAMInBytes(s.MemberMemory)
	if err != nil || n < 64<<20 {
		return 0, outcome.Usagef("--member-memory %q: a size of at least 64MiB, such as 512MiB or 2GiB", s.MemberMemory)
	}
	return n, nil
}

// resolveMembers builds (or finds cached) the etcd binaries the members run and parses --etcd-flag against
// them. images is nil for an embedded cluster of the linked etcd, which needs nothing resolved; it holds
// one image for all members or one per member otherwise, followed by one image for each of the releases
// in more (those the fault schedule moves members to: see Scenario.memberImages), against which the flags
// are checked too.
func (s *Scenario) resolveMembers(ctx context.Context, log io.Writer, more ...string) ([]clusters.EtcdFlag, []clusters.EtcdImage, error) {
	versions := SplitVersions(s.EtcdVersion)
	if s.Cluster == "external" || (s.Cluster == "embed" && allBuiltin(versions)) {
		flags, err := clusters.ParseEtcdFlags(s.EtcdFlags)
		return flags, nil, err
	}
	if len(versions) == 0 {
		versions = []string{etcdbuild.Builtin}
	}
	versions = append(versions, more...)
	images := make([]clusters.EtcdImage, len(versions))
	for i, v := range versions {
		var err error
		if images[i], err = clusters.ResolveImage(ctx, v, clusters.ImageOptions{Log: log, Failpoints: s.Failpoints}); err != nil {
			if ctx.Err() != nil {
				return nil, nil, ErrInterrupted
			}
			return nil, nil, err
		}
	}
	if s.Cluster == "docker" {
		// Problems a user fixes (no Docker, a cgo build for the builtin image) are found before the run
		// directory exists.
		for _, img := range images {
			if img.Builtin {
				if err := clusters.CheckStatic(img.Binary); err != nil {
					return nil, nil, err
				}
			}
		}
		d, err := clusters.DockerClient(ctx)
		if err != nil {
			return nil, nil, err
		}
		d.Close()
	}
	if lo, hi := minorRange(images); hi-lo > 1 {
		// etcd supports clusters of adjacent minor versions only (the upgrade path): a 3.6 leader sends
		// 3.4 members entries they cannot apply. Running it anyway shows exactly that, so warn only.
		fmt.Fprintf(log, "warning: --etcd-version %s mixes etcd 3.%d and 3.%d; etcd supports mixing adjacent minor versions only\n", s.EtcdVersion, lo, hi)
	}
	flags, err := clusters.ParseEtcdFlagsFor(ctx, s.EtcdFlags, images)
	return flags, images, err
}

// memberImages splits what resolveMembers returned into the members' images and the images of the
// releases the fault schedule moves members to (the last len(more) of them).
func memberImages(images []clusters.EtcdImage, more int) (members, moved []clusters.EtcdImage) {
	if images == nil {
		return nil, nil
	}
	return images[:len(images)-more], images[len(images)-more:]
}

// minorRange returns the lowest and highest minor version among the images.
func minorRange(images []clusters.EtcdImage) (lo, hi int) {
	for i, img := range images {
		m := img.Minor()
		if i == 0 || m < lo {
			lo = m
		}
		hi = max(hi, m)
	}
	return lo, hi
}

func allBuiltin(versions []string) bool {
	for _, v := range versions {
		if v != etcdbuild.Builtin {
			return false
		}
	}
	return true
}

// failpointNames returns the failpoints every member's build has (nil without failpoint builds).
func failpointNames(images []clusters.EtcdImage) []string {
	var have []string
	for i, img := range images {
		if i == 0 {
			have = slices.Clone(img.Failpoints)
			continue
		}
		have = slices.DeleteFunc(have, func(n string) bool { return !slices.Contains(img.Failpoints, n) })
	}
	return have
}

func (s *Scenario) clusterDescription() string {
	switch s.Cluster {
	case "embed", "docker":
		kind := map[string]string{"embed": "embedded", "docker": "docker"}[s.Cluster]
		desc := fmt.Sprintf("%d-member %s", s.Members, kind)
		if s.EtcdVersion != "" {
			desc += " (etcd " + s.EtcdVersion
			if s.Failpoints {
				desc += ", failpoint builds"
			}
			desc += ")"
		}
		return desc
	}
	return s.Cluster
}
