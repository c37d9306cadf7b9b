package clusters

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Agreement is the verdict of comparing the members' key-value hashes at one revision.
type Agreement string

// The verdicts. NotCompared is neither a pass nor a violation: it says only that no comparison was
// possible, and why.
const (
	// Agree: every member answered, all at the same compact revision, with the same hash.
	Agree Agreement = "agree"
	// Disagree: members at the same compact revision hashed the same revision differently, twice in a row:
	// they hold different data for the same history. Or, once the writes have stopped, members that
	// applied the same raft log stand at different revisions.
	Disagree Agreement = "disagree"
	// NotCompared: a member did not answer, the members' compact revisions differed on every attempt, or
	// the comparison ran out of time.
	NotCompared Agreement = "not compared"
)

// MemberHash is one member's answer to HashKV.
type MemberHash struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	// Revision is the member's current revision when it answered.
	Revision int64 `json:"revision"`
	// HashRevision is the revision the hash covers: every key-value revision up to it.
	HashRevision int64  `json:"hash_revision"`
	Hash         uint32 `json:"hash"`
	// CompactRevision is the member's compact revision when it hashed. Hashes of members with different
	// compact revisions cover different sets of revisions and cannot be compared.
	CompactRevision int64 `json:"compact_revision"`
	// Err says why the member gave no hash at the common revision.
	Err string `json:"error,omitempty"`
}

func (h MemberHash) answered(rev int64) bool { return h.Err == "" && h.HashRevision == rev }

// HashComparison is the result of CompareHashes.
type HashComparison struct {
	Agreement Agreement `json:"agreement"`
	// Revision is the common revision the members hashed (0 when none was found).
	Revision int64 `json:"revision"`
	// Members holds every member's last answer, in the cluster's order.
	Members []MemberHash `json:"members"`
	// Diverged names the members whose hash differs from the majority's; every member of the compact
	// revision that disagrees when no hash has a majority.
	Diverged []string `json:"diverged,omitempty"`
	// Detail says it in one line: who agrees at which revision with which hash; who disagrees, at which
	// revision, with both hashes; or why the members were not compared.
	Detail string `json:"detail"`
	// Attempts counts the rounds of HashKV calls it took (waiting for revisions to converge excluded).
	Attempts int `json:"attempts"`
}

// HashOptions tune CompareHashes.
type HashOptions struct {
	// Converge bounds the wait for every member to reach the same current revision, for a cluster whose
	// writes have stopped: the members are then compared at their common head. 0 compares at once at the
	// lowest revision every member has applied, which is what a cluster under load allows.
	Converge time.Duration
	// Attempts bounds the rounds when the hashes cannot be compared: a member did not answer, the compact
	// revisions differ (a compaction in progress), the revision was compacted meanwhile (default 5).
	Attempts int
	// Interval is the pause between rounds (default 200 ms).
	Interval time.Duration
	// CallTimeout bounds each HashKV call, which reads the member's whole key space (default 10 s, about
	// what etcd's own corruption check gives a peer).
	CallTimeout time.Duration
}

// CompareHashes reads every member's HashKV at one common revision and compares them, as etcd's own
// corruption check does: members holding the same history must hash it the same way.
//
// The common revision is the members' current revision when they agree on it (waiting up to
// o.Converge for followers to catch up), and otherwise the lowest revision they all have applied. Hashes
// are compared only between members with the same compact revision: a compaction changes what a hash
// covers, so differing compact revisions make hashes incomparable, never equal or unequal. A difference
// is read a second time before it is reported, so that a hash taken in the middle of a compaction cannot
// pass for corruption.
//
// Every member with a client URL is asked (for an external cluster, the members MemberList named), each
// over a connection of its own: the answer must come from that member, never from a balancer's pick, and
// a member restarted by a fault is reached at once instead of after gRPC's reconnect backoff.
func CompareHashes(ctx context.Context, c Cluster, o HashOptions) HashComparison {
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Interval <= 0 {
		o.Interval = 200 * time.Millisecond
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	var members []Member
	for _, m := range c.Members() {
		if m.ClientURL() != "" {
			members = append(members, m)
		}
	}
	if len(members) < 2 {
		return HashComparison{Agreement: NotCompared, Detail: fmt.Sprintf("%d member(s) with a client URL: nothing to compare", len(members))}
	}
	h := hasher{tls: c.TLS(), members: members, timeout: o.CallTimeout}
	h.auth = AuthOf(c) // HashKV is root's to ask for when authentication is on
	converge := time.Now().Add(o.Converge)
	var last HashComparison
	for attempt := 1; ; {
		answers := h.hashAll(ctx, 0, nil)
		rev, same := commonRevision(answers)
		if !same && time.Now().Before(converge) && pause(ctx, o.Interval) {
			continue // writes have stopped: the followers are still applying them
		}
		if !same && o.Converge > 0 {
			// Still apart once the writes have stopped: a member that applied the same raft log as the
			// others and stands at another revision applied it differently (it skipped or invented
			// writes), whatever its hashes at the lowest common revision say.
			if split, ok := revisionSplit(ctx, c, members, o.Interval); ok {
				split.Attempts = attempt
				return split
			}
		}
		if rev > 0 {
			answers = h.hashAll(ctx, rev, answers)
		}
		last = judgeHashes(rev, answers)
		last.Attempts = attempt
		if last.Agreement == Disagree {
			// Read again at the same revision before calling it corruption, until no member's hash
			// changes between two reads: a member still deleting what a compaction removes hashes the
			// revisions not deleted yet when the compaction keeps none (etcd's kvHasher skips unkept
			// revisions only when some are kept), so its hash moves as the compaction goes on.
			prev := answers
			var confirm HashComparison
			for round := 1; ; round++ {
				next := h.hashAll(ctx, rev, nil)
				confirm = judgeHashes(rev, next)
				if confirm.Agreement != Disagree || !hashMoved(prev, next) {
					break
				}
				if round >= settleRounds || !pause(ctx, o.Interval) {
					// Never still: no proof of different data either way.
					confirm.Agreement = NotCompared
					confirm.Diverged = nil
					confirm.Detail = fmt.Sprintf("hashes of revision %d still changing after %d reads (a compaction in progress): %s", rev, round, confirm.Detail)
					break
				}
				prev = next
			}
			confirm.Attempts = attempt
			if confirm.Agreement != NotCompared {
				return confirm
			}
			last = confirm
		}
		if last.Agreement == Agree || attempt >= o.Attempts || ctx.Err() != nil {
			break
		}
		attempt++
		if !pause(ctx, o.Interval) {
			break
		}
	}
	if last.Agreement == NotCompared && ctx.Err() != nil {
		last.Detail += fmt.Sprintf(" (cut short: %v)", ctx.Err())
	}
	return last
}

// revisionSplit asks every member for its applied raft index and revision, twice, interval apart. When
// every member reports one same applied index both times, and the index did not move, while their
// revisions differ, the members applied one log into different stores: it returns the disagreement, the
// members off the majority's revision diverged. Otherwise (a member did not answer, the log is still
// being applied) it says nothing.
func revisionSplit(ctx context.Context, c Cluster, members []Member, interval time.Duration) (HashComparison, bool) {
	st := newStatusClient(c.TLS())
	st.setAuth(AuthOf(c))
	defer st.close()
	type point struct{ applied, rev uint64 }
	read := func() ([]point, bool) {
		out := make([]point, len(members))
		for i, m := range members {
			r, err := st.Status(ctx, m)
			if err != nil || r.RaftAppliedIndex == 0 {
				return nil, false
			}
			out[i] = point{r.RaftAppliedIndex, uint64(r.Header.GetRevision())}
			if out[i].applied != out[0].applied {
				return nil, false
			}
		}
		return out, true
	}
	first, ok := read()
	if !ok || !pause(ctx, interval) {
		return HashComparison{}, false
	}
	second, ok := read()
	if !ok || first[0] != second[0] || !slices.Equal(first, second) {
		return HashComparison{}, false
	}
	count := map[uint64]int{}
	for _, p := range second {
		count[p.rev]++
	}
	if len(count) < 2 {
		return HashComparison{}, false
	}
	majority := second[0].rev
	for r, n := range count {
		if n > count[majority] || (n == count[majority] && r > majority) {
			majority = r
		}
	}
	out := HashComparison{Agreement: Disagree, Revision: int64(majority)}
	var parts []string
	for i, m := range members {
		out.Members = append(out.Members, MemberHash{Name: m.Name(), Endpoint: m.ClientURL(), Revision: int64(second[i].rev)})
		if second[i].rev != majority {
			out.Diverged = append(out.Diverged, m.Name())
			parts = append(parts, fmt.Sprintf("%s at revision %d", m.Name(), second[i].rev))
		}
	}
	out.Detail = fmt.Sprintf("every member applied the raft log up to index %d, yet %s, the others at %d: they applied the same entries into different data",
		second[0].applied, strings.Join(parts, ", "), majority)
	return out, true
}

// commonRevision returns the lowest current revision among the members that answered, and whether they
// all answered with that same revision; -1 when none answered. Members that did not answer are left to
// the rounds of CompareHashes: waiting for revisions to converge would not bring them back.
func commonRevision(answers []MemberHash) (rev int64, same bool) {
	rev, same = -1, true
	for _, a := range answers {
		switch {
		case a.Err != "":
		case rev < 0:
			rev = a.Revision
		case a.Revision != rev:
			same = false
			rev = min(rev, a.Revision)
		}
	}
	return rev, same && rev >= 0
}

// settleRounds bounds the reads of a disagreement whose hashes still move (with the default interval,
// about ten seconds: a compaction of etcd's default batches deletes thousands of revisions a second).
const settleRounds = 50

// hashMoved reports whether a member hashed the same revision at the same compact revision differently
// in prev and next: its data was still changing under the hash, as a compaction in progress changes it.
func hashMoved(prev, next []MemberHash) bool {
	before := map[string]MemberHash{}
	for _, a := range prev {
		if a.Err == "" {
			before[a.Name] = a
		}
	}
	for _, b := range next {
		a, ok := before[b.Name]
		if ok && b.Err == "" && a.HashRevision == b.HashRevision && a.CompactRevision == b.CompactRevision && a.Hash != b.Hash {
			return true
		}
	}
	return false
}

// judgeHashes decides what the members' answers at revision rev say. It is pure: CompareHashes decides
// when to ask again.
func judgeHashes(rev int64, answers []MemberHash) HashComparison {
	out := HashComparison{Agreement: NotCompared, Revision: rev, Members: answers}
	if rev <= 0 {
		out.Revision = 0
		out.Detail = "no member answered HashKV: " + answerErrors(answers)
		return out
	}
	// Members are comparable when they hashed rev at the same compact revision.
	byCompact := map[int64][]MemberHash{}
	var compacts []int64
	for _, a := range answers {
		if !a.answered(rev) {
			continue
		}
		if _, ok := byCompact[a.CompactRevision]; !ok {
			compacts = append(compacts, a.CompactRevision)
		}
		byCompact[a.CompactRevision] = append(byCompact[a.CompactRevision], a)
	}
	slices.Sort(compacts)
	var disagreements []string
	for _, compact := range compacts {
		group := byCompact[compact]
		hashes := groupByHash(group)
		if len(hashes) < 2 {
			continue
		}
		// The members outside the majority's hash diverged; without a majority, nobody can tell who did.
		majority := hashes[0]
		if 2*len(majority.names) <= len(group) {
			majority = hashGroup{}
		}
		var parts []string
		for _, g := range hashes {
			if g.hash != majority.hash || majority.names == nil {
				out.Diverged = append(out.Diverged, g.names...)
			}
			parts = append(parts, fmt.Sprintf("%s %s hash %d", joinNames(g.names), hasOrHave(g.names), g.hash))
		}
		disagreements = append(disagreements, fmt.Sprintf("members disagree at revision %d (%s): %s",
			rev, compactLabel(compact), strings.Join(parts, ", ")))
	}
	if len(disagreements) > 0 {
		out.Agreement = Disagree
		out.Detail = strings.Join(disagreements, "; ")
		return out
	}
	var missing []string
	for _, a := range answers {
		if !a.answered(rev) {
			missing = append(missing, fmt.Sprintf("%s: %s", a.Name, orUnknown(a.Err)))
		}
	}
	switch {
	case len(missing) > 0:
		out.Detail = fmt.Sprintf("not every member hashed revision %d: %s", rev, strings.Join(missing, "; "))
	case len(compacts) > 1:
		var parts []string
		for _, compact := range compacts {
			parts = append(parts, fmt.Sprintf("%s (%s)", joinNames(names(byCompact[compact])), compactLabel(compact)))
		}
		out.Detail = fmt.Sprintf("hashes of revision %d are not comparable: %s", rev, strings.Join(parts, ", "))
	default:
		out.Agreement = Agree
		out.Detail = fmt.Sprintf("%s agree at revision %d: hash %d, %s",
			joinNames(names(answers)), rev, answers[0].Hash, compactLabel(compacts[0]))
	}
	return out
}

type hashGroup struct {
	hash  uint32
	names []string
}

// groupByHash groups members by hash, names sorted, the largest group first (ties in the members' order).
func groupByHash(ms []MemberHash) []hashGroup {
	var out []hashGroup
	for _, m := range ms {
		i := slices.IndexFunc(out, func(g hashGroup) bool { return g.hash == m.Hash })
		if i < 0 {
			out = append(out, hashGroup{hash: m.Hash})
			i = len(out) - 1
		}
		out[i].names = append(out[i].names, m.Name)
	}
	for _, g := range out {
		slices.Sort(g.names)
	}
	slices.SortStableFunc(out, func(a, b hashGroup) int { return len(b.names) - len(a.names) })
	return out
}

// hasher asks members for their hashes, each over a fresh connection.
type hasher struct {
	tls     *tls.Config
	members []Member
	timeout time.Duration
	auth    *Auth // nil: the cluster has no authentication
}

// hashAll asks every member for its hash at rev (0: at its current revision) concurrently, and returns
// the answers in the members' order. A member whose answer in prev already covers rev is not asked again.
func (h hasher) hashAll(ctx context.Context, rev int64, prev []MemberHash) []MemberHash {
	out := make([]MemberHash, len(h.members))
	var wg sync.WaitGroup
	for i, m := range h.members {
		if prev != nil && prev[i].answered(rev) {
			out[i] = prev[i]
			continue
		}
		wg.Go(func() { out[i] = h.hash(ctx, m, rev) })
	}
	wg.Wait()
	return out
}

func (h hasher) hash(ctx context.Context, m Member, rev int64) MemberHash {
	out := MemberHash{Name: m.Name(), Endpoint: m.ClientURL()}
	if p, ok := m.(Process); ok && !p.Running() {
		out.Err = "not running"
		return out
	}
	conn, err := dial(m.ClientURL(), h.tls, h.auth)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(conn).HashKV(cctx, &pb.HashKVRequest{Revision: rev})
	if err != nil {
		err = rpctypes.Error(err)
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			out.Err = fmt.Sprintf("revision %d is compacted", rev)
		case errors.Is(err, rpctypes.ErrFutureRev):
			out.Err = fmt.Sprintf("revision %d is ahead of the member", rev)
		default:
			out.Err = err.Error()
		}
		return out
	}
	out.Revision, out.Hash, out.CompactRevision = resp.Header.GetRevision(), resp.Hash, resp.CompactRevision
	out.HashRevision = resp.HashRevision
	if out.HashRevision == 0 {
		// Older members do not say which revision they hashed: the one asked for, or their head.
		out.HashRevision = rev
		if rev == 0 {
			out.HashRevision = out.Revision
		}
	}
	return out
}

// dial opens a connection to the member at clientURL alone.
func dial(clientURL string, tlsConfig *tls.Config, a *Auth) (*grpc.ClientConn, error) {
	u, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("client URL %q: %w", clientURL, err)
	}
	creds := insecure.NewCredentials()
	if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if a != nil {
		opts = append(opts, a.dialOption(u.Host))
	}
	conn, err := grpc.NewClient(u.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", clientURL, err)
	}
	return conn, nil
}

// pause waits for d, or returns false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// compactLabel names a compact revision; etcd reports -1 for a store never compacted.
func compactLabel(rev int64) string {
	if rev <= 0 {
		return "never compacted"
	}
	return fmt.Sprintf("compact revision %d", rev)
}

// names returns the members' names, sorted.
func names(ms []MemberHash) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	slices.Sort(out)
	return out
}

// joinNames writes "m1", "m1 and m2", "m1, m2 and m3".
func joinNames(ns []string) string {
	if len(ns) <= 1 {
		return strings.Join(ns, "")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}

func hasOrHave(ns []string) string {
	if len(ns) == 1 {
		return "has"
	}
	return "have"
}

func answerErrors(answers []MemberHash) string {
	var parts []string
	for _, a := range answers {
		parts = append(parts, fmt.Sprintf("%s: %s", a.Name, orUnknown(a.Err)))
	}
	return strings.Join(parts, "; ")
}

func orUnknown(s string) string {
	if s == "" {
		return "no answer"
	}
	return s
}
