package faults

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// TargetKind says how a fault's targets are chosen. Targets are resolved when the fault is injected: the
// leader is looked up then, and random choices use the run's seed.
type TargetKind string

// Target kinds.
const (
	TargetLeader    TargetKind = "leader"    // the leader
	TargetFollower  TargetKind = "follower"  // one follower, at random
	TargetFollowers TargetKind = "followers" // every follower
	TargetRandom    TargetKind = "random"    // one member, at random
	TargetMinority  TargetKind = "minority"  // (n-1)/2 members at random: the side that cannot commit
	TargetMajority  TargetKind = "majority"  // n/2+1 members at random
	TargetAll       TargetKind = "all"       // every member
	TargetMember    TargetKind = "member"    // the member named in Target.Member
)

var targetKinds = []TargetKind{TargetLeader, TargetFollower, TargetFollowers, TargetRandom, TargetMinority, TargetMajority, TargetAll}

// Target names a fault's targets.
type Target struct {
	Kind TargetKind
	// Member is the member's name for TargetMember.
	Member string
}

func (t Target) String() string {
	if t.Kind == TargetMember {
		return t.Member
	}
	return string(t.Kind)
}

var memberName = regexp.MustCompile(`^m[1-9][0-9]*$`)

// ParseTarget parses a target: leader, follower, followers, random, minority, majority, all, or a member's
// name (m1, m2, ...).
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	if s == "member" || s == "any" {
		s = string(TargetRandom)
	}
	if slices.Contains(targetKinds, TargetKind(s)) {
		return Target{Kind: TargetKind(s)}, nil
	}
	if memberName.MatchString(s) {
		return Target{Kind: TargetMember, Member: s}, nil
	}
	return Target{}, fmt.Errorf("target %q: leader, follower, followers, random, minority, majority, all or a member name (m1, m2, ...)", s)
}

// validate checks the target against the cluster size (0: unknown).
func (t Target) validate(members int) error {
	if members == 0 {
		return nil
	}
	switch t.Kind {
	case TargetFollower, TargetFollowers:
		if members < 2 {
			return fmt.Errorf("a %d-member cluster has no follower", members)
		}
	case TargetMinority:
		if members < 3 {
			return fmt.Errorf("a %d-member cluster has no minority to single out", members)
		}
	case TargetMember:
		n, _ := strconv.Atoi(t.Member[1:])
		if n > members {
			return fmt.Errorf("no member %s in a %d-member cluster", t.Member, members)
		}
	}
	return nil
}

// resolve picks the target members among pool (the members a fault may act on), looking up the leader
// now. The leader is returned for the record even when the target does not depend on it (nil when no
// leader could be found).
func (e *Env) resolve(ctx context.Context, t Target, pool []clusters.Member) (targets []clusters.Member, leader clusters.Member, err error) {
	leader, lerr := e.Cluster.Leader(ctx)
	if lerr != nil {
		leader = nil
	}
	needLeader := t.Kind == TargetLeader || t.Kind == TargetFollower || t.Kind == TargetFollowers
	if needLeader && leader == nil {
		return nil, nil, fmt.Errorf("resolve target %s: %w", t, lerr)
	}
	var followers []clusters.Member
	for _, m := range pool {
		if leader == nil || m.Name() != leader.Name() {
			followers = append(followers, m)
		}
	}
	n := len(e.Cluster.Members())
	switch t.Kind {
	case TargetLeader:
		targets = []clusters.Member{leader}
	case TargetFollower:
		targets = e.pick(followers, 1)
	case TargetFollowers:
		targets = followers
	case TargetRandom:
		targets = e.pick(pool, 1)
	case TargetMinority:
		targets = e.pick(pool, (n-1)/2)
	case TargetMajority:
		targets = e.pick(pool, n/2+1)
	case TargetAll:
		targets = pool
	case TargetMember:
		for _, m := range e.Cluster.Members() {
			if m.Name() == t.Member {
				targets = []clusters.Member{m}
			}
		}
	}
	if len(targets) == 0 || slices.Contains(targets, nil) {
		return nil, leader, fmt.Errorf("resolve target %s: no such member available", t)
	}
	return targets, leader, nil
}

// pick chooses k members of pool at random (seeded), keeping the cluster's order.
func (e *Env) pick(pool []clusters.Member, k int) []clusters.Member {
	if k <= 0 || len(pool) < k {
		return nil
	}
	e.rngMu.Lock()
	idx := e.rng.Perm(len(pool))[:k]
	e.rngMu.Unlock()
	slices.Sort(idx)
	out := make([]clusters.Member, k)
	for i, j := range idx {
		out[i] = pool[j]
	}
	return out
}

// names returns the members' names.
func names(ms []clusters.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return out
}
