package chaosbench

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
)

// bindControlPlaneFlags defines the flags of the controlplane workload.
func bindControlPlaneFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringVar(&s.KubeVersion, "kube-version", s.KubeVersion, "controlplane: Kubernetes release of the real control plane, built from the Go module proxy and cached (default "+kubebuild.DefaultVersion+")")
}

// kubeRelease parses --kube-version (usage errors start nothing).
func (s *Scenario) kubeRelease() (kubebuild.Release, error) {
	v := s.KubeVersion
	if v == "" {
		v = kubebuild.DefaultVersion
	}
	return kubebuild.Parse(v)
}

// buildControlPlane returns the control plane's binaries, building them first when they are not cached.
func (s *Scenario) buildControlPlane(ctx context.Context, log io.Writer) (kubebuild.Binaries, error) {
	rel, err := s.kubeRelease()
	if err != nil {
		return kubebuild.Binaries{}, err
	}
	return kubebuild.Build(ctx, rel, kubebuild.Options{Log: log})
}
