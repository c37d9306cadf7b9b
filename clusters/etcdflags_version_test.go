package clusters

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestParseEtcdFlagsFor: each release judges --etcd-flag with its own parser: 3.6 dropped --enable-v2,
// which 3.5 still takes; a mixed cluster needs flags every member's release takes.
func TestParseEtcdFlagsFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v35, err := ResolveImage(ctx, testV35, ImageOptions{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	v36, err := ResolveImage(ctx, testV36, ImageOptions{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	builtin := EtcdImage{Ref: "builtin", Builtin: true}
	tests := []struct {
		name   string
		flags  []string
		images []EtcdImage
		errHas string // "" when the flags are accepted
	}{
		{name: "3.5 takes enable-v2", flags: []string{"enable-v2=true"}, images: []EtcdImage{v35}},
		{name: "3.6 refuses enable-v2", flags: []string{"enable-v2=true"}, images: []EtcdImage{v36}, errHas: "etcd v3.6.16 rejects it: flag provided but not defined: -enable-v2"},
		{name: "mixed refuses what one member refuses", flags: []string{"enable-v2=true"}, images: []EtcdImage{v35, v35, v36}, errHas: "etcd v3.6.16 rejects it"},
		{name: "common flags", flags: []string{"heartbeat-interval=50", "election-timeout=500", "snapshot-count"}, images: []EtcdImage{v35, v36}, errHas: `invalid value "true" for flag -snapshot-count`},
		{name: "bad value", flags: []string{"snapshot-count=many"}, images: []EtcdImage{v35}, errHas: `invalid value "many"`},
		{name: "managed", flags: []string{"data-dir=/x"}, images: []EtcdImage{v35}, errHas: "sets this flag itself"},
		{name: "builtin suggests", flags: []string{"heartbeat-intervall=50"}, images: []EtcdImage{builtin}, errHas: "did you mean heartbeat-interval"},
		{name: "good", flags: []string{"heartbeat-interval=50", "election-timeout=500"}, images: []EtcdImage{v35, v36, builtin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags, err := ParseEtcdFlagsFor(ctx, tt.flags, tt.images)
			if tt.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(flags) != len(tt.flags) {
					t.Fatalf("got %v", flags)
				}
				return
			}
			if !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("got %v, want a usage error containing %q", err, tt.errHas)
			}
		})
	}
}
