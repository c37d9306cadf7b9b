package faults

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		specs []string
		check func(t *testing.T, s Schedule)
	}{
		{"issue example", []string{"kill:leader@20s+5s,partition:leader@40s+10s,slowdisk:follower=50ms@60s+20s"}, func(t *testing.T, s Schedule) {
			if len(s.Entries) != 3 {
				t.Fatalf("%d entries", len(s.Entries))
			}
			k, p, d := s.Entries[0], s.Entries[1], s.Entries[2]
			if k.Kind != KindKill || k.Target.Kind != TargetLeader || k.At != 20*time.Second || k.For != 5*time.Second || k.Every != 0 {
				t.Errorf("kill entry %+v", k)
			}
			if p.Kind != KindPartition || p.At != 40*time.Second || p.For != 10*time.Second {
				t.Errorf("partition entry %+v", p)
			}
			if d.Kind != KindSlowDisk || d.Target.Kind != TargetFollower || d.params.delay != 50*time.Millisecond || d.For != 20*time.Second {
				t.Errorf("slowdisk entry %+v", d)
			}
			if k.Spec != "kill:leader@20s+5s" {
				t.Errorf("spec %q", k.Spec)
			}
		}},
		{"every with jitter", []string{"pause:random@10s~5s+3s/30s"}, func(t *testing.T, s Schedule) {
			e := s.Entries[0]
			if e.At != 10*time.Second || e.Jitter != 5*time.Second || e.For != 3*time.Second || e.Every != 30*time.Second || e.Target.Kind != TargetRandom {
				t.Errorf("%+v", e)
			}
		}},
		{"delay with jitter", []string{"delay:leader=100ms~20ms@5s+10s"}, func(t *testing.T, s Schedule) {
			if p := s.Entries[0].params; p.delay != 100*time.Millisecond || p.jitter != 20*time.Millisecond {
				t.Errorf("%+v", p)
			}
		}},
		{"bandwidth on a named member", []string{"bandwidth:m2=1MiB@5s+10s"}, func(t *testing.T, s Schedule) {
			e := s.Entries[0]
			if e.Target != (Target{Kind: TargetMember, Member: "m2"}) || e.params.bandwidth != 1<<20 {
				t.Errorf("%+v", e)
			}
		}},
		{"bandwidth in bits", []string{"bandwidth:leader=10Mbit@5s"}, func(t *testing.T, s Schedule) {
			if bw := s.Entries[0].params.bandwidth; bw != 1250000 {
				t.Errorf("bandwidth %d", bw)
			}
		}},
		{"one-way partition cutting clients, default length", []string{"partition:minority=in|clients@5s"}, func(t *testing.T, s Schedule) {
			e := s.Entries[0]
			if !e.params.in || e.params.out || !e.params.client || e.For != 10*time.Second || e.Target.Kind != TargetMinority {
				t.Errorf("%+v", e)
			}
			if !s.NeedsClientProxies() || s.NeedsDisk() {
				t.Error("needs")
			}
		}},
		{"power loss", []string{"kill:all=drop-unsynced@5s+2s"}, func(t *testing.T, s Schedule) {
			if !s.Entries[0].params.dropUnsynced || !s.NeedsDisk() || !s.NeedsUnsyncedTracking() {
				t.Errorf("%+v", s.Entries[0])
			}
		}},
		{"nemesis defaults", []string{"nemesis"}, func(t *testing.T, s Schedule) {
			e := s.Entries[0]
			if e.At != 10*time.Second || e.Every != 20*time.Second || e.For != 5*time.Second || !s.NeedsDisk() {
				t.Errorf("%+v", e)
			}
		}},
		{"nemesis among kinds", []string{"nemesis=kill|pause@5s+3s/10s"}, func(t *testing.T, s Schedule) {
			e := s.Entries[0]
			if !slices.Equal(e.params.nemesis, []string{"kill", "pause"}) || e.Every != 10*time.Second || s.NeedsDisk() {
				t.Errorf("%+v", e)
			}
		}},
		{"operations", []string{"defrag@5s", "compact=1s@5s+10s", "snapshot:m1@6s", "replace:follower@7s"}, func(t *testing.T, s Schedule) {
			if s.Entries[0].Target.Kind != TargetAll || s.Entries[0].For != 0 {
				t.Errorf("defrag %+v", s.Entries[0])
			}
			if s.Entries[1].params.interval != time.Second || s.Entries[1].For != 10*time.Second {
				t.Errorf("compact %+v", s.Entries[1])
			}
		}},
		{"spaces and several flags", []string{" kill:leader@20s+5s , partition:leader@40s+10s", "reset:leader=500ms@1s+5s"}, func(t *testing.T, s Schedule) {
			if len(s.Entries) != 3 || s.Entries[2].params.interval != 500*time.Millisecond {
				t.Errorf("%+v", s.Entries)
			}
		}},
		{"none", []string{"none"}, func(t *testing.T, s Schedule) {
			if !s.Empty() {
				t.Error("none is not empty")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.specs)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

func TestParseBadSpecs(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"kil:leader@20s", "did you mean kill"},
		{"kill:leder@20s", `target "leder"`},
		{"kill:leader", "when? add @TIME"},
		{"kill:leader@20x", `time "20x"`},
		{"kill:leader@-5s", "must not be negative"},
		{"kill:leader@5s+", "missing duration"},
		{"kill:leader@5s+10s/5s", "occurrences would overlap"},
		{"kill:leader=softly@5s", "drop-unsynced"},
		{"delay:leader@5s", "delay needs a value"},
		{"delay:leader=fast@5s", `delay "fast"`},
		{"bandwidth:leader=1MBps@5s", `unit "MBps"`},
		{"bandwidth:leader=0@5s", "positive rate"},
		{"partition:leader=sideways@5s", `partition mode "sideways"`},
		{"partition:leader=in|refuse@5s", "cannot be one-way"},
		{"compact:leader@5s", "compact takes no target"},
		{"pause:leader=1s@5s", "pause takes no value"},
		{"slowdisk:leader=0s@5s", "disk delay of zero"},
		{"slowdisk:leader@5s", "slowdisk needs a value"},
		{"nemesis=kill|pauze", "did you mean pause"},
		{"none,kill:leader@5s", "cannot be combined"},
		{"reset:leader=0s@5s", "interval must be positive"},
		{"kill:leader@5s/0s", "interval must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := Parse([]string{tt.spec})
			if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want a usage error containing %q", tt.spec, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	embed := Capabilities{Backend: "embed", Members: 3, Process: true, Proxies: true, Replace: true, Disk: "slowfs"}
	external := Capabilities{Backend: "external"}
	strace := embed
	strace.Disk, strace.DiskReason = "strace", "FUSE unavailable: no /dev/fuse"
	none := embed
	none.Disk, none.DiskReason = "", "FUSE unavailable: no /dev/fuse, and no strace in PATH"
	single := embed
	single.Members = 1
	tests := []struct {
		name string
		spec string
		caps Capabilities
		want string // "" = valid
	}{
		{"kill on embed", "kill:leader@5s+1s", embed, ""},
		{"kill on external", "kill:leader@5s+1s", external, "needs control of member processes, which a external cluster"},
		{"partition on external", "partition:leader@5s", external, "peer proxies"},
		{"slowdisk on external", "slowdisk:leader=10ms@5s", external, "disks"},
		{"defrag on external", "defrag@5s", external, ""},
		{"compact on external", "compact@5s", external, ""},
		{"nemesis on external", "nemesis", external, ""},
		{"after the load", "kill:leader@60s", embed, "after the load ends"},
		{"follower of one", "kill:follower@5s", single, "no follower"},
		{"partition of one", "partition:m1@5s", single, "at least 2 members"},
		{"no such member", "kill:m4@5s", embed, "no member m4"},
		{"strace slowdisk", "slowdisk:leader=10ms@5s", strace, ""},
		{"strace jitter", "slowdisk:leader=10ms~5ms@5s", strace, "fixed time only"},
		{"no disk faults", "slowdisk:leader=10ms@5s", none, "unavailable here: FUSE unavailable"},
		{"drop-unsynced untracked", "kill:leader=drop-unsynced@5s", embed, "track unsynced writes"},
		{"drop-unsynced without FUSE", "kill:leader=drop-unsynced@5s", strace, "needs slowfs"},
		{"clients without proxies", "partition:leader=clients@5s", embed, "client proxies"},
		{"replace on one", "replace:m1@5s", single, "at least 3 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]string{tt.spec})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate(tt.caps, time.Minute)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestDefaultSpecs(t *testing.T) {
	specs, reason := DefaultSpecs(time.Minute, 3)
	if reason != "" || !slices.Equal(specs, []string{"kill:leader@20s+5s", "partition:leader@40s+10s"}) {
		t.Fatalf("default for 60s: %v (%s)", specs, reason)
	}
	specs, _ = DefaultSpecs(10*time.Minute, 5)
	s, err := Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(Capabilities{Backend: "embed", Members: 5, Process: true, Proxies: true, Replace: true}, 10*time.Minute); err != nil {
		t.Fatalf("default for 10m %v: %v", specs, err)
	}
	for _, tt := range []struct {
		d       time.Duration
		members int
	}{{10 * time.Second, 3}, {0, 3}, {time.Minute, 1}} {
		if specs, reason := DefaultSpecs(tt.d, tt.members); specs != nil || reason == "" {
			t.Errorf("DefaultSpecs(%v, %d) = %v, %q; want none and a reason", tt.d, tt.members, specs, reason)
		}
	}
}

// TestParseFailpoint: failpoint values name the point and the action; bad ones say what is wrong.
func TestParseFailpoint(t *testing.T) {
	good := map[string]string{
		"raftBeforeSave:panic":                "panic",
		"beforeCommit:sleep(200ms)":           "sleep(200)",
		"beforeCommit:sleep(150)":             "sleep(150)",
		"afterCommit:2*panic":                 "2*panic",
		"beforeSendWatchResponse:3*sleep(1s)": "3*sleep(1000)",
	}
	for v, term := range good {
		a, err := parseFailpoint(v)
		if err != nil || a.term() != term {
			t.Errorf("%s: term %q, %v; want %q", v, a.term(), err, term)
		}
	}
	for v, want := range map[string]string{
		"raftBeforeSave":             "needs NAME:ACTION",
		":panic":                     "needs NAME:ACTION",
		"raftBeforeSave:explode":     `action "explode"`,
		"raftBeforeSave:0*panic":     "a positive number",
		"raftBeforeSave:sleep(soon)": "sleep(soon)",
		"raftBeforeSave:sleep(1us)":  "at least 1ms",
	} {
		if _, err := parseFailpoint(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", v, err, want)
		}
	}
	s, err := Parse([]string{"failpoint:leader=raftBeforeSave:panic@2s+1s"})
	if err != nil || s.Entries[0].Target.Kind != TargetLeader || s.Entries[0].For != time.Second {
		t.Fatalf("%+v, %v", s, err)
	}
	if err := s.CheckFailpoints([]string{"raftAfterSave", "raftBeforeSave"}); err != nil {
		t.Errorf("a known failpoint: %v", err)
	}
	if err := s.CheckFailpoints([]string{"raftAfterSave"}); err == nil || !strings.Contains(err.Error(), "it has raftAfterSave") {
		t.Errorf("an unknown failpoint: %v", err)
	}
}

// TestFailpointAlternatives: NAME|NAME2 arms the first of the names the members' build has (a code point
// renamed between releases, as raftBeforeSave became raftBeforeSaveWaitWalSync for a single member in
// v3.5.5), and none of them is a usage error naming them all.
func TestFailpointAlternatives(t *testing.T) {
	for _, tc := range []struct {
		have []string
		want string
	}{
		{[]string{"raftAfterSave", "raftBeforeSave"}, "raftBeforeSave"},
		{[]string{"raftBeforeSave", "raftBeforeSaveWaitWalSync"}, "raftBeforeSaveWaitWalSync"},
	} {
		s, err := Parse([]string{"failpoint:leader=raftBeforeSaveWaitWalSync|raftBeforeSave:panic@2s+1s"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckFailpoints(tc.have); err != nil || s.Entries[0].params.failpoint.name != tc.want {
			t.Errorf("have %v: armed %q (%v), want %s", tc.have, s.Entries[0].params.failpoint.name, err, tc.want)
		}
	}
	s, _ := Parse([]string{"failpoint:leader=raftBeforeSaveWaitWalSync|raftBeforeSave:panic@2s+1s"})
	if err := s.CheckFailpoints([]string{"raftAfterSave"}); !outcome.IsUsage(err) || !strings.Contains(err.Error(), "none of the failpoints raftBeforeSaveWaitWalSync, raftBeforeSave") {
		t.Errorf("none of them: %v", err)
	}
	if _, err := parseFailpoint("raftBeforeSave|:panic"); err == nil {
		t.Error("an empty alternative was accepted")
	}
}

// TestParseUntilSnapshot: until-snapshot holds a partition of both directions between members, blackholed
// or refused.
func TestParseUntilSnapshot(t *testing.T) {
	s, err := Parse([]string{"partition:follower=until-snapshot@5s+60s"})
	if err != nil || !s.Entries[0].params.untilSnapshot {
		t.Fatalf("%+v, %v", s, err)
	}
	s, err = Parse([]string{"partition:follower=until-snapshot|refuse@5s+60s"})
	if err != nil || !s.Entries[0].params.untilSnapshot || !s.Entries[0].params.refuse {
		t.Fatalf("until-snapshot|refuse: %+v, %v", s, err)
	}
	for _, bad := range []string{"partition:follower=until-snapshot|clients@5s", "partition:follower=until-snapshot|in@5s"} {
		if _, err := Parse([]string{bad}); err == nil || !strings.Contains(err.Error(), "no other mode") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
